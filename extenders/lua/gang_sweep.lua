-- Periodic upkeep any replica may run: bring every gang with held arrivals up to date (lapsed
-- arrivals, closed windows), take the slot from an admitted gang that has had nothing arrive for
-- QUEUE_IDLE (no member may reach filter to notice: kube-scheduler parks them all), give a free
-- assembling slot to the first queued gang with parked members (in case the nudge of the moment
-- that freed it was lost), and delete gangs idle for longer than IDLE with nothing held.
-- ARGV: prefix, cooldown ms, idle ms, max gangs deleted per call, max assembling, queue idle ms.
-- Returns the gangs deleted.
local idle, limit, max_asm = tonumber(ARGV[3]), tonumber(ARGV[4]), tonumber(ARGV[5])
local queue_idle = tonumber(ARGV[6])

local function main()
  local now = now_ms()
  for _, gk in ipairs(redis.call('SMEMBERS', G_ACTIVE)) do maintain(gk, now) end
  for _, gk in ipairs(redis.call('ZRANGE', G_ASM, 0, -1)) do
    maintain(gk, now)
    if redis.call('ZSCORE', G_ASM, gk) and overstayed(gk, now, queue_idle) then yield_slot(gk, now) end
  end
  local free = max_asm - redis.call('ZCARD', G_ASM)
  if free > 0 then nudge_queue_head(now, free) end
  local removed = {}
  for _, gk in ipairs(redis.call('ZRANGEBYSCORE', G_INDEX, '-inf', now - idle, 'LIMIT', 0, limit)) do
    if redis.call('ZCARD', k_lease(gk)) == 0 then
      redis.call('DEL', k_state(gk), k_arr(gk), k_lease(gk), k_park(gk), k_unseen(gk))
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
