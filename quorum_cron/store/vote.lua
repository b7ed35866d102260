-- vote.lua: record votes for slots of one or more jobs, committing each slot
-- that reaches quorum (Store.vote; MemoryStore._vote_one is the model).
--
-- KEYS: five keys per job group (see _job.lua), ARGV[1..5]: see _job.lua.
-- ARGV[6]   p, the number of parameter sets that follow, each 5 fields:
--             node, quorum, max_skew_ms, deadline_ms, overlap ("a" allow |
--             "f" forbid | "r" replace) — the fields a node's votes share,
--             sent once per call
-- then      g, the number of job groups that follow; per group, in order:
--             job name, n (its number of votes), then n votes of 3 fields:
--             fire_ms, spec_hash, parameter set (1-based index)
--           Votes of one job are handled in order; groups are independent.
--
-- Reply: {now, code_1, value_1, ..., code_N, value_N} over all votes in
--   argument order (flat: a table per vote costs more to convert), value_i
--   a slot's reply value (see value in _job.lua), code_i
--   R recorded | C committed (or skipped by overlap forbid) | D decided
--   E early (not stored) | M missed | S skipped because the job is paused

local function vote_one(fire, node, spec, quorum, skew, deadline, overlap)
  local raw, st, key = peek(fire)
  if st and DECIDED[st] then
    return 'D', raw
  end
  local firen = tonumber(fire)
  local r = load(fire, true, raw, key)
  if now < firen - skew then
    return 'E', value(r)
  end
  if not r then
    r = new_slot(fire)
    trim()
    redis.call('ZADD', K_SLOTS, fire, fire)
    redis.call('ZADD', K_OPEN, fire, fire)
  end
  local m = meta()
  if m.p then
    set_vote(r, node, spec)
    end_slot(r, 'skipped', 'paused by ' .. m.pb .. ': ' .. m.pr)
    return 'S', value(r)
  end
  if now > firen + deadline then
    end_slot(r, 'missed', 'deadline passed before quorum')
    return 'M', value(r)
  end
  set_vote(r, node, spec)
  if quorum > m.q then
    meta_set('q', quorum)
  end
  local agreeing = 0
  for _, h in pairs(r.votes) do
    if h == spec then
      agreeing = agreeing + 1
    end
  end
  if agreeing < m.q then
    if r.proposed and node ~= '' then
      write_vote(r, node, spec)
    else
      -- A slot kept as a string (stored before the vote hash existed) stays
      -- one; so does one with an empty node id (the hash's expiry field).
      save(r)
    end
    return 'R', value(r)
  end
  -- Quorum reached: decide the slot in this same call.
  set(r, 'sh', spec)
  set(r, 'dl', fmt(deadline))
  if firen > m.hw then
    meta_set('hw', firen)
  end
  if overlap ~= 'a' then
    local active = {}
    for _, f in ipairs(redis.call('ZRANGE', K_OPEN, 0, -1)) do
      if f ~= fire then
        local o = load(f, true)
        if o and (o.f.st == 'committed' or o.f.st == 'running') then
          active[#active + 1] = o
        end
      end
    end
    if #active > 0 and overlap == 'f' then
      end_slot(r, 'skipped', 'overlap forbidden: slot ' .. active[1].fire .. ' active')
      return 'C', value(r)
    end
    if #active > 0 and overlap == 'r' then
      for _, o in ipairs(active) do
        end_slot(o, o.f.st == 'running' and 'failed' or 'skipped', 'replaced by slot ' .. fire)
      end
    end
  end
  assign(r)
  return 'C', value(r)
end

local P = {}
local i = 7
for k = 1, tonumber(ARGV[6]) do
  P[fmt(k)] = {ARGV[i], tonumber(ARGV[i + 1]), tonumber(ARGV[i + 2]), tonumber(ARGV[i + 3]), ARGV[i + 4]}
  i = i + 5
end
local out = {NOW}
local o = 1
local groups = tonumber(ARGV[i])
i = i + 1
for g = 1, groups do
  bind(g, ARGV[i])
  local n = tonumber(ARGV[i + 1])
  i = i + 2
  for _ = 1, n do
    local q = P[ARGV[i + 2]]
    out[o + 1], out[o + 2] = vote_one(ARGV[i], q[1], ARGV[i + 1], q[2], q[3], q[4], q[5])
    o = o + 2
    i = i + 3
  end
  meta_flush()
end
return out
