-- Filter-time gang check (after the caller's member-count and capacity checks).
-- ARGV: prefix, cooldown ms, gang, ready ('1' = the caller's checks passed), order score,
-- max assembling, queue idle ms, min members.
-- Returns {'cooling', why, ms left} | {'permitted'} | {'unready'} |
--         {'admitted', held arrivals, ms left in the window or -1} | {'queued', position, assembling gangs}
local gk, ready = ARGV[3], ARGV[4]
local score, max_asm, idle, minimum = tonumber(ARGV[5]), tonumber(ARGV[6]), tonumber(ARGV[7]), ARGV[8]

local function main()
  local now = now_ms()
  local state = maintain(gk, now)
  if state == 'rejected' then
    local st = redis.call('HMGET', k_state(gk), 'why', 'cool')
    return {'cooling', st[1] or '', tonumber(st[2] or '0') - now}
  end
  if state == 'permitted' then
    activity(gk, now)
    return {'permitted'}
  end
  if ready ~= '1' then
    -- Cannot assemble now: give up a queue place, and an admission with nothing held yet.
    redis.call('ZREM', G_QUEUE, gk)
    if redis.call('HLEN', k_arr(gk)) == 0 then redis.call('ZREM', G_ASM, gk) end
    return {'unready'}
  end
  activity(gk, now)
  redis.call('HSET', k_state(gk), 'min', minimum)
  local admitted, position = admit(gk, now, score, max_asm, idle)
  if admitted then
    local deadline = tonumber(redis.call('HGET', k_state(gk), 'deadline') or '')
    return {'admitted', redis.call('HLEN', k_arr(gk)), deadline and (deadline - now) or -1}
  end
  return {'queued', position, assembling_list()}
end

local reply = main()
finish()
return reply
