-- Filter refused a pod on every node, judging it on the snapshot of generation ARGV[5]. When a change
-- kube-scheduler retries parked pods on (capacity freed, a node's facts changed, a pod placed) was written
-- after that generation, the verdict may be older than kube-scheduler's own view: answer 1, and the
-- caller requeues the pod now (at most once per interval). Otherwise, or when the pod was requeued within
-- the interval, remember the refusal for a short window, for the watcher's next such change to hand back
-- (the R op of apply.lua).
-- ARGV: prefix, uid, namespace/name, window ms, snapshot generation, interval ms. Returns 1 or 0.
local uid, ref, window = ARGV[2], ARGV[3], tonumber(ARGV[4])
local seen, interval = tonumber(ARGV[5]), tonumber(ARGV[6])
local now = now_ms()
if tonumber(redis.call('GET', K_RETRYGEN) or '0') > seen then
  redis.call('ZREMRANGEBYSCORE', K_REQUEUED, '-inf', now - interval)
  if not redis.call('ZSCORE', K_REQUEUED, uid) then
    redis.call('ZADD', K_REQUEUED, now, uid)
    redis.call('ZREM', K_REFUSED, uid)
    redis.call('HDEL', K_REFUSEDPOD, uid)
    return 1
  end
end
local old = redis.call('ZRANGEBYSCORE', K_REFUSED, '-inf', now - window, 'LIMIT', 0, 100)
if #old > 0 then
  redis.call('ZREM', K_REFUSED, unpack(old))
  redis.call('HDEL', K_REFUSEDPOD, unpack(old))
end
redis.call('ZADD', K_REFUSED, now, uid)
redis.call('HSET', K_REFUSEDPOD, uid, ref)
return 0
