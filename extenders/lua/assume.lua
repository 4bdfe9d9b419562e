-- Reserve a pod on a node (any replica; not fenced). ARGV: prefix, uid, node, payload,
-- expected node generation ('' = unconditional), ttl in ms.
-- Returns {'assumed', generation} | {'conflict', current node generation} | {'bound', node}.
local uid, node, payload, expected, ttl = ARGV[2], ARGV[3], ARGV[4], ARGV[5], tonumber(ARGV[6])
local refused = reserve(uid, node, payload, expected, ttl, now_ms())
if refused then return refused end
finish()
return {'assumed', tonumber(redis.call('ZSCORE', K_NODES, node) or '0')}
