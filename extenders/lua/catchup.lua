-- A replica's incremental read, atomic. ARGV: prefix, the replica's generation, max changed items,
-- a fresh random store id (used only if the store has none).
-- Returns {gen, sid} when nothing moved; {gen, sid, 'reload'} when the replica must load everything
-- (older than the tombstone floor, ahead of the store, or too much changed for one reply);
-- else {gen, sid, 'delta', nodes, pending, pdbs, podgroups, namespaces, pvcs, services,
-- replicationcontrollers, replicasets, statefulsets} where
-- nodes = {{name, gen, rv, hgetall}...} (an empty hgetall = node gone) and the others are flat
-- {id, record|false, ...}.
-- sid is the store id: the reader creates it when missing, so no replica ever takes "no id" as
-- an identity (two different emptied histories would look alike); a changed id means reload.
redis.call('SET', K_STOREID, ARGV[4], 'NX')
local sid = redis.call('GET', K_STOREID)
local gen = tonumber(redis.call('GET', K_GEN) or '0')
local since = tonumber(ARGV[2])
if gen == since then return {gen, sid} end
local limit = tonumber(ARGV[3])
if since > gen or since < tonumber(redis.call('GET', K_FLOOR) or '0') then return {gen, sid, 'reload'} end
local after = '(' .. since
local scored = redis.call('ZRANGEBYSCORE', K_NODES, after, '+inf', 'WITHSCORES')
if #scored > 2 * limit then return {gen, sid, 'reload'} end
local nodes = {}
for i = 1, #scored, 2 do
  local name = scored[i]
  nodes[#nodes + 1] = {name, scored[i + 1], redis.call('HGET', K_NODERV, name), redis.call('HGETALL', K_NODE .. name)}
end
local budget = limit - #nodes
local function changed(hkey, zkey)
  local ids = redis.call('ZRANGEBYSCORE', zkey, after, '+inf')
  budget = budget - #ids
  if budget < 0 then return nil end
  local out = {}
  for _, id in ipairs(ids) do
    out[#out + 1] = id
    out[#out + 1] = redis.call('HGET', hkey, id)
  end
  return out
end
local pending = changed(K_PENDING, K_PENDINGZ)
local pdbs = pending and changed(K_PDB, K_PDBZ)
local groups = pdbs and changed(K_PODGROUP, K_PODGROUPZ)
local namespaces = groups and changed(K_NAMESPACE, K_NAMESPACEZ)
local pvcs = namespaces and changed(K_PVC, K_PVCZ)
local services = pvcs and changed(K_SERVICE, K_SERVICEZ)
local rcs = services and changed(K_RC, K_RCZ)
local rss = rcs and changed(K_RS, K_RSZ)
local stss = rss and changed(K_STS, K_STSZ)
if not stss then return {gen, sid, 'reload'} end
return {gen, sid, 'delta', nodes, pending, pdbs, groups, namespaces, pvcs, services, rcs, rss, stss}
