-- A gang member's bind call arrives: reserve its node and record it, in one step.
-- ARGV: prefix, cooldown ms, gang, uid, node, pod record (payload), expected node generation
-- ('' = unconditional), hold ttl ms, arrival json {pod, node, replica, t, st}, lease ms,
-- window ms, min members, order score, max assembling, queue idle ms, assumed ttl ms, the gang's
-- priority, then the uids of the live members the caller's snapshot shows placed (bound or held,
-- not terminating); only those still placed now count.
-- Returns {'rejected', why, cool ms left} | {'notadmitted', position, assembling gangs} |
--   {'conflict', node generation} | {'bound', node} | {'permitted', held, bound, replaced} |
--   {'wait', ms left in the window, held, bound, replaced}; replaced: the token and state of
--   another call's arrival for this pod that this one replaced, '' when none
local gk, uid, node, payload, expected = ARGV[3], ARGV[4], ARGV[5], ARGV[6], ARGV[7]
local hold_ttl, info, lease = tonumber(ARGV[8]), ARGV[9], tonumber(ARGV[10])
local window, minimum, score = tonumber(ARGV[11]), tonumber(ARGV[12]), tonumber(ARGV[13])
local max_asm, idle, assumed_ttl = tonumber(ARGV[14]), tonumber(ARGV[15]), tonumber(ARGV[16])
local prio = tonumber(ARGV[17])
local FIRST_PLACED = 18

local function main()
  local now = now_ms()
  local h = k_state(gk)
  local state = maintain(gk, now)
  if state == 'rejected' then
    local st = redis.call('HMGET', h, 'why', 'cool')
    return {'rejected', st[1] or '', tonumber(st[2] or '0') - now}
  end
  activity(gk, now)
  local placed = {}
  for i = FIRST_PLACED, #ARGV do placed[#placed + 1] = ARGV[i] end
  local held, others = live_members(gk, uid, placed)
  if state == 'permitted' and held == 0 and held + others + 1 < minimum then
    -- The gang that was permitted is gone (its pods deleted, e.g. the job was recreated under
    -- the same name): this is a new gang and must assemble again.
    redis.call('HDEL', h, 'state', 'permitted_at')
    redis.call('DEL', k_arr(gk))
    state = ''
  end
  if state ~= 'permitted' then
    local admitted, position = admit(gk, now, score, max_asm, idle, prio)
    if not admitted then return {'notadmitted', position, assembling_list()} end
  end
  local failed = reserve(uid, node, payload, expected, hold_ttl, now)
  if failed then return failed end
  -- An arrival of another call for this pod is replaced (its held call then reads itself lost).
  local replaced = ''
  local before = redis.call('HGET', k_arr(gk), uid)
  if before then
    local rec = cjson.decode(before)
    if rec.t ~= cjson.decode(info).t then replaced = (rec.t or '') .. ' (' .. (rec.st or '') .. ')' end
  end
  redis.call('HSET', k_arr(gk), uid, info)
  redis.call('HSET', h, 'min', minimum, 'bound', others)
  if state == 'permitted' then
    redis.call('ZADD', K_ASSUMED, 'XX', now + assumed_ttl, uid)  -- it binds now, as in permit()
    return {'permitted', held + 1, others, replaced}
  end
  redis.call('ZADD', k_lease(gk), now + lease, uid)
  redis.call('SADD', G_ACTIVE, gk)
  redis.call('HSET', h, 'arrived', now)
  local deadline = tonumber(redis.call('HGET', h, 'deadline') or '')
  if not deadline then
    deadline = now + window
    redis.call('HSET', h, 'first', now, 'deadline', deadline, 'window', window)
    redis.call('HDEL', h, 'released')
  end
  if held + 1 + others >= minimum then
    permit(gk, now, assumed_ttl)
    return {'permitted', held + 1, others, replaced}
  end
  return {'wait', deadline - now, held + 1, others, replaced}
end

local reply = main()
finish()
return reply
