-- Periodic upkeep any replica may run: bring every gang with held arrivals up to date (lapsed
-- arrivals, closed windows) and delete gangs idle for longer than IDLE with nothing held.
-- ARGV: prefix, cooldown ms, idle ms, max gangs deleted per call. Returns the gangs deleted.
local idle, limit = tonumber(ARGV[3]), tonumber(ARGV[4])

local function main()
  local now = now_ms()
  for _, gk in ipairs(redis.call('SMEMBERS', G_ACTIVE)) do maintain(gk, now) end
  local removed = {}
  for _, gk in ipairs(redis.call('ZRANGEBYSCORE', G_INDEX, '-inf', now - idle, 'LIMIT', 0, limit)) do
    if redis.call('ZCARD', k_lease(gk)) == 0 then
      redis.call('DEL', k_state(gk), k_arr(gk), k_lease(gk))
      redis.call('ZREM', G_INDEX, gk)
      redis.call('ZREM', G_QUEUE, gk)
      redis.call('ZREM', G_ASM, gk)
      redis.call('SREM', G_ACTIVE, gk)
      removed[#removed + 1] = gk
    end
  end
  return removed
end

local reply = main()
finish()
return reply
