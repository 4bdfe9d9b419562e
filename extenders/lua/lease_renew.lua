-- Extend the lease only if it still carries our value (compare-and-set). ARGV: prefix, value, ttl ms.
if redis.call('GET', K_LEADER) ~= ARGV[2] then return 0 end
redis.call('PEXPIRE', K_LEADER, tonumber(ARGV[3]))
return 1
