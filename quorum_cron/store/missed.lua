-- missed.lua: account for a slot nobody voted for (Store.record_missed).
--
-- KEYS[1..5] the job's keys (one job group), ARGV[1..5]: see _job.lua.
-- ARGV[6]  job name
-- ARGV[7]  fire_ms
-- ARGV[8]  deadline_ms
-- ARGV[9]  reason
--
-- Reply: {now, slot} with slot = emit("", record) as it stands afterwards.

bind(1, ARGV[6])
local fire = ARGV[7]
local r = load(fire, true)
if (r == nil or r.f.st == 'proposed') and now > tonumber(fire) + tonumber(ARGV[8]) then
  if r == nil then
    r = new_slot(fire)
    trim()
    redis.call('ZADD', K_SLOTS, fire, fire)
  end
  end_slot(r, 'missed', ARGV[9])
end
meta_flush()
return {NOW, emit('', r)}
