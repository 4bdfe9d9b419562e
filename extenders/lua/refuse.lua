-- Filter refused a pod on every node: remember it for a short window (see the R op of apply.lua),
-- forgetting refusals older than that. ARGV: prefix, uid, namespace/name, window ms.
local uid, ref, window = ARGV[2], ARGV[3], tonumber(ARGV[4])
local now = now_ms()
local old = redis.call('ZRANGEBYSCORE', K_REFUSED, '-inf', now - window, 'LIMIT', 0, 100)
if #old > 0 then
  redis.call('ZREM', K_REFUSED, unpack(old))
  redis.call('HDEL', K_REFUSEDPOD, unpack(old))
end
redis.call('ZADD', K_REFUSED, now, uid)
redis.call('HSET', K_REFUSEDPOD, uid, ref)
return 1
