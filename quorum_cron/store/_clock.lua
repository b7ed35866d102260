-- _clock.lua: prepended to every quorum-cron script (see scripts.py).
--
-- ARGV[1]  now: epoch ms chosen by the caller (contract suite, simulator
--          parity), or "" to read the server clock with TIME (production).
--
-- Defines: now (number), NOW (its decimal text), fmt(n).
--
-- Effects replication: Redis 6.2 refuses writes after TIME unless the script
-- switched to effects replication first; 7.x always replicates effects and
-- keeps redis.replicate_commands as a no-op. pcall keeps a future server that
-- drops the function from failing every script.
pcall(redis.replicate_commands)

-- Integers as decimal text. Lua numbers are doubles: exact for epoch ms and
-- tokens (< 2^53), but tostring() would print 1.7e+12 style text.
local function fmt(n)
  return string.format('%d', n)
end

local now
if ARGV[1] == '' then
  local t = redis.call('TIME')
  now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
else
  now = tonumber(ARGV[1])
end
local NOW = fmt(now)
