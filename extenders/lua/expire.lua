-- Drop assumed pods whose deadline passed without the watch confirming them.
-- ARGV: prefix, max pods per call. Returns the uids removed.
local uids = redis.call('ZRANGEBYSCORE', K_ASSUMED, '-inf', now_ms(), 'LIMIT', 0, tonumber(ARGV[2]))
for _, uid in ipairs(uids) do unplace(uid) end
finish()
return uids
