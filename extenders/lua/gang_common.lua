-- Gang bookkeeping shared by the gang_*.lua scripts (prepended after prelude.lua by
-- extenders/gang/state.py). ARGV[1] is the key prefix, ARGV[2] the cool-down after a
-- rejection (ms). Times are Redis's clock (now_ms), so replicas' clocks never matter.
--
-- P:gang:{gang}      hash: min, state ('' assembling | 'permitted' | 'rejected'), first, deadline,
--                    window (ms), cool (ms), why, bound (members bound before arriving), touched
-- P:gangarr:{gang}   hash uid -> cjson {pod, node, replica, t (call token), st ('w' held | 'b' bound)}
-- P:ganglease:{gang} zset uid -> lease deadline of a held arrival (its replica refreshes it)
-- P:gangs            zset gang -> last activity (idle clean-up, listing)
-- P:gangq            zset gang -> order score (creation ms; ties by name): the admission queue
-- P:gangasm          zset gang -> last activity: gangs admitted to assemble
-- P:gangactive       set of gangs with held arrivals (leases to watch): what the sweep visits
-- P:gangev           pub/sub channel; a message (the gang key) wakes held calls at once
local COOLDOWN = tonumber(ARGV[2])
local G_INDEX = P .. ':gangs'
local G_QUEUE = P .. ':gangq'
local G_ASM = P .. ':gangasm'
local G_CHAN = P .. ':gangev'
local G_ACTIVE = P .. ':gangactive'
local function k_state(gk) return P .. ':gang:' .. gk end
local function k_arr(gk) return P .. ':gangarr:' .. gk end
local function k_lease(gk) return P .. ':ganglease:' .. gk end

-- Un-reserve a held member, as forget.lua does: only an assumed placement is ours to drop.
local function release(uid)
  if redis.call('ZSCORE', K_ASSUMED, uid) then unplace(uid) end
end

local function activity(gk, now)
  redis.call('ZADD', G_INDEX, now, gk)
  redis.call('HSET', k_state(gk), 'touched', now)
end

local function reject(gk, now, why)
  local arr = redis.call('HGETALL', k_arr(gk))
  for i = 1, #arr, 2 do
    if cjson.decode(arr[i + 1]).st ~= 'b' then release(arr[i]) end
  end
  redis.call('DEL', k_arr(gk), k_lease(gk))
  redis.call('SREM', G_ACTIVE, gk)
  redis.call('HSET', k_state(gk), 'state', 'rejected', 'cool', now + COOLDOWN, 'why', why)
  redis.call('HDEL', k_state(gk), 'first', 'deadline')
  redis.call('ZREM', G_ASM, gk)
  redis.call('ZREM', G_QUEUE, gk)
  redis.call('PUBLISH', G_CHAN, gk)
end

-- Once permitted, arrivals need no lease: each call binds at once, and a reservation whose call
-- died before binding lapses with its hold TTL (the assumed-pod expiry), not with the short lease,
-- so a slow API server cannot make a binding in flight lose its reservation.
local function permit(gk, now)
  redis.call('DEL', k_lease(gk))
  redis.call('SREM', G_ACTIVE, gk)
  redis.call('HSET', k_state(gk), 'state', 'permitted', 'permitted_at', now)
  redis.call('HDEL', k_state(gk), 'first', 'deadline')
  redis.call('ZREM', G_ASM, gk)
  redis.call('ZREM', G_QUEUE, gk)
  redis.call('PUBLISH', G_CHAN, gk)
end

-- Bring a gang up to date: drop arrivals whose lease lapsed (their replica died; their
-- reservations go too), close a window that ran out, end a cool-down. Returns the state.
local function maintain(gk, now)
  local h = k_state(gk)
  local st = redis.call('HMGET', h, 'state', 'deadline', 'cool', 'min', 'bound', 'window')
  local state = st[1] or ''
  local dead = redis.call('ZRANGEBYSCORE', k_lease(gk), '-inf', now)
  if #dead > 0 then
    for _, uid in ipairs(dead) do
      local raw = redis.call('HGET', k_arr(gk), uid)
      if raw and cjson.decode(raw).st ~= 'b' then release(uid) end
      redis.call('HDEL', k_arr(gk), uid)
      redis.call('ZREM', k_lease(gk), uid)
    end
    redis.call('PUBLISH', G_CHAN, gk)
    if redis.call('ZCARD', k_lease(gk)) == 0 then redis.call('SREM', G_ACTIVE, gk) end
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

-- Admission to the assembling set: first come by order score (then name), at most MAX at once.
-- A gang already admitted stays so; admitted gangs idle past IDLE with nothing held leave, and
-- queued gangs nobody asked about for IDLE lose their place. Returns (admitted, position).
local function admit(gk, now, score, max_asm, idle)
  if redis.call('ZSCORE', G_ASM, gk) then
    redis.call('ZADD', G_ASM, now, gk)
    return true, 0
  end
  redis.call('ZADD', G_QUEUE, 'LT', score, gk)
  for _, other in ipairs(redis.call('ZRANGE', G_ASM, 0, -1)) do
    maintain(other, now)  -- a closed window or lapsed arrivals free the slot now, not at the next sweep
  end
  for _, other in ipairs(redis.call('ZRANGEBYSCORE', G_ASM, '-inf', now - idle)) do
    if redis.call('HLEN', k_arr(other)) == 0 then redis.call('ZREM', G_ASM, other) end
  end
  local free = max_asm - redis.call('ZCARD', G_ASM)
  local ahead = 0
  for _, other in ipairs(redis.call('ZRANGE', G_QUEUE, 0, -1)) do
    if other == gk then break end
    local seen = tonumber(redis.call('ZSCORE', G_INDEX, other) or '0')
    local ostate = redis.call('HGET', k_state(other), 'state')
    if seen < now - idle or ostate == 'permitted' or ostate == 'rejected' then
      redis.call('ZREM', G_QUEUE, other)
    else
      ahead = ahead + 1
    end
  end
  if ahead >= free then return false, ahead + 1 end
  redis.call('ZREM', G_QUEUE, gk)
  redis.call('ZADD', G_ASM, now, gk)
  return true, 0
end

local function assembling_list()
  return table.concat(redis.call('ZRANGE', G_ASM, 0, 9), ',')
end
