-- inbox schema on PostgreSQL, version 5: reserved for a change made
-- beside this one; it changes nothing. Whichever 0005 lands first, the
-- other is dropped when the two meet.
SELECT 1;
