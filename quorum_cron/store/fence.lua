-- fence.lua: the fenced transitions start / renew / finish of one slot
-- (Store.start, Store.renew, Store.finish; MemoryStore._fenced is the model).
--
-- KEYS[1..5], ARGV[1..5]: see _job.lua.
-- ARGV[6]   op: "s" start (committed -> running) | "r" renew | "f" finish
-- ARGV[7]   fire_ms
-- ARGV[8]   node
-- ARGV[9]   token (decimal text, compared as text: no float rounding)
-- ARGV[10]  start/renew: lease_ms; finish: "1" succeeded | "0" failed
-- ARGV[11]  finish: detail (stored as given)
--
-- Reply: {now, why, slot} with slot = emit("", record) and why
--   "" done | U unknown slot | S wrong state | T stale token
--   X not the executor | D starting deadline passed
-- The caller turns why into the model's reason text (it has the slot).

local op, fire, node, token = ARGV[6], ARGV[7], ARGV[8], ARGV[9]
local r = load(fire, true)
local want = (op == 's') and 'committed' or 'running'
local why = ''
if not r then
  why = 'U'
elseif r.f.st ~= want then
  why = 'S'
elseif (r.f.tk or '0') ~= token then
  why = 'T'
elseif (r.f.ex or '') ~= node then
  why = 'X'
elseif op == 's' and r.f.rn ~= '1' and now > r.firen + num(r.f.dl) then
  why = 'D'
end
if why ~= '' then
  return {NOW, why, emit('', r)}
end
if op == 's' then
  set(r, 'st', 'running')
  set(r, 'rn', '1')
  set(r, 'sm', NOW)
  set(r, 'lu', fmt(now + tonumber(ARGV[10])))
  save(r)
elseif op == 'r' then
  set(r, 'lu', fmt(now + tonumber(ARGV[10])))
  save(r)
else
  set(r, 'dt', ARGV[11])
  if ARGV[10] == '1' then
    end_slot(r, 'succeeded', 'exit 0')
  else
    end_slot(r, 'failed', 'job failed')
  end
end
return {NOW, '', emit('', r)}
