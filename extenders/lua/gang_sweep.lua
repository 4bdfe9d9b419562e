-- Periodic upkeep any replica may run: bring every gang with held arrivals up to date (lapsed
-- arrivals, closed windows), give a free assembling slot to the first queued gang with parked
-- members (in case the nudge of the moment that freed it was lost), and delete gangs idle for
-- longer than IDLE with nothing held.
-- ARGV: prefix, cooldown ms, idle ms, max gangs deleted per call, max assembling.
-- Returns the gangs deleted.
local idle, limit, max_asm = tonumber(ARGV[3]), tonumber(ARGV[4]), tonumber(ARGV[5])

local function main()
  local now = now_ms()
  for _, gk in ipairs(redis.call('SMEMBERS', G_ACTIVE)) do maintain(gk, now) end
  if redis.call('ZCARD', G_ASM) < max_asm then nudge_queue_head(now) end
  local removed = {}
  for _, gk in ipairs(redis.call('ZRANGEBYSCORE', G_INDEX, '-inf', now - idle, 'LIMIT', 0, limit)) do
    if redis.call('ZCARD', k_lease(gk)) == 0 then
      redis.call('DEL', k_state(gk), k_arr(gk), k_lease(gk), k_park(gk))
      redis.call('ZREM', G_INDEX, gk)
      redis.call('ZREM', G_QUEUE, gk)
      redis.call('ZREM', G_ASM, gk)
      redis.call('ZREM', G_NUDGE, gk)
      redis.call('SREM', G_ACTIVE, gk)
      removed[#removed + 1] = gk
    end
  end
  return removed
end

local reply = main()
finish()
return reply
