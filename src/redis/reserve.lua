-- One reservation in several TRUE sliding windows at once, atomically (src/redis/rate-limit.ts
-- RedisRateLimiter.reserve; semantics in src/rate-limit/limiter.ts RateLimiter.reserve): an entry
-- is recorded in EVERY window when each has room, else in none. Counting before the guarded work
-- (a console login's argon2 verification) is what makes N parallel attempts count as N: a check
-- made first and a record made after the work lets all N pass the check (issue 17 item 2).
-- Each window is a sorted set like sliding-window.lua's: score = time in ms, and here the member
-- is ARGV[2] itself (random, one per reservation), so the reservation is given back with
-- ZREM <key> <member> on each key.
--
-- KEYS[i]      window i, `tw:rl:<id>`; with Redis Cluster, give them one hash tag (`{address}`)
-- ARGV[1]      now, ms since the epoch, or '' for the Redis server clock (TIME), as in
--              sliding-window.lua: every replica then reads one clock
-- ARGV[2]      the member (random hex, unique per reservation)
-- ARGV[2i+1]   limit of window i (integer >= 1)
-- ARGV[2i+2]   length of window i, ms
--
-- Returns {allowed (1|0), wait_ms, remaining}: wait_ms (refused only) is how long until every
-- full window has room, i.e. the latest of the times when their freeing entries leave them;
-- remaining (allowed only) is the room left in window 1 after this entry (the console's sign-in
-- page warns before the lock with it).

local now
if ARGV[1] ~= '' then
  now = tonumber(ARGV[1])
else
  local t = redis.call('TIME')
  now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end

local refused = false
local wait = 0
for i, key in ipairs(KEYS) do
  local limit = tonumber(ARGV[2 * i + 1])
  local window = tonumber(ARGV[2 * i + 2])
  -- The window is (now - window, now]: an entry exactly `window` old has left it.
  redis.call('ZREMRANGEBYSCORE', key, '-inf', now - window)
  local count = redis.call('ZCARD', key)
  if count >= limit then
    refused = true
    -- Room appears when the entry at rank count - limit leaves (see sliding-window.lua).
    local freeing = redis.call('ZRANGE', key, count - limit, count - limit, 'WITHSCORES')
    local w = tonumber(freeing[2]) + window - now
    if w > wait then wait = w end
  end
end
if refused then
  if wait < 1 then wait = 1 end
  return {0, wait, 0}
end

local remaining = 0

for i, key in ipairs(KEYS) do
  local window = tonumber(ARGV[2 * i + 2])
  -- A clock that steps back must not record before the newest entry (it would leave early).
  local newest = redis.call('ZRANGE', key, -1, -1, 'WITHSCORES')
  local at = now
  if newest[2] ~= nil and tonumber(newest[2]) > at then at = tonumber(newest[2]) end
  -- %d: ms since the epoch need 13 digits; never let a float format (1.7e+12) into the score.
  redis.call('ZADD', key, string.format('%d', at), ARGV[2])
  -- When the newest entry leaves the window the whole key is dead: expire it then.
  redis.call('PEXPIRE', key, at - now + window)
  if i == 1 then remaining = tonumber(ARGV[3]) - redis.call('ZCARD', key) end
end
return {1, 0, remaining}
