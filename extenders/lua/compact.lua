-- Forget tombstones stamped at or below a generation and raise the floor to it: a replica
-- older than the floor may have missed a delete, so it reloads. ARGV: prefix, generation.
-- Returns the new floor.
local upto = tonumber(ARGV[2])
local floor = tonumber(redis.call('GET', K_FLOOR) or '0')
if upto <= floor then return floor end
local zsets = {
  n = K_NODES, p = K_PENDINGZ, d = K_PDBZ, g = K_PODGROUPZ, s = K_NAMESPACEZ, c = K_PVCZ,
  v = K_SERVICEZ, o = K_RCZ, e = K_RSZ, t = K_STSZ,
}
local tombs = redis.call('ZRANGEBYSCORE', K_TOMBS, '-inf', upto)
for _, tomb in ipairs(tombs) do
  local zkey = zsets[string.sub(tomb, 1, 1)]
  if zkey then redis.call('ZREM', zkey, string.sub(tomb, 3)) end
end
redis.call('ZREMRANGEBYSCORE', K_TOMBS, '-inf', upto)
redis.call('SET', K_FLOOR, upto)
return upto
