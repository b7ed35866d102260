-- missed.lua: account for slots nobody voted for, of one or more jobs
-- (Store.record_missed, Store.record_missed_many; MemoryStore is the model).
--
-- KEYS: one meta key per job group (see _job.lua), ARGV[1..6]: see _job.lua.
-- ARGV[7..] per group g = 1, 2, ... (as many as KEYS), in order: n (its
-- number of requests, in call order), then n requests of 3 arguments each:
--   fire_ms
--   deadline_ms
--   reason
--
-- An absent slot, or a proposed one, becomes missed once now > fire +
-- deadline — for a proposed slot the larger of deadline_ms and its dl, the
-- largest deadline any of its votes carried (see vote.lua).
--
-- Why one call for many: a node that could not vote for a minute's slots in
-- time records each job's slot missed; a call each at 100,000 jobs
-- kept its store thread busy for minutes while the next minutes' votes
-- waited (benchmarks/scale.py, issue 27). Each request is still its own
-- step, in call order.
--
-- Reply: {now, why_1, value_1, ..., why_N, value_N}, flat (see fence.lua):
-- why "" and the slot value as it stands afterwards ("" when absent), or
-- "!" and the message: the request failed on a corrupt key of its job (only
-- that request; an outage fails the call).

local function missed_one(fire, deadline_ms, reason)
  local r = load(fire, true)
  if r == nil or r.proposed then
    local deadline = tonumber(deadline_ms)
    if r then
      deadline = math.max(deadline, num(r.dl))
    end
    if now > tonumber(fire) + deadline then
      if r == nil then
        r = new_slot(P .. 'slot:' .. fire, fire, tonumber(fire))
      end
      end_slot(r, 'missed', reason)
    end
  end
  meta_flush()
  return value(r)
end

local out, n = {NOW}, 1
local stop = each_item(3, function(i)
  local ok, val = pcall(missed_one, ARGV[i], ARGV[i + 1], ARGV[i + 2])
  local why = ''
  if not ok then
    local outage = transient(val)
    if outage then
      return redis.error_reply(outage)
    end
    M, M_dirty = nil, nil -- (the job's cached meta may be half-changed: read it afresh)
    why, val = '!', tostring(type(val) == 'table' and val.err or val)
  end
  out[n + 1], out[n + 2] = why, val
  n = n + 2
end)
if stop then
  return stop
end
return out
