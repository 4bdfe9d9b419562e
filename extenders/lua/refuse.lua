-- Filter refused a pod on every node, judging it on the snapshot of generation ARGV[5]. When a change
-- kube-scheduler retries parked pods on (capacity freed, a node's facts changed, a pod placed) was written
-- after that generation, the verdict may be older than kube-scheduler's own view: answer 1, and the
-- caller requeues the pod now, unless it was requeued within the interval and since the last such
-- change (for that very change: the replica's read lagged). Otherwise keep the refusal, for the
-- watcher's next such change to hand back (the R op of apply.lua, which takes those of its window).
-- ARGV: prefix, uid, namespace/name, keep ms, snapshot generation, interval ms. Returns 1 or 0.
local uid, ref, keep = ARGV[2], ARGV[3], tonumber(ARGV[4])
local seen, interval = tonumber(ARGV[5]), tonumber(ARGV[6])
local now = now_ms()
if tonumber(redis.call('GET', K_RETRYGEN) or '0') > seen then
  redis.call('ZREMRANGEBYSCORE', K_REQUEUED, '-inf', now - interval)
  local last = redis.call('ZSCORE', K_REQUEUED, uid)
  if not last or tonumber(last) < tonumber(redis.call('GET', K_RETRYAT) or '0') then
    redis.call('ZADD', K_REQUEUED, now, uid)
    redis.call('ZREM', K_REFUSED, uid)
    redis.call('HDEL', K_REFUSEDPOD, uid)
    return 1
  end
end
local old = redis.call('ZRANGEBYSCORE', K_REFUSED, '-inf', now - keep, 'LIMIT', 0, 100)
if #old > 0 then
  redis.call('ZREM', K_REFUSED, unpack(old))
  redis.call('HDEL', K_REFUSEDPOD, unpack(old))
end
redis.call('ZADD', K_REFUSED, now, uid)
redis.call('HSET', K_REFUSEDPOD, uid, ref)
return 0
