-- Un-assume a pod (its bind failed). ARGV: prefix, uid, node ('' = wherever it is assumed).
-- Only an assumed pod is removed: one the watch already confirmed stays. Returns 1 or 0.
local uid, node = ARGV[2], ARGV[3]
if not redis.call('ZSCORE', K_ASSUMED, uid) then return 0 end
local loc = redis.call('HGET', K_PODLOC, uid)
if node ~= '' and loc and loc ~= node then return 0 end
unplace(uid)
finish()
return 1
