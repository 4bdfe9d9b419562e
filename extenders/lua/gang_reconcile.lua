-- The watch leader's reconciler makes gang bookkeeping follow the pods (extenders/gang/reconcile.py).
-- ARGV: prefix, cooldown ms, the generation of the snapshot the actions were planned on, unseen grace
-- ms, asked horizon ms, assumed ttl ms, then one JSON array of actions:
--   {g = gang, live = live members, min = minimum (-1: cannot be told), placed = {uids of live placed
--    members}, stray = {uids of arrivals whose pod is no longer a live member}, why = text}
-- An action is skipped ('deferred') while the gang may have members that snapshot does not show: a
-- member was filtered on a newer snapshot (within the horizon), or before the watch had written it
-- and the snapshot still lacks its write (or its deletion), within the grace. Otherwise, by the
-- snapshot's count:
--   live 0                   -> 'vanished': every trace of the gang goes (see vanish())
--   not permitted and short  -> 'released' when it held anything (see stand_down()), else 'kept'
--   else                     -> a gang whose held and placed members reach the minimum now (it
--                               was lowered) is 'permitted'; else 'kept'
-- A changed minimum is written first (removed when it cannot be told), and the members parked under
-- the old one are nudged.
-- Stray arrivals of a gang not permitted are dropped first (a pod relabelled while held at bind).
-- Returns {gang, outcome, ...}.
local gen, grace, horizon, ttl = tonumber(ARGV[3]), tonumber(ARGV[4]), tonumber(ARGV[5]), tonumber(ARGV[6])
local actions = cjson.decode(ARGV[7])

local function fresh(gk, now)
  local st = redis.call('HMGET', k_state(gk), 'asked_gen', 'asked')
  local asked = tonumber(st[2] or '')
  if tonumber(st[1] or '0') > gen and asked and now - asked < horizon then return true end
  local waiting = false
  local unseen = redis.call('HGETALL', k_unseen(gk))
  for i = 1, #unseen, 2 do
    local written = tonumber(redis.call('ZSCORE', K_PENDINGZ, unseen[i]) or '')
    if (written and written <= gen) or now - tonumber(unseen[i + 1]) >= grace then
      redis.call('HDEL', k_unseen(gk), unseen[i])
    else
      waiting = true
    end
  end
  return waiting
end

local function one(a, now)
  local gk = a.g
  if redis.call('ZSCORE', G_INDEX, gk) == false then return 'gone' end
  if fresh(gk, now) then return 'deferred' end
  local state = maintain(gk, now)
  if a.live == 0 then
    vanish(gk, now)
    return 'vanished'
  end
  if state == 'permitted' then return 'kept' end
  local dropped = false
  for _, uid in ipairs(a.stray) do
    if drop_arrival(gk, uid) then dropped = true end
  end
  if dropped then redis.call('PUBLISH', G_CHAN, gk) end
  local before = tonumber(redis.call('HGET', k_state(gk), 'min') or '')
  local minimum = a.min >= 0 and a.min or nil
  if minimum ~= before then
    if minimum then redis.call('HSET', k_state(gk), 'min', minimum) else redis.call('HDEL', k_state(gk), 'min') end
    -- Members parked for the old minimum (too few, or none known) may go on under the new one.
    if minimum and redis.call('EXISTS', k_park(gk)) == 1 then nudge(gk, now, now) end
  end
  if not minimum or a.live < minimum then
    return stand_down(gk, now, a.why) and 'released' or 'kept'
  end
  if state == '' and redis.call('HLEN', k_arr(gk)) > 0 then
    local held, others = live_members(gk, '', a.placed)
    if held > 0 and held + others >= a.min then
      redis.call('HSET', k_state(gk), 'bound', others)
      permit(gk, now, ttl)
      return 'permitted'
    end
  end
  return 'kept'
end

local function main()
  local now = now_ms()
  local out = {}
  for _, a in ipairs(actions) do
    out[#out + 1] = a.g
    out[#out + 1] = one(a, now)
  end
  return out
end

local reply = main()
finish()
return reply
