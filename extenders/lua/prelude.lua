-- Shared by every snapshot-writing script (prepended by extenders/sync/store/base.py).
-- ARGV[1] is the key prefix. Every script that changes the snapshot bumps the cluster
-- generation at most once, and stamps each node / item it changed with that generation.
local P = ARGV[1]
local K_GEN = P .. ':gen'
local K_NODES = P .. ':nodes'
local K_NODE = P .. ':node:'
local K_NODERV = P .. ':noderv'
local K_PODLOC = P .. ':podloc'
local K_PENDING = P .. ':pending'
local K_PENDINGZ = P .. ':pendingz'
local K_ASSUMED = P .. ':assumed'
local K_TOMBS = P .. ':tombs'
local K_FLOOR = P .. ':floor'
local K_SYNCED = P .. ':synced'
local K_EPOCH = P .. ':epoch'
local K_LEADER = P .. ':leader'
local K_STOREID = P .. ':storeid'
local K_NODEGONE = P .. ':nodegone'
local K_NODEGONEZ = P .. ':nodegonez'
local K_REFUSED = P .. ':refused'
local K_REFUSEDPOD = P .. ':refusedpod'
local K_REQUEUED = P .. ':requeued'
local K_RETRYGEN = P .. ':retrygen'
local K_RETRYAT = P .. ':retryat'

local new_gen = nil
local function bump()
  if not new_gen then new_gen = redis.call('INCR', K_GEN) end
  return new_gen
end

local touched = {}
local touched_list = {}
local function touch(node)
  if not touched[node] then
    touched[node] = true
    touched_list[#touched_list + 1] = node
  end
end

-- Stamp every touched node; a node whose hash is now gone leaves a tombstone.
local function finish()
  if #touched_list > 0 then
    local g = bump()
    for _, node in ipairs(touched_list) do
      redis.call('ZADD', K_NODES, g, node)
      if redis.call('EXISTS', K_NODE .. node) == 0 then
        redis.call('ZADD', K_TOMBS, g, 'n:' .. node)
      else
        redis.call('ZREM', K_TOMBS, 'n:' .. node)
      end
    end
  end
  if new_gen then return new_gen end
  return tonumber(redis.call('GET', K_GEN) or '0')
end

-- A keyed record (a pending pod, or one of a kind's: see extenders/sync/kinds.py) with its own
-- generation zset; ``tag`` prefixes its tombstone.
local function put_item(hkey, zkey, tag, id, payload)
  if redis.call('HGET', hkey, id) == payload then return false end
  redis.call('HSET', hkey, id, payload)
  redis.call('ZADD', zkey, bump(), id)
  redis.call('ZREM', K_TOMBS, tag .. id)
  return true
end

local function del_item(hkey, zkey, tag, id)
  if redis.call('HDEL', hkey, id) == 0 then return false end
  local g = bump()
  redis.call('ZADD', zkey, g, id)
  redis.call('ZADD', K_TOMBS, g, tag .. id)
  return true
end

local function now_ms()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end

-- Take a pod off whatever node it is placed on (bound or assumed).
local function unplace(uid)
  local loc = redis.call('HGET', K_PODLOC, uid)
  if loc then
    redis.call('HDEL', K_NODE .. loc, uid)
    redis.call('HDEL', K_PODLOC, uid)
    touch(loc)
  end
  redis.call('ZREM', K_ASSUMED, uid)
  return loc
end

-- Reserve (assume) a pod on a node: a compare-and-set on the node's generation when
-- ``expected`` is not ''. Used by assume.lua and the gang scripts. Returns nil on success,
-- else the reply to hand back: {'conflict', current generation} | {'bound', node}.
local function reserve(uid, node, payload, expected, ttl, now)
  if expected ~= '' then
    local current = tonumber(redis.call('ZSCORE', K_NODES, node) or '0')
    if current ~= tonumber(expected) then return {'conflict', current} end
  end
  local loc = redis.call('HGET', K_PODLOC, uid)
  if loc and not redis.call('ZSCORE', K_ASSUMED, uid) then return {'bound', loc} end
  if loc and loc ~= node then
    redis.call('HDEL', K_NODE .. loc, uid)
    touch(loc)
  end
  redis.call('HSET', K_PODLOC, uid, node)
  if redis.call('HGET', K_NODE .. node, uid) ~= payload then
    redis.call('HSET', K_NODE .. node, uid, payload)
    touch(node)
  end
  redis.call('ZADD', K_ASSUMED, now + ttl, uid)
  return nil
end
