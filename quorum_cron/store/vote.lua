-- vote.lua: record votes for slots of ONE job, committing each slot that
-- reaches quorum (Store.vote; MemoryStore._vote_one is the model).
--
-- KEYS[1..5], ARGV[1..5]: see _job.lua.
-- ARGV[6]        n, the number of votes that follow, handled in order
-- ARGV[7 + 7i..] vote i: fire_ms, node, spec_hash, quorum, max_skew_ms,
--                deadline_ms, overlap ("a" allow | "f" forbid | "r" replace)
--
-- Reply: {now, slot_1, ..., slot_n}, slot_i = emit(code, record) with code
--   R recorded | C committed (or skipped by overlap forbid) | D decided
--   E early (not stored) | M missed

local function vote_one(fire, node, spec, quorum, skew, deadline, overlap)
  local firen = tonumber(fire)
  local r = load(fire, true)
  if r and DECIDED[r.f.st] then
    return emit('D', r)
  end
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
  if now > firen + deadline then
    end_slot(r, 'missed', 'deadline passed before quorum')
    return emit('M', r)
  end
  set_vote(r, node, spec)
  local m = meta()
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
local n = tonumber(ARGV[6])
for i = 0, n - 1 do
  local b = 7 + 7 * i
  out[#out + 1] = vote_one(ARGV[b], ARGV[b + 1], ARGV[b + 2], tonumber(ARGV[b + 3]),
    tonumber(ARGV[b + 4]), tonumber(ARGV[b + 5]), ARGV[b + 6])
end
meta_flush()
return out
