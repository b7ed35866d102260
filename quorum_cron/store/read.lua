-- read.lua: read-only slot reads (Store.slot, Store.slots). Writes nothing:
-- a dead slot is reported absent and left for a writer to purge.
--
-- KEYS[1..5] the job's keys (one job group), ARGV[1..5]: see _job.lua.
-- ARGV[6]  job name
-- ARGV[7]  from_ms (inclusive)
-- ARGV[8]  to_ms (inclusive); Store.slot passes from = to = fire_ms
--
-- Reply: {now, slot...}: the live slots with from <= fire_ms <= to, by fire
-- time, each emit(fire_ms, record).

bind(1, ARGV[6])
local out = {NOW}
for _, f in ipairs(redis.call('ZRANGEBYSCORE', K_SLOTS, ARGV[7], ARGV[8])) do
  local r = load(f, false)
  if r then
    out[#out + 1] = emit(f, r)
  end
end
return out
