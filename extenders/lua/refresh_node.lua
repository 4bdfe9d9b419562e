-- Node facts carried by a filter request (any replica). ARGV: prefix, name, resourceVersion, payload.
-- Writes only when the stored resourceVersion is older and the record itself changed, and never
-- brings back a node the watcher deleted unless the copy is newer than the delete.
-- Returns 1 when the snapshot changed, 0 otherwise.
local name, rv, payload = ARGV[2], ARGV[3], ARGV[4]

local function numeric(s) return s and string.match(s, '^%d+$') ~= nil end
local function strip(s) return (string.gsub(s, '^0+', '')) end
-- true when a is strictly newer than b; opaque (non-numeric) versions are never ordered.
local function newer(a, b)
  if not b then return true end
  if not (numeric(a) and numeric(b)) then return false end
  a, b = strip(a), strip(b)
  if #a ~= #b then return #a > #b end
  return a > b
end

local current = redis.call('HGET', K_NODE .. name, '_node')
if current then
  if not newer(rv, redis.call('HGET', K_NODERV, name)) then return 0 end
else
  -- The watcher deleted it: only a copy newer than the delete (the node re-created) may come back.
  local gone = redis.call('HGET', K_NODEGONE, name)
  if gone and not newer(rv, gone) then return 0 end
end
redis.call('HSET', K_NODERV, name, rv)
if current == payload then return 0 end
redis.call('HSET', K_NODE .. name, '_node', payload)
touch(name)
finish()
return 1
