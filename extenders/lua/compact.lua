-- Forget tombstones stamped at or below a generation and raise the floor to it: a replica
-- older than the floor may have missed a delete, so it reloads. ARGV: prefix, generation.
-- A tombstone is '<tag>:<id>': tag 'n' a node (P:nodes), 'p' a pending pod (P:pendingz), else a
-- kind's hash name (P:<hash>z). Returns the new floor.
local upto = tonumber(ARGV[2])
local floor = tonumber(redis.call('GET', K_FLOOR) or '0')
if upto <= floor then return floor end
local tombs = redis.call('ZRANGEBYSCORE', K_TOMBS, '-inf', upto)
for _, tomb in ipairs(tombs) do
  local tag, id = string.match(tomb, '^([^:]*):(.*)$')
  if tag == 'n' then redis.call('ZREM', K_NODES, id)
  elseif tag == 'p' then redis.call('ZREM', K_PENDINGZ, id)
  elseif tag then redis.call('ZREM', P .. ':' .. tag .. 'z', id) end
end
redis.call('ZREMRANGEBYSCORE', K_TOMBS, '-inf', upto)
redis.call('SET', K_FLOOR, upto)
return upto
