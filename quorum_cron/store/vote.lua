-- vote.lua: record votes for slots of one or more jobs, committing each slot
-- that reaches quorum (Store.vote; MemoryStore._vote_one is the model).
--
-- KEYS: one key prefix per job group, ARGV[1..5]: see _job.lua.
-- ARGV[6]   g, the number of job groups that follow; per group, in order:
--             job name, n (its number of votes), then n votes of 7 fields:
--             fire_ms, node, spec_hash, quorum, max_skew_ms, deadline_ms,
--             overlap ("a" allow | "f" forbid | "r" replace)
--           Votes of one job are handled in order; groups are independent.
--
-- Reply: {now, slot_1, ..., slot_N} over all votes in argument order,
--   slot_i = emit(code, record) with code
--   R recorded | C committed (or skipped by overlap forbid) | D decided
--   E early (not stored) | M missed | S skipped because the job is paused

local function vote_one(fire, node, spec, quorum, skew, deadline, overlap)
  local firen = tonumber(fire)
  local raw, st = peek(fire)
  if st and DECIDED[st] then
    return {'D', raw}
  end
  local r = load(fire, true, raw)
  if now < firen - skew then
    return emit('E', r)
  end
  if not r then
    r = new_slot(fire)
    set(r, 'st', 'proposed')
    trim()
    redis.call('ZADD', K_SLOTS, fire, fire)
    redis.call('ZADD', K_OPEN, fire, fire)
  end
  local m = meta()
  if m.p then
    set_vote(r, node, spec)
    end_slot(r, 'skipped', 'paused by ' .. m.pb .. ': ' .. m.pr)
    return emit('S', r)
  end
  if now > firen + deadline then
    end_slot(r, 'missed', 'deadline passed before quorum')
    return emit('M', r)
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
    save(r)
    return emit('R', r)
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
      return emit('C', r)
    end
    if #active > 0 and overlap == 'r' then
      for _, o in ipairs(active) do
        end_slot(o, o.f.st == 'running' and 'failed' or 'skipped', 'replaced by slot ' .. fire)
      end
    end
  end
  assign(r)
  return emit('C', r)
end

local out = {NOW}
local i = 7
for g = 1, tonumber(ARGV[6]) do
  bind(g, ARGV[i])
  local n = tonumber(ARGV[i + 1])
  i = i + 2
  for _ = 1, n do
    out[#out + 1] = vote_one(ARGV[i], ARGV[i + 1], ARGV[i + 2], tonumber(ARGV[i + 3]),
      tonumber(ARGV[i + 4]), tonumber(ARGV[i + 5]), ARGV[i + 6])
    i = i + 7
  end
  meta_flush()
end
return out
