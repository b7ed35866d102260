-- missed.lua: account for a slot nobody voted for (Store.record_missed).
--
-- KEYS[1] the job's meta key (one job group), ARGV[1..6]: see _job.lua.
-- ARGV[7]  fire_ms
-- ARGV[8]  deadline_ms
-- ARGV[9]  reason
--
-- An absent slot, or a proposed one, becomes missed once now > fire +
-- deadline — for a proposed slot the larger of deadline_ms and its dl, the
-- largest deadline any of its votes carried (see vote.lua).
--
-- Reply: {now, slot} with slot = emit("", record) as it stands afterwards.

bind(1)
local fire = ARGV[7]
local r = load(fire, true)
if r == nil or r.proposed then
  local deadline = tonumber(ARGV[8])
  if r then
    deadline = math.max(deadline, num(r.dl))
  end
  if now > tonumber(fire) + deadline then
    if r == nil then
      r = new_slot(P .. 'slot:' .. fire, fire, tonumber(fire))
    end
    end_slot(r, 'missed', ARGV[9])
  end
end
meta_flush()
return {NOW, emit('', r)}
