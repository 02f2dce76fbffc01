-- Release one pacing slot (src/redis/pacing.ts `release`; semantics in src/telegram/pacing.ts): its
-- send is over, so its entry in every window counts from now (+ linger) instead of from its
-- provisional end, and the window's interval runs from there.
--
-- KEYS[i]   the slot's windows, `tw:pace:{tg}:<id>`
-- ARGV[1]   now, ms since the epoch, or '' for the Redis server clock (TIME: the clock pacing.lua
--           granted on)
-- ARGV[2]   the slot's token
-- ARGV[3]   linger_ms: the entry ends this long after now (integer >= 0)
--
-- Only ever LOWERS a score (ZADD XX LT): a slot released twice keeps the earlier end, an entry
-- already gone (its window passed) is not brought back. Returns how many windows were updated.

local now
if ARGV[1] ~= '' then
  now = tonumber(ARGV[1])
else
  local t = redis.call('TIME')
  now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end
local ends = string.format('%d', now + tonumber(ARGV[3]))
local updated = 0
for i = 1, #KEYS do
  updated = updated + redis.call('ZADD', KEYS[i], 'XX', 'LT', 'CH', ends, ARGV[2])
end
return updated
