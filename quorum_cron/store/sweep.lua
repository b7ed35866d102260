-- sweep.lua: enforce deadlines, start timeouts and leases on the open slots
-- of ONE job (Store.sweep; MemoryStore._sweep_one is the model).
--
-- KEYS[1..5], ARGV[1..5]: see _job.lua.
-- ARGV[6]        n, the number of parameter sets that follow (the caller's
--                SweepParams for this job, in call order)
-- ARGV[7 + 3i..] set i: deadline_ms, start_timeout_ms,
--                delivery ("m" at-most-once | "l" at-least-once)
--
-- Reply: {now, changed_1, ..., changed_n}; changed_i = array of the slots
-- set i changed, by fire time, each emit(fire_ms, record).

local function sweep_one(r, deadline, start_timeout, delivery)
  local st = r.f.st
  if st == 'proposed' then
    if now > r.firen + deadline then
      end_slot(r, 'missed', 'deadline passed before quorum')
      return true
    end
    return false
  end
  if st == 'committed' then
    if now <= num(r.f.cm) + start_timeout then
      return false
    end
    if r.f.rn ~= '1' and now > r.firen + num(r.f.dl) then
      local names = list_decode(r.f.as)
      end_slot(r, 'missed', 'not started before deadline by ' .. table.concat(names, ','))
      return true
    end
    return assign(r)
  end
  if st == 'running' and now > num(r.f.lu) then
    if delivery == 'l' then
      return assign(r)
    end
    end_slot(r, 'lost', 'lease of ' .. (r.f.ex or '') .. ' expired mid-run')
    return true
  end
  return false
end

local out = {NOW}
local n = tonumber(ARGV[6])
for i = 0, n - 1 do
  local b = 7 + 3 * i
  local deadline, start_timeout, delivery = tonumber(ARGV[b]), tonumber(ARGV[b + 1]), ARGV[b + 2]
  local changed = {}
  for _, f in ipairs(redis.call('ZRANGE', K_OPEN, 0, -1)) do
    local r, why = load(f, true)
    if r then
      if sweep_one(r, deadline, start_timeout, delivery) then
        changed[#changed + 1] = emit(r.fire, r)
      end
    elseif why == 'gone' then
      redis.call('ZREM', K_OPEN, f)
    end
  end
  out[#out + 1] = changed
end
meta_flush()
return out
