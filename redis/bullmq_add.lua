--[[
  Adds one job with a custom id to a BullMQ 5 queue, as BullMQ's own
  Queue.add does (commands/addStandardJob-9.lua of bullmq 5.81.5, for a job
  with no parent, no delay, no priority and no deduplication), in one
  atomic step: a job whose hash exists already, in any state, is left as it
  is, and the add says so ('duplicated'), as BullMQ's does.

  KEYS[1] wait      KEYS[2] paused    KEYS[3] meta      KEYS[4] id
  KEYS[5] events    KEYS[6] marker    KEYS[7] active    KEYS[8] the job's hash

  ARGV[1] job id    ARGV[2] name      ARGV[3] data (JSON)
  ARGV[4] opts (JSON)                 ARGV[5] timestamp (ms)

  Returns 1 when it added the job, 0 when the job was there already.
]]
local rcall = redis.call

-- BullMQ counts every add in the id counter, custom ids too.
rcall("INCR", KEYS[4])

local maxEvents = rcall("HGET", KEYS[3], "opts.maxLenEvents")
if not maxEvents then
  maxEvents = 10000
  rcall("HSET", KEYS[3], "opts.maxLenEvents", maxEvents)
end

if rcall("EXISTS", KEYS[8]) == 1 then
  rcall("XADD", KEYS[5], "MAXLEN", "~", maxEvents, "*", "event", "duplicated", "jobId", ARGV[1])
  return 0
end

rcall("HMSET", KEYS[8], "name", ARGV[2], "data", ARGV[3], "opts", ARGV[4],
  "timestamp", ARGV[5], "delay", 0, "priority", 0)
rcall("XADD", KEYS[5], "*", "event", "added", "jobId", ARGV[1], "name", ARGV[2])

-- The wait list, or the paused one while the queue is paused; the marker
-- wakes a worker unless the queue is paused or at its concurrency.
local attrs = rcall("HMGET", KEYS[3], "paused", "concurrency")
local target, held = KEYS[1], false
if attrs[1] then
  target, held = KEYS[2], true
elseif attrs[2] and rcall("LLEN", KEYS[7]) >= tonumber(attrs[2]) then
  held = true
end
rcall("LPUSH", target, ARGV[1])
if not held then
  rcall("ZADD", KEYS[6], 0, "0")
end

rcall("XADD", KEYS[5], "MAXLEN", "~", maxEvents, "*", "event", "waiting", "jobId", ARGV[1])
return 1
