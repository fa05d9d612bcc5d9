-- inbox schema on PostgreSQL, version 9: reserved for the dismissed status.
SELECT 1;
