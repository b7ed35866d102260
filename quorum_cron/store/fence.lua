-- fence.lua: the fenced transitions start / renew / finish of one slot
-- (Store.start, Store.renew, Store.finish; MemoryStore is the model).
--
-- KEYS[1] the job's meta key (one job group), ARGV[1..6]: see _job.lua.
-- ARGV[7]   op: "s" start (committed -> running) | "r" renew | "f" finish
-- ARGV[8]   fire_ms
-- ARGV[9]   node
-- ARGV[10]  token (decimal text, compared as text: no float rounding)
-- ARGV[11]  start/renew: lease_ms; finish: "1" succeeded | "0" failed
-- ARGV[12]  finish: detail (stored as given)
-- ARGV[13]  finish: retries (a failure is retried while the slot ran < 1 + retries times)
-- ARGV[14]  finish: retry backoff ms
--
-- Reply: {now, why, slot} with slot = emit("", record) and why
--   "" done | U unknown slot | S wrong state | T stale token
--   X not the executor | D starting deadline passed | N retry not due yet
-- The caller turns why into the model's reason text (it has the slot).
-- A retried failure writes a "retrying" ledger entry and re-assigns the slot
-- (new token, not-before = now + backoff, notice published) to an agreeing
-- voter that is a member of the job's record; with none it is the last
-- failure: failed, "job failed; no retry: no agreeing voter is a member of
-- epoch E".

bind(1)
local op, fire, node, token = ARGV[7], ARGV[8], ARGV[9], ARGV[10]
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
elseif op == 's' and num(r.f.rn) == 0 and now > r.firen + num(r.f.dl) then
  why = 'D'
elseif op == 's' and now < num(r.f.nb) then
  why = 'N'
end
if why ~= '' then
  return {NOW, why, emit('', r)}
end
if op == 's' then
  set(r, 'st', 'running')
  set(r, 'rn', fmt(num(r.f.rn) + 1))
  set(r, 'sm', NOW)
  set(r, 'lu', fmt(now + tonumber(ARGV[11])))
  save(r)
elseif op == 'r' then
  set(r, 'lu', fmt(now + tonumber(ARGV[11])))
  save(r)
else
  set(r, 'dt', ARGV[12])
  local runs, retries = num(r.f.rn), tonumber(ARGV[13])
  if ARGV[11] == '1' then
    end_slot(r, 'succeeded', 'exit 0')
  elseif runs >= 1 + retries then
    end_slot(r, 'failed', 'job failed')
  elseif meta().p then
    end_slot(r, 'failed', 'job failed; no retry: paused by ' .. M.pb)
  else
    -- The retry's executor: an agreeing voter that is a member of the job's
    -- record (chosen before anything is written: a corrupt record fails the
    -- call whole); with none, the failure is the last one.
    local chosen, nobody = choose(r)
    if not chosen then
      end_slot(r, 'failed', 'job failed; no retry: ' .. nobody)
      meta_flush()
      return {NOW, '', emit('', r)}
    end
    local backoff = math.max(tonumber(ARGV[14]), 0)
    local reason = 'attempt ' .. fmt(runs) .. ' of ' .. fmt(1 + retries) .. ' failed; retry after '
      .. fmt(backoff) .. ' ms'
    log_entry(r, 'retrying', reason)
    set(r, 'rs', reason)
    set(r, 'nb', fmt(now + backoff))
    assign_to(r, chosen)
  end
end
meta_flush()
return {NOW, '', emit('', r)}
