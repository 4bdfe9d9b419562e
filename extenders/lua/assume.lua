-- Reserve a pod on a node (any replica; not fenced). ARGV: prefix, uid, node, payload,
-- expected node generation ('' = unconditional), ttl in ms.
-- Returns {'assumed', generation} | {'conflict', current node generation} | {'bound', node}.
local uid, node, payload, expected, ttl = ARGV[2], ARGV[3], ARGV[4], ARGV[5], tonumber(ARGV[6])
if expected ~= '' then
  local current = tonumber(redis.call('ZSCORE', K_NODES, node) or '0')
  if current ~= tonumber(expected) then return {'conflict', current} end
end
local loc = redis.call('HGET', K_PODLOC, uid)
if loc and not redis.call('ZSCORE', K_ASSUMED, uid) then return {'bound', loc} end
if loc and loc ~= node then
  redis.call('HDEL', K_NODE .. loc, uid)
  touch(loc)
end
redis.call('HSET', K_PODLOC, uid, node)
if redis.call('HGET', K_NODE .. node, uid) ~= payload then
  redis.call('HSET', K_NODE .. node, uid, payload)
  touch(node)
end
redis.call('ZADD', K_ASSUMED, now_ms() + ttl, uid)
finish()
return {'assumed', tonumber(redis.call('ZSCORE', K_NODES, node) or '0')}
