-- Gang bookkeeping shared by the gang_*.lua scripts (prepended after prelude.lua by
-- extenders/gang/state.py). ARGV[1] is the key prefix, ARGV[2] 'base:max', the cool-down after
-- a first rejection and its ceiling (ms): each further rejection in a row doubles it. Times are
-- Redis's clock (now_ms), so replicas' clocks never matter.
--
-- P:gang:{gang}      hash: min, state ('' assembling | 'permitted' | 'rejected'), first, deadline,
--                    window (ms), cool (ms), why, rejections (in a row, since the last permit),
--                    bound (members bound before arriving), touched,
--                    admitted (ms: when it last got an assembling slot), arrived (ms: its last
--                    held arrival), yielded (ms: when it gave up its slot for having nothing
--                    arrived for too long; its queue score from then on), asked_gen / asked
--                    (the newest snapshot generation a member was filtered on, and when),
--                    released (why the reconciler last released the gang)
-- P:gangarr:{gang}   hash uid -> cjson {pod, node, replica, t (call token), st ('w' held | 'b' bound)}
-- P:ganglease:{gang} zset uid -> lease deadline of a held arrival (its replica refreshes it)
-- P:gangs            zset gang -> last activity (idle clean-up, listing)
-- P:gangq            zset gang -> order score (creation ms; ties by name): the admission queue
-- P:gangasm          zset gang -> last activity: gangs admitted to assemble
-- P:gangactive       set of gangs with held arrivals (leases to watch): what the sweep visits
-- P:gangunseen:{gang} hash uid -> ms: members filtered before the watch had written them (the
--                    reconciler leaves the gang alone until its snapshot has them; gang_reconcile.lua)
-- P:gangpark:{gang}  hash uid -> namespace/name: members filter turned away since their last nudge
--                    (kube-scheduler parks them as unschedulable; nothing of the cluster's own
--                    events may bring them back when the reason goes away)
-- P:gangnudge        zset gang -> when its parked members are to be nudged (ms)
-- P:gangev           pub/sub channel; a message (the gang key) wakes held calls at once
-- P:gangnudgeev      pub/sub channel; a message says a nudge is due now
-- P:gangjournal      stream of decisions (admitted, permitted, rejected) with their times, read by
--                    the watch leader for Events, PodGroup status and metrics (capped, approximate)
local COOLDOWN, COOLDOWN_MAX = string.match(ARGV[2], '^(%d+):?(%d*)$')
COOLDOWN = tonumber(COOLDOWN)
COOLDOWN_MAX = math.max(tonumber(COOLDOWN_MAX) or COOLDOWN, COOLDOWN)
local G_INDEX = P .. ':gangs'
local G_QUEUE = P .. ':gangq'
local G_ASM = P .. ':gangasm'
local G_CHAN = P .. ':gangev'
local G_ACTIVE = P .. ':gangactive'
local G_NUDGE = P .. ':gangnudge'
local G_NUDGE_CHAN = P .. ':gangnudgeev'
local G_JOURNAL = P .. ':gangjournal'
local JOURNAL_CAP = 10000
local function k_state(gk) return P .. ':gang:' .. gk end
local function k_arr(gk) return P .. ':gangarr:' .. gk end
local function k_lease(gk) return P .. ':ganglease:' .. gk end
local function k_park(gk) return P .. ':gangpark:' .. gk end
local function k_unseen(gk) return P .. ':gangunseen:' .. gk end

-- Nudge a gang's parked members at ``due`` (ms; the earlier of two requests wins).
local function nudge(gk, due, now)
  redis.call('ZADD', G_NUDGE, 'LT', due, gk)
  if due <= now then redis.call('PUBLISH', G_NUDGE_CHAN, gk) end
end

-- A member filter turned away: remember it, so it can be nudged when the reason goes away. The
-- gang counts as active, so the idle sweep deletes what is parked once nobody asks any more.
local function park(gk, uid, ref, now)
  if uid == '' then return end
  redis.call('HSET', k_park(gk), uid, ref)
  redis.call('ZADD', G_INDEX, now, gk)
