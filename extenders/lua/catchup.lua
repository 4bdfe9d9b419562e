-- A replica's incremental read, atomic. ARGV: prefix, the replica's generation, max changed items,
-- a fresh random store id (used only if the store has none), the names of the record hashes to read,
-- comma-separated (``pending`` and each kind's: see extenders/sync/kinds.py; one argument, as most
-- calls find nothing changed and never read it).
-- Returns {gen, sid} when nothing moved; {gen, sid, 'reload'} when the replica must load everything
-- (older than the tombstone floor, ahead of the store, or too much changed for one reply);
-- else {gen, sid, 'delta', nodes, changes of each named hash in order} where
-- nodes = {{name, gen, rv, hgetall}...} (an empty hgetall = node gone) and each hash's changes are
-- flat {key, record|false, ...}.
-- sid is the store id: the reader creates it when missing, so no replica ever takes "no id" as
-- an identity (two different emptied histories would look alike); a changed id means reload.
redis.call('SET', K_STOREID, ARGV[4], 'NX')
local sid = redis.call('GET', K_STOREID)
local gen = tonumber(redis.call('GET', K_GEN) or '0')
local since = tonumber(ARGV[2])
if gen == since then return {gen, sid} end
local limit = tonumber(ARGV[3])
if since > gen or since < tonumber(redis.call('GET', K_FLOOR) or '0') then return {gen, sid, 'reload'} end
local after = '(' .. since
local scored = redis.call('ZRANGEBYSCORE', K_NODES, after, '+inf', 'WITHSCORES')
if #scored > 2 * limit then return {gen, sid, 'reload'} end
local nodes = {}
for i = 1, #scored, 2 do
  local name = scored[i]
  nodes[#nodes + 1] = {name, scored[i + 1], redis.call('HGET', K_NODERV, name), redis.call('HGETALL', K_NODE .. name)}
end
local budget = limit - #nodes
local out = {gen, sid, 'delta', nodes}
for name in string.gmatch(ARGV[5], '[^,]+') do
  local hkey = P .. ':' .. name
  local ids = redis.call('ZRANGEBYSCORE', hkey .. 'z', after, '+inf')
  budget = budget - #ids
  if budget < 0 then return {gen, sid, 'reload'} end
  local changes = {}
  for _, id in ipairs(ids) do
    changes[#changes + 1] = id
    changes[#changes + 1] = redis.call('HGET', hkey, id)
  end
  out[#out + 1] = changes
end
return out
