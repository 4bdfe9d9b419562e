-- A replica's held calls of one gang check in: refresh their arrival leases and reservations,
-- and read the gang's state. ARGV: prefix, cooldown ms, gang, lease ms, hold ttl ms, then
-- pairs uid, token. Returns {state, why (of a rejection, or of the reconciler's last release),
-- ms left in the window or -1, ms of cool-down left or -1, one 1/0 per pair: the arrival is still
-- this call's and its pod still reserved}. maintain() drops a held arrival whose pod is no longer
-- placed (deleted while its call was held), so that call reads 0 (lost) and answers an error
-- instead of keeping a dead member in the quorum.
local gk, lease, hold_ttl = ARGV[3], tonumber(ARGV[4]), tonumber(ARGV[5])

local function main()
  local now = now_ms()
  local state = maintain(gk, now)
  local st = redis.call('HMGET', k_state(gk), 'why', 'deadline', 'cool', 'released')
  local deadline, cool = tonumber(st[2] or ''), tonumber(st[3] or '')
  local why = state == 'rejected' and st[1] or st[4]
  local out = {state, why or '', deadline and (deadline - now) or -1, cool and (cool - now) or -1}
  local any = false
  for i = 6, #ARGV, 2 do
    local raw = redis.call('HGET', k_arr(gk), ARGV[i])
    local mine = 0
    if raw then
      local rec = cjson.decode(raw)
      if rec.t == ARGV[i + 1] and (rec.st == 'b' or redis.call('HEXISTS', K_PODLOC, ARGV[i]) == 1) then
        mine = 1
        any = true
        if rec.st ~= 'b' then
          redis.call('ZADD', k_lease(gk), 'XX', now + lease, ARGV[i])
          redis.call('ZADD', K_ASSUMED, 'XX', now + hold_ttl, ARGV[i])
        end
      end
    end
    out[#out + 1] = mine
  end
  if any then
    activity(gk, now)
    if redis.call('ZSCORE', G_ASM, gk) then redis.call('ZADD', G_ASM, now, gk) end
  end
  return out
end

local reply = main()
finish()
return reply
