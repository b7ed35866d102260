-- missed.lua: account for a slot nobody voted for (Store.record_missed).
--
-- KEYS[1..5], ARGV[1..5]: see _job.lua.
-- ARGV[6]  fire_ms
-- ARGV[7]  deadline_ms
-- ARGV[8]  reason
--
-- Reply: {now, slot} with slot = emit("", record) as it stands afterwards.

local fire = ARGV[6]
local r = load(fire, true)
if (r == nil or r.f.st == 'proposed') and now > tonumber(fire) + tonumber(ARGV[7]) then
  if r == nil then
    r = new_slot(fire)
    trim()
    redis.call('ZADD', K_SLOTS, fire, fire)
  end
  end_slot(r, 'missed', ARGV[8])
end
return {NOW, emit('', r)}
