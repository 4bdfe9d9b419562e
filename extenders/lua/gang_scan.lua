-- What the reconciler compares with its snapshot: every gang the bookkeeping knows, read-only.
-- ARGV: prefix, cooldown ms. Returns {{gang, min, state, admitted 0/1, queued 0/1, arrival uids...}...}.
local function main()
  local out = {}
  for _, gk in ipairs(redis.call('ZRANGE', G_INDEX, 0, -1)) do
    local st = redis.call('HMGET', k_state(gk), 'min', 'state')
    local entry = {
      gk,
      st[1] or '',
      st[2] or '',
      redis.call('ZSCORE', G_ASM, gk) and 1 or 0,
      redis.call('ZSCORE', G_QUEUE, gk) and 1 or 0,
    }
    for _, uid in ipairs(redis.call('HKEYS', k_arr(gk))) do entry[#entry + 1] = uid end
    out[#out + 1] = entry
  end
  return out
end

return main()
