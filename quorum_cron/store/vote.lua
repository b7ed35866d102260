-- vote.lua: record votes for slots of one or more jobs, committing each slot
-- that reaches quorum (Store.vote; MemoryStore._vote_one is the model).
--
-- KEYS[i]   vote i's job meta key (see _job.lua; a job's votes are
--             consecutive, consecutive equal keys share the job's meta read)
-- ARGV[1..6] see _job.lua.
-- ARGV[7]   p, the number of parameter sets that follow, each 9 fields:
--             node, quorum, max_skew_ms, deadline_ms, overlap ("a" allow |
--             "f" forbid | "r" replace), epoch, membership record text
--             ("" with epoch 0), start lease ms (0: none), incarnation —
--             the fields a node's votes share, sent once per call (the
--             record too: it is parsed only when a job adopts it)
-- then      segments up to the end of ARGV, each: parameter set (1-based
--             index), fire_ms, n, then the spec_hash of each of its n votes.
--             Votes are handled in order (vote i is the i-th spec hash over
--             all segments); votes of different jobs are independent.
--
-- Reply: {now, codes, value_1, ..., value_N} over all votes in argument
--   order (flat: a table per vote costs more to convert); codes is one
--   string, its i-th character vote i's code:
--   R recorded | C committed (or skipped by overlap forbid; or started, see
--     below) | D decided
--   E early (not stored) | M missed | S skipped because the job is paused
--   X the job's stored state is corrupt (nothing written; value_i the error)
--   F refused by membership (not stored): value_i is the job's record text,
--     a newline, then the slot's value
--   and value_i the slot's value as stored afterwards ("" when absent).
--
-- Membership (undecided slots only: a decided vote reads no meta). A job
-- enforces the record in its meta (mr). A vote with a newer epoch from a
-- member of that record (or any vote with an epoch, on a job without one)
-- makes the job adopt the vote's record (a job only moves forward) and drops
-- the legacy floor q: a node outside the record cannot plant one, so a job
-- holds only records its members relayed from the namespace, one per epoch.
-- Then a vote with an older epoch (0 included, once the job has a record) or
-- from a node in neither current nor old is refused (F).
-- A slot commits when the voters agreeing with this vote hold a quorum of
-- current and, while joint, of old; stored votes of others do not count.
-- An epoch-0 vote on a job without a record keeps the legacy rule: the
-- highest quorum any such vote sent (q) agreeing votes commit.
--
-- A start folded into the commit: when the vote that commits a slot carries a
-- start lease, its own node is the executor chosen, and the store's time is
-- at or past the fire time, the slot starts in the same step (running, one
-- run, lease now + lease ms; fence.lua's start; tagged with the vote's
-- incarnation) and no notice is published: the reply tells the executor. A
-- node votes its slots so that it is mostly the one committing those it
-- executes (agent/burstorder.py, over a burst's parts), and a start of its
-- own was a call, a decode, an encode and a write more per slot.
--
-- A slot's deadline is the largest deadline_ms any of its votes carried
-- (dl, kept on the proposed slot): a vote's missed check uses it, so a node
-- that widened its deadline (catch-up after an outage) keeps the slot open
-- for the others too.

-- The record a vote's parameter set carries (parsed once per call).
local function vote_record(q)
  local rec = RECORDS[q[10]]
  if not rec then
    local problem
    rec, problem = parse_record(q[10])
    if not rec then
      error('vote of epoch ' .. fmt(q[9]) .. ': ' .. problem)
    end
    RECORDS[q[10]] = rec
  end
  if rec.epoch ~= q[9] then
    error('vote of epoch ' .. fmt(q[9]) .. ' carries a record of epoch ' .. fmt(rec.epoch))
  end
  return rec
end

local function vote_one(fire, firen, spec, q)
  local key = P .. 'slot:' .. fire
  local raw = fetch(key)
  if raw and byte(raw, 1) ~= 112 then -- not 'p'roposed: decided
    if not expired(match(raw, '^%a+ (%d+) ')) then
      return 'D', raw
    end
  end
  local r = load(fire, true, raw, key, firen)
  if now < firen - q[3] then
    return 'E', value(r)
  end
  local node = q[1]
  local m = meta()
  local rec = false
  local ep = q[9]
  if ep > 0 or m.mr then
    rec = job_record(m)
    if ep > (rec and rec.epoch or 0) and (not rec or is_member(rec, node)) then
      rec = vote_record(q)
      m.rec, m.mr = rec, rec.text
      meta_set('mr', rec.text, rec.text)
      if m.q > 0 then
        meta_set('q', 0, false)
      end
    end
    if ep < rec.epoch or not is_member(rec, node) then
      return 'F', rec.text .. '\n' .. value(r)
    end
  end
  if not r then
    r = new_slot(key, fire, firen)
  end
  if m.p then
    set_vote(r, node, spec)
    end_slot(r, 'skipped', 'paused by ' .. m.pb .. (m.pr ~= '' and (': ' .. m.pr) or ''))
    return 'S', r.json
  end
  -- The slot's deadline: the largest any vote carried, this one included.
  local deadline = q[4]
  if r.new then
    r.dl, r.ttl = q[6], q[7]
  elseif r.dl ~= q[6] then
    local stored = tonumber(r.dl)
    if deadline > stored then
      r.dl, r.ttl = q[6], q[7]
    else
      deadline = stored
    end
  end
  if now > firen + deadline then
    end_slot(r, 'missed', 'deadline passed before quorum')
    return 'M', r.json
  end
  set_vote(r, node, spec)
  local decided
  if rec then
    -- One pass over the slot's votes counts the agreeing members of each
    -- configuration (current, and old while joint): no table of voters is
    -- built, as this runs on every undecided vote (MembershipRecord.commits).
    local cur, old = rec.cur, rec.old
    local cs, os = cur.set, old and old.set
    local nc, no = 0, 0
    for n, h in pairs(r.votes) do
      if h == spec then
        if cs[n] then
          nc = nc + 1
        end
        if os and os[n] then
          no = no + 1
        end
      end
    end
    decided = nc >= cur.quorum and (old == nil or no >= old.quorum)
  else
    if q[2] > m.q then
      meta_set('q', q[2], q[8])
    end
    local agreeing = 0
    for _, h in pairs(r.votes) do
      if h == spec then
        agreeing = agreeing + 1
      end
    end
    decided = agreeing >= m.q
  end
  if not decided then
    index_open(r)
    write_proposed(r)
    return 'R', r.json
  end
  -- Quorum reached: decide the slot in this same call (a corrupt token
  -- counter refuses it before anything is written).
  check_counter(m.tk)
  set(r, 'sh', spec)
  set(r, 'dl', r.dl)
  if rec then -- the record whose quorum decided it, for the ledger (history's proof of who counted)
    set(r, 'ep', fmt(rec.epoch))
  end
  raise_hw(r)
  local overlap = q[5]
  if overlap ~= 'a' then
    local active = {}
    for _, f in ipairs(redis.call('ZRANGE', P .. 'open', '0', '-1')) do
      if f ~= fire then
        local o = load(f, true)
        if o and (o.f.st == 'committed' or o.f.st == 'running') then
          active[#active + 1] = o
        end
      end
    end
    if #active > 0 and overlap == 'f' then
      -- (Which state: a committed slot not yet started holds the next one too, until its start
      -- timeout or deadline; "active" alone read as a run where none was.)
      -- A failed run waiting for its retry is committed again with runs >= 1: "not started yet"
      -- would deny the run it had.
      local o = active[1]
      local st = 'committed, not started yet'
      if o.f.st == 'running' then
        st = 'running'
      elseif num(o.f.rn) > 0 then
        st = 'committed for a retry, not started yet'
      end
      end_slot(r, 'skipped', 'overlap forbidden: slot ' .. o.fire .. ' ' .. st)
      return 'C', r.json
    end
    if #active > 0 and overlap == 'r' then
      for _, o in ipairs(active) do
        end_slot(o, o.f.st == 'running' and 'failed' or 'skipped', 'replaced by slot ' .. fire)
      end
    end
  end
  index_open(r)
  local chosen = choose(r) -- (a commit always has one: its quorum is of agreeing members)
  local lease = q[11]
  assign_to(r, chosen, (lease > 0 and chosen == node and now >= firen) and lease or nil, q[12])
  return 'C', r.json
end

-- Parameter sets: node, quorum, skew, deadline, overlap, deadline text,
-- physical TTL of a proposed slot this set's vote creates (see _job.lua),
-- quorum text, epoch, record text (parsed on first use: vote_record), start
-- lease ms (0: none), incarnation.
local PS = {}
local i = 8
for k = 1, tonumber(ARGV[7]) do
  local skew, deadline = tonumber(ARGV[i + 2]), tonumber(ARGV[i + 3])
  PS[fmt(k)] = {ARGV[i], tonumber(ARGV[i + 1]), skew, deadline, ARGV[i + 4], ARGV[i + 3],
                fmt(KEY_TTLN + math.max(deadline, 0) + math.max(skew, 0)), ARGV[i + 1],
                tonumber(ARGV[i + 5]) or 0, ARGV[i + 6], tonumber(ARGV[i + 7]) or 0, ARGV[i + 8]}
  i = i + 9
end
local out, codes = {NOW, ''}, {}
local v = 0
local nargs = #ARGV
while i <= nargs do
  local q, fire, n = PS[ARGV[i]], ARGV[i + 1], tonumber(ARGV[i + 2])
  local firen = tonumber(fire)
  i = i + 3
  for _ = 1, n do
    v = v + 1
    if KEYS[v] ~= K then
      meta_flush()
      bind(v)
    end
    -- A corrupt value of one job fails that vote only (code X, the error as
    -- its value), never the batch; what it left in memory is dropped.
    -- An outage (out of memory, a slot in migration, a demoted master: see
    -- ``transient`` in _job.lua) is not corruption: it fails the whole call
    -- and the caller retries.
    local ok, code, val = pcall(vote_one, fire, firen, ARGV[i], q)
    if ok then
      codes[v], out[v + 2] = code, val
    else
      local msg = tostring(type(code) == 'table' and code.err or code)
      local outage = transient(code)
      if outage then
        return redis.error_reply(outage)
      end
      codes[v], out[v + 2] = 'X', string.sub(msg, 1, 300)
      M, M_dirty = nil, nil
    end
    i = i + 1
  end
end
meta_flush()
out[2] = table.concat(codes)
return out
