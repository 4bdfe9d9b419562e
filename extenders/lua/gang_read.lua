-- Read-only view of gangs for the status API. ARGV: prefix, cooldown ms, then gang keys
-- ('' alone = every known gang). Returns {now ms, {gang, state hash flat, arrivals flat,
-- admitted 0/1, queue position or -1}...}.
local function main()
  local now = now_ms()
  local gangs = {}
  if #ARGV == 3 and ARGV[3] == '' then
    gangs = redis.call('ZRANGE', G_INDEX, 0, -1)
  else
    for i = 3, #ARGV do gangs[#gangs + 1] = ARGV[i] end
  end
  local out = {now}
  local ranks = {}
  for i, gk in ipairs(ranked_queue()) do ranks[gk] = i - 1 end
  for _, gk in ipairs(gangs) do
    local rank = ranks[gk]
    out[#out + 1] = {
      gk,
      redis.call('HGETALL', k_state(gk)),
      redis.call('HGETALL', k_arr(gk)),
      redis.call('ZSCORE', G_ASM, gk) and 1 or 0,
      rank and rank + 1 or -1,
    }
  end
  return out
end

return main()
