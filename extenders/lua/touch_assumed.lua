-- Push an assumed pod's deadline out (a long bind, e.g. a gang waiting for quorum).
-- ARGV: prefix, uid, ttl ms. Returns 1 when the pod is still assumed.
if not redis.call('ZSCORE', K_ASSUMED, ARGV[2]) then return 0 end
redis.call('ZADD', K_ASSUMED, now_ms() + tonumber(ARGV[3]), ARGV[2])
return 1
