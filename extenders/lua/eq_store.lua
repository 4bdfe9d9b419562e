-- Store entries one replica computed for one class of pods (the equivalence cache's shared tier),
-- and keep the tier within its bounds: the class's hash lives ttl ms after its last write, and the
-- list of classes keeps the most recently written max_classes (the others' hashes are deleted).
-- ARGV: the tier's key prefix, class, ttl (ms), max classes, then field, entry pairs.
-- Returns how many classes were dropped for the cap.
local P = ARGV[1]
local K_CLASSES = P .. ':classes'
local class = ARGV[2]
local ttl = tonumber(ARGV[3])
local cap = tonumber(ARGV[4])
local key = P .. ':c:' .. class
-- HSET in chunks: unpack() of thousands of arguments would overflow Lua's stack.
local i = 5
while i <= #ARGV do
  local last = math.min(i + 999, #ARGV)
  redis.call('HSET', key, unpack(ARGV, i, last))
  i = last + 1
end
redis.call('PEXPIRE', key, ttl)
local clock = redis.call('TIME')
local now = tonumber(clock[1]) * 1000 + math.floor(tonumber(clock[2]) / 1000)
redis.call('ZADD', K_CLASSES, now, class)
redis.call('ZREMRANGEBYSCORE', K_CLASSES, '-inf', now - ttl)
redis.call('PEXPIRE', K_CLASSES, ttl)
local over = redis.call('ZCARD', K_CLASSES) - cap
if over <= 0 then return 0 end
local gone = redis.call('ZPOPMIN', K_CLASSES, over)
for j = 1, #gone, 2 do redis.call('DEL', P .. ':c:' .. gone[j]) end
return over
