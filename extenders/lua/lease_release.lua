-- Give the lease up only if it is still ours. ARGV: prefix, value.
if redis.call('GET', K_LEADER) ~= ARGV[2] then return 0 end
redis.call('DEL', K_LEADER)
return 1
