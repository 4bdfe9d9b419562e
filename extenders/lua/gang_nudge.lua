-- Take the nudges that are due: each gang's parked members, handed to exactly one caller.
-- ARGV: prefix, cooldown ms, max gangs. A gang still cooling down keeps its nudge for the end of
-- the cool-down (its members would only be turned away again). Returns {{gang, {uid, ref, ...}}, ...}.
local limit = tonumber(ARGV[3])

local function main()
  local now = now_ms()
  local out = {}
  for _, gk in ipairs(redis.call('ZRANGEBYSCORE', G_NUDGE, '-inf', now, 'LIMIT', 0, limit)) do
    local st = redis.call('HMGET', k_state(gk), 'state', 'cool')
    local cool = tonumber(st[2] or '')
    if st[1] == 'rejected' and cool and cool > now then
      redis.call('ZADD', G_NUDGE, cool, gk)
    else
      redis.call('ZREM', G_NUDGE, gk)
      local parked = redis.call('HGETALL', k_park(gk))
      redis.call('DEL', k_park(gk))
      if #parked > 0 then out[#out + 1] = {gk, parked} end
    end
  end
  return out
end

return main()