end

-- Admission order: higher priority first (the gang's, from its members' PriorityClass), then the
-- order score (creation), then the name, as Coscheduling sorts its queue.
local function prio_of(gk) return tonumber(redis.call('HGET', k_state(gk), 'prio') or '0') or 0 end

local function ranked_queue()
  local q = redis.call('ZRANGE', G_QUEUE, 0, -1, 'WITHSCORES')
  local items = {}
  for i = 1, #q, 2 do items[#items + 1] = {q[i], tonumber(q[i + 1]), prio_of(q[i])} end
  table.sort(items, function(x, y)
    if x[3] ~= y[3] then return x[3] > y[3] end
    if x[2] ~= y[2] then return x[2] < y[2] end
    return x[1] < y[1]
  end)
  local out = {}
  for i, item in ipairs(items) do out[i] = item[1] end
  return out
end

-- Assembling slots came free (``free``, 1 by default): the first queued gangs get their chance now.
-- Only those: a gang further back would only be turned away again, and every refusal lengthens
-- kube-scheduler's backoff of its members (up to 10 s), which then delays them when their turn comes.
local function nudge_queue_head(now, free)
  local queue = ranked_queue()
  for i = 1, math.min(free or 1, #queue) do
    if redis.call('EXISTS', k_park(queue[i])) == 1 then nudge(queue[i], now, now) end
  end
end

-- Append a decision to the journal: its kind, the gang, Redis's time and the kind's own fields.
local function journal(gk, kind, now, ...)
  redis.call('XADD', G_JOURNAL, 'MAXLEN', '~', JOURNAL_CAP, '*', 'gang', gk, 'kind', kind, 't', now, ...)
end

-- Un-reserve a held member, as forget.lua does: only an assumed placement is ours to drop.
local function release(uid)
  if redis.call('ZSCORE', K_ASSUMED, uid) then unplace(uid) end
end

local function activity(gk, now)
  redis.call('ZADD', G_INDEX, now, gk)
  redis.call('HSET', k_state(gk), 'touched', now)
end

-- Drop every arrival of the gang, releasing the reservations of those not bound yet.
local function release_arrivals(gk)
  local arr = redis.call('HGETALL', k_arr(gk))
  for i = 1, #arr, 2 do
    if cjson.decode(arr[i + 1]).st ~= 'b' then release(arr[i]) end
  end
  redis.call('DEL', k_arr(gk), k_lease(gk))
  redis.call('SREM', G_ACTIVE, gk)
end

-- Drop one held arrival (its pod left the gang), releasing its reservation.
local function drop_arrival(gk, uid)
  local raw = redis.call('HGET', k_arr(gk), uid)
  if not raw then return false end
  if cjson.decode(raw).st ~= 'b' then release(uid) end
  redis.call('HDEL', k_arr(gk), uid)
  redis.call('ZREM', k_lease(gk), uid)
  if redis.call('ZCARD', k_lease(gk)) == 0 then redis.call('SREM', G_ACTIVE, gk) end
  return true
end

local function reject(gk, now, why)
  release_arrivals(gk)
  -- A gang that keeps failing waits longer each time, so it takes an ever smaller share of the
  -- assembling turn from gangs queued behind it.
  local n = redis.call('HINCRBY', k_state(gk), 'rejections', 1)
  local cool = math.min(COOLDOWN * 2 ^ math.min(n - 1, 30), COOLDOWN_MAX)
  local first = redis.call('HGET', k_state(gk), 'first') or ''
  journal(gk, 'rejected', now, 'first', first, 'cool', cool, 'why', why)
  redis.call('HSET', k_state(gk), 'state', 'rejected', 'cool', now + cool, 'why', why)
  redis.call('HDEL', k_state(gk), 'first', 'deadline')
  redis.call('ZREM', G_ASM, gk)
  redis.call('ZREM', G_QUEUE, gk)
  redis.call('PUBLISH', G_CHAN, gk)
  -- Its members come back while it cools down and are parked: nudge them when it ends.
  nudge(gk, now + cool, now)
  nudge_queue_head(now)
end

-- Once permitted, arrivals need no lease: each call binds at once. Every held member's reservation
-- is pushed out to the assumed-pod TTL (``ttl`` ms), the same as a bound pod waiting for the watch:
-- members of a large gang queue for API slots, and the short hold TTL must not lapse meanwhile (a
-- call that died before binding leaves its reservation to lapse with that TTL).
local function permit(gk, now, ttl)
  local arr = redis.call('HGETALL', k_arr(gk))
  for i = 1, #arr, 2 do
    if cjson.decode(arr[i + 1]).st ~= 'b' then redis.call('ZADD', K_ASSUMED, 'XX', now + ttl, arr[i]) end
  end
  redis.call('DEL', k_lease(gk))
  redis.call('SREM', G_ACTIVE, gk)
  local st = redis.call('HMGET', k_state(gk), 'first', 'admitted')
  journal(gk, 'permitted', now, 'first', st[1] or '', 'admitted', st[2] or '')
  redis.call('HSET', k_state(gk), 'state', 'permitted', 'permitted_at', now)
  redis.call('HDEL', k_state(gk), 'first', 'deadline', 'rejections')
  redis.call('ZREM', G_ASM, gk)
  redis.call('ZREM', G_QUEUE, gk)
  redis.call('PUBLISH', G_CHAN, gk)
  -- Members turned away before the quorum (e.g. a PodGroup's minimum below its size) may bind now.
  if redis.call('EXISTS', k_park(gk)) == 1 then nudge(gk, now, now) end
  nudge_queue_head(now)
end

-- Bring a gang up to date: drop held arrivals whose lease lapsed (their replica died; their
-- reservations go too) or whose pod is no longer placed (the watch saw it deleted, or its
-- reservation expired), close a window that ran out, end a cool-down. Returns the state.
local function maintain(gk, now)
  local h = k_state(gk)
  local st = redis.call('HMGET', h, 'state', 'deadline', 'cool', 'min', 'bound', 'window')
  local state = st[1] or ''
  local dead = {}
  local leases = redis.call('ZRANGE', k_lease(gk), 0, -1, 'WITHSCORES')
  for i = 1, #leases, 2 do
    local u = leases[i]
    if tonumber(leases[i + 1]) <= now or redis.call('HEXISTS', K_PODLOC, u) == 0 then dead[#dead + 1] = u end
  end
  if #dead > 0 then
    for _, uid in ipairs(dead) do
      local raw = redis.call('HGET', k_arr(gk), uid)
      if raw and cjson.decode(raw).st ~= 'b' then release(uid) end
      redis.call('HDEL', k_arr(gk), uid)
      redis.call('ZREM', k_lease(gk), uid)
    end
    redis.call('PUBLISH', G_CHAN, gk)
    if redis.call('ZCARD', k_lease(gk)) == 0 then redis.call('SREM', G_ACTIVE, gk) end
    -- Members turned away while those reservations stood may fit now.
    nudge(gk, now, now)
  end
  if state == '' then
    local deadline = tonumber(st[2] or '')
    if deadline then
      local arrived = redis.call('HLEN', k_arr(gk))
      if arrived == 0 then
        -- Every arrival lapsed (its replica died): nothing is held, the next arrival starts over.
        redis.call('HDEL', h, 'first', 'deadline')
      elseif now >= deadline then
        local minimum = tonumber(st[4] or '0')
        local bound = tonumber(st[5] or '0')
        local why = string.format(
          'gang %s rejected: only %d of the %d required members were ready (%d held at bind, %d bound) ' ..
          'when its %gs window closed', gk, arrived + bound, minimum, arrived, bound,
          tonumber(st[6] or '0') / 1000)
        reject(gk, now, why)
        return 'rejected'
      end
    end
  elseif state == 'rejected' then
    if now >= tonumber(st[3] or '0') then
      redis.call('HDEL', h, 'state', 'cool', 'why')
      return ''
    end
  end
  return state
end

-- An admitted gang with nothing arrived may keep its slot for IDLE from its admission: members
-- that pass filter but never reach bind must not block every other gang. Past that it yields
-- the slot and queues again behind the gangs waiting now (its score becomes the yield time).
local function overstayed(gk, now, idle)
  if redis.call('HLEN', k_arr(gk)) > 0 then return false end
  local st = redis.call('HMGET', k_state(gk), 'admitted', 'arrived')
  if not st[1] then
    redis.call('HSET', k_state(gk), 'admitted', now)  -- admitted before this field existed
    return false
  end
  local since = math.max(tonumber(st[1]) or 0, tonumber(st[2] or '') or 0)
  return now - since >= idle
end

local function yield_slot(gk, now)
  redis.call('ZREM', G_ASM, gk)
  redis.call('HSET', k_state(gk), 'yielded', now)
  nudge_queue_head(now)
end

-- A gang none of whose pods is live any more (deleted, finished, moved to another gang): its
-- bookkeeping goes at once, so it holds no slot, queue place or reservation. Members parked under
-- it still get their nudge (one may have moved to another gang); the nudge takes the parked list.
local function vanish(gk, now)
  release_arrivals(gk)
  local had_slot = redis.call('ZREM', G_ASM, gk) == 1
  redis.call('ZREM', G_QUEUE, gk)
  redis.call('ZREM', G_INDEX, gk)
  redis.call('DEL', k_state(gk), k_unseen(gk))
  if redis.call('EXISTS', k_park(gk)) == 1 then nudge(gk, now, now) else redis.call('ZREM', G_NUDGE, gk) end
  journal(gk, 'vanished', now)
  redis.call('PUBLISH', G_CHAN, gk)
  if had_slot then nudge_queue_head(now) end
end

-- A gang that cannot assemble now (fewer live members than its minimum, or a minimum nobody can
-- tell any more) gives back what it holds: held arrivals with their reservations (their calls
-- answer ``why``), its slot and its queue place. No cool-down: nothing failed, members are missing;
-- the next member let through admits it again. Returns whether anything was held.
local function stand_down(gk, now, why)
  local held = redis.call('HLEN', k_arr(gk)) > 0
  release_arrivals(gk)
  redis.call('HDEL', k_state(gk), 'first', 'deadline')
  local had_slot = redis.call('ZREM', G_ASM, gk) == 1
  local queued = redis.call('ZREM', G_QUEUE, gk) == 1
  if not (held or had_slot or queued) then return false end
  redis.call('HSET', k_state(gk), 'released', why)
  journal(gk, 'released', now, 'why', why)
  redis.call('PUBLISH', G_CHAN, gk)
  if had_slot then nudge_queue_head(now) end
  return true
end

-- Live members other than ``uid``: held arrivals (they have leases; maintain() has dropped those
-- whose pod is no longer placed), and members placed right now: ``placed`` (a caller's live placed
-- members: bound, or reserved and binding) and the gang's arrivals still in flight ('w': permitted
-- and binding, not yet in the caller's snapshot). An arrival that ended bound ('b') counts only
-- through ``placed``: after a job restart the old incarnation's pods stay placed while they
-- terminate, and must not make the new one look complete. Returns (held, others).
local function live_members(gk, uid, placed)
  local seen, held, others = {}, 0, 0
  for _, u in ipairs(redis.call('ZRANGE', k_lease(gk), 0, -1)) do
    if u ~= uid then
      seen[u] = true
      held = held + 1
    end
  end
  local function count(u)
    if u ~= uid and not seen[u] and redis.call('HEXISTS', K_PODLOC, u) == 1 then
      seen[u] = true
      others = others + 1
    end
  end
  for _, u in ipairs(placed) do count(u) end
  local arr = redis.call('HGETALL', k_arr(gk))
  for i = 1, #arr, 2 do
    if cjson.decode(arr[i + 1]).st == 'w' then count(arr[i]) end
  end
  return held, others
end

-- A lower-priority gang that has bound nothing yet gives its slot to ``by``: its held members are
-- released (their calls answer why), and it queues again in its place.
local function displace(gk, by, now)
  local why = string.format('gang %s gave its turn to the higher-priority gang %s', gk, by)
  release_arrivals(gk)
  redis.call('HDEL', k_state(gk), 'first', 'deadline')
  redis.call('ZREM', G_ASM, gk)
  redis.call('HSET', k_state(gk), 'released', why)
  local order = tonumber(redis.call('HGET', k_state(gk), 'order') or '') or now
  redis.call('ZADD', G_QUEUE, 'LT', order, gk)
  journal(gk, 'released', now, 'why', why)
  redis.call('PUBLISH', G_CHAN, gk)
end

-- The assembling gang of the lowest priority below ``prio`` that has bound nothing yet, if any.
local function displaceable(prio)
  local found, lowest = nil, prio
  for _, other in ipairs(redis.call('ZRANGE', G_ASM, 0, -1)) do
    local p = prio_of(other)
    if p < lowest and redis.call('HGET', k_state(other), 'state') ~= 'permitted' then
      local bound = false
      for _, raw in ipairs(redis.call('HVALS', k_arr(other))) do
        if cjson.decode(raw).st == 'b' then bound = true end
      end
      if not bound then found, lowest = other, p end
    end
  end
  return found
end

-- Admission to the assembling set, at most MAX at once, in admission order (see ranked_queue). A
-- gang already admitted stays so (within the limit above); admitted gangs idle past IDLE with
-- nothing held leave, and queued gangs nobody asked about for IDLE lose their place. The first
-- gang in order that finds every slot taken takes the slot of a lower-priority gang that has bound
-- nothing yet. Returns (admitted, position).
local function admit(gk, now, score, max_asm, idle, prio)
  redis.call('HSET', k_state(gk), 'prio', prio, 'order', score)
  if redis.call('ZSCORE', G_ASM, gk) then
    if not overstayed(gk, now, idle) then
      redis.call('ZADD', G_ASM, now, gk)
      return true, 0
    end
    yield_slot(gk, now)
  end
  local yielded = tonumber(redis.call('HGET', k_state(gk), 'yielded') or '')
  if yielded then score = math.max(score, yielded) end
  redis.call('ZADD', G_QUEUE, 'LT', score, gk)
  for _, other in ipairs(redis.call('ZRANGE', G_ASM, 0, -1)) do
    maintain(other, now)  -- a closed window or lapsed arrivals free the slot now, not at the next sweep
    if redis.call('ZSCORE', G_ASM, other) and overstayed(other, now, idle) then yield_slot(other, now) end
  end
  for _, other in ipairs(redis.call('ZRANGEBYSCORE', G_ASM, '-inf', now - idle)) do
    if redis.call('HLEN', k_arr(other)) == 0 then redis.call('ZREM', G_ASM, other) end
  end
  for _, other in ipairs(redis.call('ZRANGE', G_QUEUE, 0, -1)) do
    local seen = tonumber(redis.call('ZSCORE', G_INDEX, other) or '0')
    local ostate = redis.call('HGET', k_state(other), 'state')
    if other ~= gk and (seen < now - idle or ostate == 'permitted' or ostate == 'rejected') then
      redis.call('ZREM', G_QUEUE, other)
    end
  end
  local free = max_asm - redis.call('ZCARD', G_ASM)
  local ahead = 0
  for _, other in ipairs(ranked_queue()) do
    if other == gk then break end
    ahead = ahead + 1
  end
  if ahead >= free then
    local victim = ahead == 0 and displaceable(prio) or nil
    if not victim then return false, ahead + 1 end
    displace(victim, gk, now)
  end
  redis.call('ZREM', G_QUEUE, gk)
  redis.call('ZADD', G_ASM, now, gk)
  redis.call('HSET', k_state(gk), 'admitted', now)
  redis.call('HDEL', k_state(gk), 'yielded')
  journal(gk, 'admitted', now)
  return true, 0
end

local function assembling_list()
  return table.concat(redis.call('ZRANGE', G_ASM, 0, 9), ',')
end
