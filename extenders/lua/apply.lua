-- The watcher's fenced batch write. ARGV: prefix, fence, then groups of four:
-- op, id, arg, payload. Ops: N node upsert (arg = resourceVersion), n node delete (arg = the
-- deleted object's resourceVersion, or ''), P pod upsert (arg = node name or '' when unbound),
-- p pod delete, q pod delete unless assumed, D/d PDB upsert/delete, G/g PodGroup upsert/delete,
-- S synced marker (payload).
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

local function put_node(name, rv, payload)
  redis.call('HSET', K_NODERV, name, rv)
  redis.call('HDEL', K_NODEGONE, name)
  redis.call('ZREM', K_NODEGONEZ, name)
  if redis.call('HGET', K_NODE .. name, '_node') ~= payload then
    redis.call('HSET', K_NODE .. name, '_node', payload)
    touch(name)
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
end

local function put_pod(uid, node, payload)
  local loc = redis.call('HGET', K_PODLOC, uid)
  if node == '' then
    -- Unbound in the API. An assumed placement is our reservation and stays until
    -- confirmed, forgotten or expired; any other placement is stale.
    if loc and not redis.call('ZSCORE', K_ASSUMED, uid) then unplace(uid) end
    put_item(K_PENDING, K_PENDINGZ, 'p:', uid, payload)
    return
  end
  if loc ~= node then
    if loc then
      redis.call('HDEL', K_NODE .. loc, uid)
      touch(loc)
    end
    redis.call('HSET', K_PODLOC, uid, node)
  end
  redis.call('ZREM', K_ASSUMED, uid)
  if redis.call('HGET', K_NODE .. node, uid) ~= payload then
    redis.call('HSET', K_NODE .. node, uid, payload)
    touch(node)
  end
  del_item(K_PENDING, K_PENDINGZ, 'p:', uid)
end

local function del_pod(uid, keep_assumed)
  if keep_assumed and redis.call('ZSCORE', K_ASSUMED, uid) then return end
  unplace(uid)
  del_item(K_PENDING, K_PENDINGZ, 'p:', uid)
end

for i = 3, #ARGV, 4 do
  local op, id, arg, payload = ARGV[i], ARGV[i + 1], ARGV[i + 2], ARGV[i + 3]
  if op == 'P' then put_pod(id, arg, payload)
  elseif op == 'p' then del_pod(id, false)
  elseif op == 'q' then del_pod(id, true)
  elseif op == 'N' then put_node(id, arg, payload)
  elseif op == 'n' then del_node(id, arg)
  elseif op == 'D' then put_item(K_PDB, K_PDBZ, 'd:', id, payload)
  elseif op == 'd' then del_item(K_PDB, K_PDBZ, 'd:', id)
  elseif op == 'G' then put_item(K_PODGROUP, K_PODGROUPZ, 'g:', id, payload)
  elseif op == 'g' then del_item(K_PODGROUP, K_PODGROUPZ, 'g:', id)
  elseif op == 'S' then redis.call('SET', K_SYNCED, payload)
  else return redis.error_reply('unknown op ' .. tostring(op)) end
end
return finish()
