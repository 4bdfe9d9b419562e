-- Held members' calls end. ARGV: prefix, cooldown ms, gang, assumed ttl ms, then triples
-- uid, token, outcome ('bound' | 'failed' | 'withdraw'). 'bound': the API bound the pod, or its
-- Binding got no answer and may still be made; its reservation now waits for the watch to confirm
-- it (or expires). 'failed': withdraw the arrival and release
-- the reservation (the bind failed). 'withdraw': the same, but only while the gang is not
-- permitted (its caller went away while held); a permitted gang keeps every arrival, since
-- all-or-nothing needs each of them bound. Only the call that owns an arrival (same token)
-- changes it. Returns one number per triple: 1 changed, 0 nothing to change, 2 refused
-- ('withdraw' on a permitted gang: the caller must bind).
local gk, ttl = ARGV[3], tonumber(ARGV[4])

local function one(now, uid, token, outcome)
  local raw = redis.call('HGET', k_arr(gk), uid)
  if not raw then return 0 end  -- dropped (lease lapsed, rejected): whoever dropped it released it
  local rec = cjson.decode(raw)
  if rec.t ~= token then return 0 end
  if outcome == 'withdraw' and redis.call('HGET', k_state(gk), 'state') == 'permitted' then return 2 end
  redis.call('ZREM', k_lease(gk), uid)
  if outcome == 'bound' then
    rec.st = 'b'
    redis.call('HSET', k_arr(gk), uid, cjson.encode(rec))
    redis.call('ZADD', K_ASSUMED, 'XX', now + ttl, uid)
  else
    redis.call('HDEL', k_arr(gk), uid)
    release(uid)
  end
  return 1
end

local function main()
  local now = now_ms()
  local out, changed = {}, false
  for i = 5, #ARGV, 3 do
    out[#out + 1] = one(now, ARGV[i], ARGV[i + 1], ARGV[i + 2])
    if out[#out] == 1 then changed = true end
  end
  -- A call whose arrival is already gone must not bring back a gang that vanished meanwhile.
  if changed then activity(gk, now) end
  if redis.call('ZCARD', k_lease(gk)) == 0 then redis.call('SREM', G_ACTIVE, gk) end
  return out
end

local reply = main()
finish()
return reply
