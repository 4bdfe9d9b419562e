-- kube-scheduler filters a gang member again: any earlier bind call of it was abandoned (a replica
-- died holding it, or the caller timed out), so its held arrival and reservation are orphans and
-- must not count against it. A permitted gang keeps them: that member must bind (all-or-nothing).
-- ARGV: prefix, cooldown ms, gang, uid. Returns 1 when something was released, else 0.
local gk, uid = ARGV[3], ARGV[4]

local function main()
  if redis.call('HGET', k_state(gk), 'state') == 'permitted' then return 0 end
  local raw = redis.call('HGET', k_arr(gk), uid)
  if raw and cjson.decode(raw).st == 'b' then return 0 end
  local released = 0
  if raw then
    redis.call('HDEL', k_arr(gk), uid)
    redis.call('ZREM', k_lease(gk), uid)
    if redis.call('ZCARD', k_lease(gk)) == 0 then redis.call('SREM', G_ACTIVE, gk) end
    redis.call('PUBLISH', G_CHAN, gk)
    released = 1
  end
  if redis.call('ZSCORE', K_ASSUMED, uid) then
    unplace(uid)
    released = 1
  end
  return released
end

local reply = main()
finish()
return reply
