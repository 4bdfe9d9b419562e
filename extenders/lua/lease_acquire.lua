-- Take the leader lease if free (or already ours): a new fencing epoch per term.
-- ARGV: prefix, holder, ttl ms. Returns {epoch, ttl} when acquired, {0, pttl, current value} if not.
local holder, ttl = ARGV[2], tonumber(ARGV[3])
local current = redis.call('GET', K_LEADER)
if current then
  local owner = string.match(current, '^(.*)|%d+$')
  if owner ~= holder then return {0, redis.call('PTTL', K_LEADER), current} end
end
local epoch = redis.call('INCR', K_EPOCH)
redis.call('SET', K_LEADER, holder .. '|' .. epoch, 'PX', ttl)
return {epoch, ttl}
