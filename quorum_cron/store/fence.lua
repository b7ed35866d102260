-- fence.lua: the fenced transitions start / renew / finish of slots of one
-- or more jobs (Store.start, Store.renew, Store.finish, Store.fenced;
-- MemoryStore is the model).
--
-- KEYS: one meta key per job group (see _job.lua), ARGV[1..6]: see _job.lua.
-- ARGV[7..] per group g = 1, 2, ... (as many as KEYS), in order: n (its
-- number of requests, in call order), then n requests of 8 arguments each:
--   op       "s" start (committed -> running) | "r" renew | "f" finish
--   fire_ms
--   node
--   token    (decimal text, compared as text: no float rounding)
--   a        start/renew: lease_ms; finish: "1" succeeded | "0" failed
--   detail   finish: stored as given ("" otherwise)
--   retries  finish: a failure is retried while the slot ran < 1 + retries
--            times ("" otherwise)
--   backoff  finish: retry backoff ms ("" otherwise)
--
-- Why one call for many: a burst's executor starts and finishes thousands
-- of slots, and a call of its own per request paid the script's set-up, a
-- TIME and the call's dispatch each time: about 9 us of server CPU of a
-- start's 17 (benchmarks/scale.py, issue 27). Each request is still its own
-- step, in call order; a job's requests are one group, in order.
--
-- Reply: {now, why_1, value_1, failures_1, ..., why_N, value_N, failures_N}
-- over all requests in argument order, three values each, flat: value the
-- slot value (value(r), "" when absent), failures (a finish that ended the
-- slot succeeded: the job's failure streak before it, see end_slot in
-- _job.lua; "" otherwise) and why
--   "" done | U unknown slot | S wrong state | T stale token
--   X not the executor | D starting deadline passed | N retry not due yet
-- or "!", message, "": the request failed on a corrupt key of its job (only
-- that request; an outage — out of memory, a slot moving — fails the call).
-- Flat, not an array per request: Redis builds each nested array of a
-- script's reply as a reply block of its own, about 12,000 instructions per
-- request for two small arrays (benchmarks/store_cycle.py, issue 27).
-- The caller turns why into the model's reason text (it has the slot).
-- A retried failure writes a "retrying" ledger entry and re-assigns the slot
-- (new token, not-before = now + backoff, notice published) to an agreeing
-- voter that is a member of the job's record; with none it is the last
-- failure: failed, "job failed; no retry: no agreeing voter is a member of
-- epoch E".

local function fence_one(op, fire, node, token, a, detail, retries, backoff)
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
    return why, value(r), ''
  end
  if op == 's' then
    set(r, 'st', 'running')
    set(r, 'rn', fmt(num(r.f.rn) + 1))
    set(r, 'sm', NOW)
    set(r, 'lu', fmt(now + tonumber(a)))
    save(r)
  elseif op == 'r' then
    set(r, 'lu', fmt(now + tonumber(a)))
    save(r)
  else
    set(r, 'dt', detail)
    local runs, retries = num(r.f.rn), tonumber(retries)
    if a == '1' then
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
        return '', value(r), ''
      end
      local backoff = math.max(tonumber(backoff), 0)
      local reason = 'attempt ' .. fmt(runs) .. ' of ' .. fmt(1 + retries) .. ' failed; retry after '
        .. fmt(backoff) .. ' ms'
      log_entry(r, 'retrying', reason)
      set(r, 'rs', reason)
      set(r, 'nb', fmt(now + backoff))
      assign_to(r, chosen)
    end
  end
  meta_flush()
  return '', value(r), r.fb and fmt(r.fb) or ''
end

local out, n = {NOW}, 1
local stop = each_item(8, function(i)
  local ok, why, val, failures = pcall(fence_one, ARGV[i], ARGV[i + 1], ARGV[i + 2], ARGV[i + 3], ARGV[i + 4],
    ARGV[i + 5], ARGV[i + 6], ARGV[i + 7])
  if not ok then
    local outage = transient(why)
    if outage then
      return redis.error_reply(outage)
    end
    M, M_dirty = nil, nil -- (the job's cached meta may be half-changed: read it afresh)
    why, val, failures = '!', tostring(type(why) == 'table' and why.err or why), ''
  end
  out[n + 1], out[n + 2], out[n + 3] = why, val, failures
  n = n + 3
end)
if stop then
  return stop
end
return out
