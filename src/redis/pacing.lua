-- Take one pacing slot in every window, or none, atomically (src/redis/pacing.ts; semantics in
-- src/telegram/pacing.ts). Each window key is a sorted set of the messages sent in it: score = the
-- slot's time in ms, member = "<ms>-<random>".
--
-- KEYS[i]       i = 1..n: the windows, `tw:pace:{tg}:<id>` (one hash tag: a cluster keeps them
--               on one slot); KEYS[n + i]: window i's hold key (`…:hold`, src/redis/pacing-hold.lua),
--               which exists while a Bot API 429's retry_after holds the window
-- ARGV[1]       now, ms since the epoch, or '' for the Redis server clock (TIME): every worker
--               then reads ONE clock, so workers with skewed clocks share the windows exactly
-- ARGV[2]       random suffix of the member
-- ARGV[2i+1]    limit of window i (integer >= 1)
-- ARGV[2i+2]    length of window i, ms
--
-- Returns {granted (1|0), wait_ms, at_ms}: granted → at_ms is the slot's time, recorded in every
-- window; refused → nothing is written, and wait_ms (> 0) is how long until every refusing window
-- has room.

local now
if ARGV[1] ~= '' then
  now = tonumber(ARGV[1])
else
  local t = redis.call('TIME')
  now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end

local n = #KEYS / 2
local wait = 0
local at = now
for i = 1, n do
  local key = KEYS[i]
  -- A held window refuses for the rest of its hold (PTTL, ms; -2 when absent, -1 never set here).
  local held = redis.call('PTTL', KEYS[n + i])
  if held > wait then wait = held end
  local limit = tonumber(ARGV[2 * i + 1])
  local window = tonumber(ARGV[2 * i + 2])
  -- The window is (now - window, now]: an entry exactly `window` old has left it.
  redis.call('ZREMRANGEBYSCORE', key, '-inf', now - window)
  local count = redis.call('ZCARD', key)
  local newest = redis.call('ZRANGE', key, -1, -1, 'WITHSCORES')
  -- A clock that steps back must not record before the newest entry (it would leave early).
  if newest[2] ~= nil and tonumber(newest[2]) > at then at = tonumber(newest[2]) end
  if count >= limit then
    local freeing = redis.call('ZRANGE', key, count - limit, count - limit, 'WITHSCORES')
    local w = tonumber(freeing[2]) + window - now
    if w > wait then wait = w end
  end
end

if wait > 0 then
  return {0, wait, now}
end

local ms = string.format('%d', at)
for i = 1, n do
  local key = KEYS[i]
  local window = tonumber(ARGV[2 * i + 2])
  redis.call('ZADD', key, ms, ms .. '-' .. ARGV[2])
  -- When the newest entry leaves the window the whole key is dead: expire it then.
  redis.call('PEXPIRE', key, at - now + window)
end
return {1, 0, at}
