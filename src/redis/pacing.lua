-- Take one pacing slot in every window, or none, atomically (src/redis/pacing.ts; semantics in
-- src/telegram/pacing.ts). Each window key is a sorted set of the messages sent in it: member = the
-- slot's token, score = when its send ENDED, ms (src/redis/pacing-release.lua lowers it to the
-- release time), or, while it is in flight, a provisional end: the grant + flight_ms, the latest the
-- send can end. An entry whose score is still ahead of now is in flight.
--
-- KEYS[i]       i = 1..n: the windows, `tw:pace:{tg}:<id>` (one hash tag: a cluster keeps them
--               on one slot); KEYS[n + i]: window i's hold key (`…:hold`, src/redis/pacing-hold.lua),
--               which exists while a Bot API 429's retry_after holds the window
-- ARGV[1]       now, ms since the epoch, or '' for the Redis server clock (TIME): every worker
--               then reads ONE clock, so workers with skewed clocks share the windows exactly
-- ARGV[2]       the slot's token (the member; random, unique)
-- ARGV[3]       flight_ms: the provisional end of the slot's send, ms after now (integer >= 0)
-- ARGV[2i+2]    limit of window i (integer >= 1)
-- ARGV[2i+3]    length of window i, ms
--
-- Returns {granted (1|0), wait_ms, at_ms}: granted → at_ms (= now) is the slot's time, and the
-- slot is recorded in flight in every window; refused → nothing is written, and wait_ms (> 0) is
-- how long until every refusing window has room, or at least may have: a window whose freeing
-- entry is in flight answers its own length (that send ends no earlier than now).

local now
if ARGV[1] ~= '' then
  now = tonumber(ARGV[1])
else
  local t = redis.call('TIME')
  now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end
local flight = tonumber(ARGV[3])

local n = #KEYS / 2
local wait = 0
for i = 1, n do
  local key = KEYS[i]
  -- A held window refuses for the rest of its hold (PTTL, ms; -2 when absent, -1 never set here).
  local held = redis.call('PTTL', KEYS[n + i])
  if held > wait then wait = held end
  local limit = tonumber(ARGV[2 * i + 2])
  local window = tonumber(ARGV[2 * i + 3])
  -- The window is (now - window, +inf): a send that ended exactly `window` ago has left it; one in
  -- flight (score ahead of now) is in it.
  redis.call('ZREMRANGEBYSCORE', key, '-inf', now - window)
  local count = redis.call('ZCARD', key)
  if count >= limit then
    local freeing = redis.call('ZRANGE', key, count - limit, count - limit, 'WITHSCORES')
    local ends = tonumber(freeing[2])
    local w = window
    if ends <= now then w = ends + window - now end
    if w > wait then wait = w end
  end
end

if wait > 0 then
  return {0, wait, now}
end

local ends = string.format('%d', now + flight)
for i = 1, n do
  local key = KEYS[i]
  local window = tonumber(ARGV[2 * i + 3])
  redis.call('ZADD', key, ends, ARGV[2])
  -- When the newest provisional end leaves the window the whole key is dead: it expires then (a
  -- release only lowers scores, and never lengthens this).
  local ttl = flight + window
  if redis.call('PTTL', key) < ttl then redis.call('PEXPIRE', key, ttl) end
end
return {1, 0, now}
