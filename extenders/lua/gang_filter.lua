-- Filter-time gang check, in two phases so the caller's capacity check runs only when it matters.
-- ARGV: prefix, cooldown ms, gang, phase, member uid, member namespace/name, order score,
-- max assembling, queue idle ms, min members, the caller's snapshot generation, '1' when the
-- member is not in that snapshot yet (both tell the reconciler, gang_reconcile.lua, that the gang
-- has members its own snapshot may not show), the gang's priority.
-- phase 'state': what the gang is now; an admitted gang needs no capacity check (its members
--   held at bind are already its reservations, and those on their way to bind are unknown here).
-- phase 'park': only park the member (it failed the node predicates everywhere).
-- phase 'ready' | 'unready': the caller's member-count and capacity checks passed | failed (an
--   unready gang gives up its queue place, and its admission while nothing of it is held).
-- A member turned away is parked (see gang_common.lua); one let through is no longer parked, and
-- the first one let through nudges its parked siblings (they wait as unschedulable otherwise).
-- Returns {'cooling', why, ms left} | {'permitted'} | {'unready'} | {'check'} | {'parked'} |
--         {'admitted', held arrivals, ms left in the window or -1} | {'queued', position, assembling gangs}
local gk, phase, uid, ref = ARGV[3], ARGV[4], ARGV[5], ARGV[6]
local score, max_asm, idle, minimum = tonumber(ARGV[7]), tonumber(ARGV[8]), tonumber(ARGV[9]), ARGV[10]
local gen, unseen, prio = tonumber(ARGV[11]), ARGV[12] == '1', tonumber(ARGV[13])

local function asked(now)
  local h = k_state(gk)
  if gen >= tonumber(redis.call('HGET', h, 'asked_gen') or '0') then
    redis.call('HSET', h, 'asked_gen', gen, 'asked', now)
  end
  if unseen and uid ~= '' then redis.call('HSET', k_unseen(gk), uid, now) end
  redis.call('ZADD', G_INDEX, now, gk)
end

local function let_through(now)
  if uid ~= '' then redis.call('HDEL', k_park(gk), uid) end
  if redis.call('EXISTS', k_park(gk)) == 1 then nudge(gk, now, now) end
end

local function admitted_reply(now)
  let_through(now)
  local deadline = tonumber(redis.call('HGET', k_state(gk), 'deadline') or '')
  return {'admitted', redis.call('HLEN', k_arr(gk)), deadline and (deadline - now) or -1}
end

local function main()
  local now = now_ms()
  asked(now)
  if phase == 'park' then
    park(gk, uid, ref, now)
    return {'parked'}
  end
  local state = maintain(gk, now)
  if state == 'rejected' then
    park(gk, uid, ref, now)
    local st = redis.call('HMGET', k_state(gk), 'why', 'cool')
    return {'cooling', st[1] or '', tonumber(st[2] or '0') - now}
  end
  if state == 'permitted' then
    activity(gk, now)
    let_through(now)
    return {'permitted'}
  end
  if phase == 'unready' then
    -- Cannot assemble now: give up a queue place, and an admission with nothing held yet.
    park(gk, uid, ref, now)
    redis.call('ZREM', G_QUEUE, gk)
    if redis.call('HLEN', k_arr(gk)) == 0 and redis.call('ZREM', G_ASM, gk) == 1 then nudge_queue_head(now) end
    return {'unready'}
  end
  if redis.call('ZSCORE', G_ASM, gk) and not overstayed(gk, now, idle) then
    activity(gk, now)
    redis.call('ZADD', G_ASM, now, gk)
    return admitted_reply(now)
  end
  if phase == 'state' then return {'check'} end
  activity(gk, now)
  redis.call('HSET', k_state(gk), 'min', minimum)
  local admitted, position = admit(gk, now, score, max_asm, idle, prio)
  if admitted then return admitted_reply(now) end
  park(gk, uid, ref, now)
  return {'queued', position, assembling_list()}
end

local reply = main()
finish()
return reply
