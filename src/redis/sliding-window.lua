-- One request against a TRUE sliding window, atomically (src/redis/rate-limit.ts; semantics in
-- src/rate-limit/limiter.ts). The window key is a sorted set of the ACCEPTED requests in the window:
-- score = time of the request in ms, member = "<ms>-<random>" (unique, so two requests in the same
-- millisecond are two entries).
--
-- KEYS[1]  the window, `tw:rl:<id>`
-- ARGV[1]  limit: requests per window (integer >= 1)
-- ARGV[2]  window length, ms (60000)
-- ARGV[3]  now, ms since the epoch, or '' for the Redis server clock (TIME). Production passes '':
--          every replica then reads ONE clock, so replicas with skewed clocks share one window.
--          Tests pass a time to place requests exactly (e.g. on either side of a minute).
-- ARGV[4]  random suffix of the member
-- ARGV[5]  'peek': count only, record nothing (returns {1, room left, 0} when there is room)
--
-- Returns {allowed (1|0), remaining, wait_ms}: wait_ms (refused only) is how long until a request
-- would be allowed, i.e. until the entry that frees a slot leaves the window.
--
-- Refused requests are NOT recorded (nothing is written): a client hammering while limited is
-- served again as soon as its oldest accepted request leaves the window, the same rule as the
-- in-process MemoryRateLimiter. TIME before a write is fine: Redis >= 5 replicates the effects
-- of a script (its ZADD with the resulting score), not the script itself.

local key = KEYS[1]
local limit = tonumber(ARGV[1])
local window = tonumber(ARGV[2])
local now
if ARGV[3] ~= '' then
  now = tonumber(ARGV[3])
else
  local t = redis.call('TIME')
  now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end

-- The window is (now - window, now]: an entry exactly `window` old has left it.
redis.call('ZREMRANGEBYSCORE', key, '-inf', now - window)
local count = redis.call('ZCARD', key)

if count < limit and ARGV[5] == 'peek' then
  return {1, limit - count, 0}
end

if count < limit then
  -- A clock that steps back must not record before the newest entry (it would leave early).
  local newest = redis.call('ZRANGE', key, -1, -1, 'WITHSCORES')
  local at = now
  if newest[2] ~= nil and tonumber(newest[2]) > at then at = tonumber(newest[2]) end
  -- %d: ms since the epoch need 13 digits; never let a float format (1.7e+12) into the member.
  local ms = string.format('%d', at)
  redis.call('ZADD', key, ms, ms .. '-' .. ARGV[4])
  -- When the newest entry leaves the window the whole key is dead: expire it then.
  redis.call('PEXPIRE', key, at - now + window)
  return {1, limit - count - 1, 0}
end

-- Refused. Room appears when count - limit + 1 entries have left the window, i.e. when the entry
-- at rank count - limit does (the oldest one when count == limit; a lowered limit makes count
-- exceed it).
local freeing = redis.call('ZRANGE', key, count - limit, count - limit, 'WITHSCORES')
local wait = tonumber(freeing[2]) + window - now
return {0, 0, wait}
