-- Hold one pacing window (src/redis/pacing.ts `hold`; semantics in src/telegram/pacing.ts): a Bot
-- API 429 with retry_after asks the bot to wait that long before sending to the chat again.
--
-- KEYS[1]  the window's hold key, `tw:pace:{tg}:<window id>:hold`
-- ARGV[1]  the hold, ms from now (integer >= 1), on the Redis server's clock (PX)
--
-- A shorter hold never shortens a longer one. Returns the hold's remaining ms.
local ms = tonumber(ARGV[1])
local left = redis.call('PTTL', KEYS[1])
if left < ms then
  redis.call('SET', KEYS[1], '1', 'PX', ms)
  return ms
end
return left
