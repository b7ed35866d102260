-- sweep.lua: enforce deadlines, start timeouts and leases on the open slots
-- of one or more jobs (Store.sweep; MemoryStore._sweep_one is the model).
--
-- KEYS: one meta key per job group (see _job.lua), ARGV[1..6]: see _job.lua.
-- ARGV[7..] per group g = 1, 2, ... (as many as KEYS), in order: n (its
--             number of parameter sets: the caller's SweepParams for this
--             job, in call order), then n sets of deadline_ms,
--             start_timeout_ms, delivery ("m" at-most-once | "l"
--             at-least-once)
--
-- A takeover (start timeout, expired lease under at-least-once) picks the
-- next executor among the agreeing voters that are members of the job's
-- record; a slot none of whose agreeing voters is a member any more ends
-- (missed if it never started, failed if waiting for a retry, else lost).
--
-- A proposed slot is missed once now > fire + max(its dl, deadline_ms): dl
-- is the largest deadline any of its votes carried (see vote.lua).
--
-- Reply: {now, set_1, ..., set_N}, flat, over all parameter sets in
-- argument order; set_i = due_i, n_i, then n_i pairs fire_ms, slot value
-- (value(r)): the slots set i changed, by fire time. due_i (an integer) is
-- the earliest store time at which sweep_one could change one of its job's
-- open slots as they stand after this call (due_at below; 0: no slot open,
-- or its index was unreadable): the caller sweeps that job again then
-- (SweepResult.open_due; MemoryStore's _sweep_due_at is the model).
-- Flat, not an array per set: Redis builds each nested array of a script's
-- reply as a reply block of its own, about 4,400 instructions per swept job
-- whose array is empty, as most are (benchmarks/store_cycle.py, issue 27).

-- A takeover: the next executor among the slot's agreeing voters that are
-- members of the job's record; with none (all left the membership since the
-- commit) the slot ends instead (unassignable in _job.lua).
local function take_over(r)
  local chosen, why = choose(r)
  if chosen then
    assign_to(r, chosen)
  else
    unassignable(r, why)
  end
  return true
end

local function sweep_one(r, deadline, start_timeout, delivery)
  local st = r.f.st
  if st == 'proposed' then
    if now > r.firen + math.max(num(r.dl), deadline) then
      end_slot(r, 'missed', 'deadline passed before quorum')
      return true
    end
    return false
  end
  if st == 'committed' then
    if now <= math.max(num(r.f.cm), num(r.f.nb)) + start_timeout then
      return false
    end
    if num(r.f.rn) == 0 and now > r.firen + num(r.f.dl) then
      local names = list_decode(r.f.as)
      end_slot(r, 'missed', 'not started before deadline by ' .. table.concat(names, ','))
      return true
    end
    return take_over(r)
  end
  if st == 'running' and now > num(r.f.lu) then
    if delivery == 'l' then
      return take_over(r)
    end
    end_slot(r, 'lost', 'lease of ' .. (r.f.ex or '') .. ' expired mid-run')
    return true
  end
  return false
end

-- The first store time at which sweep_one(r, ...) would change r (0: r ended).
local function due_at(r, deadline, start_timeout)
  local st = r.f.st
  if st == 'proposed' then
    return r.firen + math.max(num(r.dl), deadline) + 1
  end
  if st == 'committed' then
    return math.max(num(r.f.cm), num(r.f.nb)) + start_timeout + 1
  end
  if st == 'running' then
    return num(r.f.lu) + 1
  end
  return 0
end

local out, n = {NOW}, 1
local stop = each_item(3, function(i)
  local deadline, start_timeout, delivery
  local head, changed = n, 0 -- (out[head + 1], out[head + 2]: this set's due_i, n_i)
  n = n + 2
  local job_due = 0
  -- (Arguments as text: a Lua number passed to redis.call is formatted with
  -- %.14g first, about half the cost of this ZRANGE; benchmarks/store_cycle.py.)
  local open = redis.pcall('ZRANGE', P .. 'open', '0', '-1')
  if open.err then -- a corrupt index: this job is skipped, the others swept
    open = {}
  end
  if open[1] ~= nil then -- (most swept jobs have nothing open: no tonumber for them)
    deadline, start_timeout, delivery = tonumber(ARGV[i]), tonumber(ARGV[i + 1]), ARGV[i + 2]
  end
  for _, f in ipairs(open) do
    -- A corrupt slot (or job key) is skipped: it must not stop the sweep
    -- of the other slots and jobs in this call.
    local ok, r, why = pcall(load, f, true)
    if not ok then
      r, why = nil, 'corrupt'
    end
    if r then
      local swept, changes = pcall(sweep_one, r, deadline, start_timeout, delivery)
      if not swept then
        local outage = transient(changes)
        if outage then -- an outage (out of memory, a slot moving), not a corrupt slot
          return redis.error_reply(outage)
        end
        M, M_dirty = nil, nil
      else
        if changes then
          out[n + 1], out[n + 2] = r.fire, value(r)
          n = n + 2
          changed = changed + 1
        end
        local at = due_at(r, deadline, start_timeout)
        if at > 0 then
          if job_due == 0 or at < job_due then
            job_due = at
          end
        end
      end
    elseif why == 'gone' then
      redis.call('ZREM', P .. 'open', f)
    end
  end
  out[head + 1], out[head + 2] = job_due, changed
end, meta_flush)
if stop then
  return stop
end
return out
