-- The watcher's fenced batch write. ARGV: prefix, fence, then groups of four:
-- op, id, arg, payload. Ops: N node upsert (arg = resourceVersion), n node delete (arg = the
-- deleted object's resourceVersion, or ''), P pod upsert (arg = node name or '' when unbound),
-- p pod delete, q pod delete unless assumed, I/i upsert/delete of a kind's record (arg = its hash
-- name: records in P:<hash>, generations in P:<hash>z, tombstones '<hash>:' .. key), S synced marker
-- (payload), R (last; id = window ms, arg = how long requeue times are kept, ms): when the batch freed
-- capacity, changed what a node says or placed a pod -- events kube-scheduler retries parked pods on,
-- and may have acted on before this write landed (it counts a pod it is binding at once) -- hand back
-- the pods filter refused in the last window (see refuse.lua), as {generation, uid, namespace/name, ...}.
-- Each refusal is handed back once, even for a pod requeued within the interval: a requeue drops the
-- pod's refusal, so this one came after it (kube-scheduler's retry, judged on a snapshot still behind
-- this change). So a pod is requeued at most once per kube-scheduler attempt, which its backoff spaces.
-- The requeue times are kept an interval for refuse.lua.
-- The fence is 'epoch@storeid' (or a bare epoch): both must be current. After Redis lost its
-- data the epoch counter restarts, so a new leader may hold an old leader's epoch number; the
-- store id (new per history) still tells them apart.
-- Unchanged records are skipped, so a batch that changes nothing bumps nothing.
local epoch, fence_sid = string.match(ARGV[2], '^([^@]*)@?(.*)$')
if redis.call('GET', K_EPOCH) ~= epoch or (fence_sid ~= '' and redis.call('GET', K_STOREID) ~= fence_sid) then
  return redis.error_reply('FENCED writer ' .. ARGV[2] .. ' is not the current term ' ..
    tostring(redis.call('GET', K_EPOCH)) .. '@' .. tostring(redis.call('GET', K_STOREID)))
end

local GONE_KEEP_MS = 86400000
local retry = false  -- the batch holds a change kube-scheduler retries parked pods on
local requeue = nil

local function put_node(name, rv, payload)
  redis.call('HSET', K_NODERV, name, rv)
  redis.call('HDEL', K_NODEGONE, name)
  redis.call('ZREM', K_NODEGONEZ, name)
  if redis.call('HGET', K_NODE .. name, '_node') ~= payload then
    redis.call('HSET', K_NODE .. name, '_node', payload)
    touch(name)
    retry = true
  end
end

-- Leaves a marker (the delete's resourceVersion, else the last stored one) so a request-borne
-- refresh carrying a copy of the node from before the delete cannot write it back.
local function del_node(name, rv)
  local last = redis.call('HGET', K_NODERV, name)
  if rv == '' then rv = last end
  if rv then
    local now = now_ms()
    redis.call('HSET', K_NODEGONE, name, rv)
    redis.call('ZADD', K_NODEGONEZ, now, name)
    local old = redis.call('ZRANGEBYSCORE', K_NODEGONEZ, '-inf', now - GONE_KEEP_MS, 'LIMIT', 0, 100)
    if #old > 0 then
      redis.call('HDEL', K_NODEGONE, unpack(old))
      redis.call('ZREM', K_NODEGONEZ, unpack(old))
    end
  end
  redis.call('HDEL', K_NODERV, name)
  if redis.call('HDEL', K_NODE .. name, '_node') == 1 then touch(name) end
  -- Reservations on a node that is gone are void: no bind of ours may go to it (a held gang member
  -- loses its arrival and is scheduled again). Pods the API has bound there stay where they are.
  for _, uid in ipairs(redis.call('HKEYS', K_NODE .. name)) do
    if redis.call('ZSCORE', K_ASSUMED, uid) then
      unplace(uid)
      retry = true
    end
  end
end

local function put_pod(uid, node, payload)
  local loc = redis.call('HGET', K_PODLOC, uid)
  if node == '' then
    -- Unbound in the API. An assumed placement is our reservation and stays until
    -- confirmed, forgotten or expired; any other placement is stale.
    if loc and not redis.call('ZSCORE', K_ASSUMED, uid) then
      unplace(uid)
      retry = true
    end
    put_item(K_PENDING, K_PENDINGZ, 'p:', uid, payload)
    return
  end
  if loc ~= node then
    if loc then
      redis.call('HDEL', K_NODE .. loc, uid)
      touch(loc)
      retry = true
    end
    redis.call('HSET', K_PODLOC, uid, node)
    retry = true
  end
  -- Confirming our own reservation: kube-scheduler counted this pod on the node before we did.
  if redis.call('ZREM', K_ASSUMED, uid) == 1 then retry = true end
  if redis.call('HGET', K_NODE .. node, uid) ~= payload then
    redis.call('HSET', K_NODE .. node, uid, payload)
    touch(node)
  end
  del_item(K_PENDING, K_PENDINGZ, 'p:', uid)
end

local function del_pod(uid, keep_assumed)
  if keep_assumed and redis.call('ZSCORE', K_ASSUMED, uid) then return end
  if unplace(uid) then retry = true end
  del_item(K_PENDING, K_PENDINGZ, 'p:', uid)
end

for i = 3, #ARGV, 4 do
  local op, id, arg, payload = ARGV[i], ARGV[i + 1], ARGV[i + 2], ARGV[i + 3]
  if op == 'P' then put_pod(id, arg, payload)
  elseif op == 'p' then del_pod(id, false)
  elseif op == 'q' then del_pod(id, true)
  elseif op == 'N' then put_node(id, arg, payload)
  elseif op == 'n' then del_node(id, arg)
  elseif op == 'I' then put_item(P .. ':' .. arg, P .. ':' .. arg .. 'z', arg .. ':', id, payload)
  elseif op == 'i' then del_item(P .. ':' .. arg, P .. ':' .. arg .. 'z', arg .. ':', id)
  elseif op == 'S' then redis.call('SET', K_SYNCED, payload)
  elseif op == 'R' then requeue = {tonumber(id), tonumber(arg)}
  else return redis.error_reply('unknown op ' .. tostring(op)) end
end
local gen = finish()
if not retry then return gen end
local now = now_ms()
redis.call('SET', K_RETRYGEN, gen)
redis.call('SET', K_RETRYAT, now)
if not requeue then return gen end
local window, interval = requeue[1], requeue[2]
local out = {gen}
redis.call('ZREMRANGEBYSCORE', K_REQUEUED, '-inf', now - interval)
for _, uid in ipairs(redis.call('ZRANGEBYSCORE', K_REFUSED, now - window, '+inf')) do
  out[#out + 1] = uid
  out[#out + 1] = redis.call('HGET', K_REFUSEDPOD, uid) or ''
  redis.call('ZADD', K_REQUEUED, now, uid)
  redis.call('ZREM', K_REFUSED, uid)
  redis.call('HDEL', K_REFUSEDPOD, uid)
end
return out
