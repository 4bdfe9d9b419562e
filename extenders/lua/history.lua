-- A new connection reached the Redis server process whose run id is ARGV[2]. When the keys of
-- prefix ARGV[1] were last served by another process (a Sentinel failover promoted a replica, or
-- the primary restarted and reloaded older data), writes acknowledged by that other process may be
-- missing here and the generation counter may hand out numbers already used. So a new store
-- history starts: a new store id (ARGV[3]) makes every replica reload in full and fences the old
-- leader's writes, and the lease is dropped so the leader steps down at its next renewal and the
-- next term relists from the API server. Returns 1 when a new history was started, else 0.
local K_SERVER = ARGV[1] .. ':server'
local K_STOREID = ARGV[1] .. ':storeid'
local K_LEADER = ARGV[1] .. ':leader'
local seen = redis.call('GET', K_SERVER)
if seen == ARGV[2] then return 0 end
redis.call('SET', K_SERVER, ARGV[2])
if redis.call('EXISTS', K_STOREID) == 0 then return 0 end
redis.call('SET', K_STOREID, ARGV[3])
redis.call('DEL', K_LEADER)
return 1
