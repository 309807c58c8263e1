-- renew many: renews many mutexes in one call, each exactly as a guard call (guard.lua)
-- of its own would. renewals.go puts guard.lua and the part of the prelude it uses in a function
-- guard(KEYS, ARGV), which this file calls once per mutex with that mutex's KEYS and ARGV.
--
-- ARGV[1]  per      the keys of one mutex: its guard call's KEYS (see prelude.lua)
-- KEYS     per keys for each mutex, in order
-- ARGV[2..] two for each mutex, in order: its guard call's id and lease
-- Returns one reply per mutex, in order: its guard call's, or {'<error>'} when that call
-- failed (another program's data under the mutex's keys): one mutex fails no other.
local per = tonumber(ARGV[1])
local replies = {}
for i = 1, (#ARGV - 1) / 2 do
  local ok, reply = pcall(guard, { unpack(KEYS, (i - 1) * per + 1, i * per) }, { ARGV[2 * i], ARGV[2 * i + 1] })
  if not ok then
    if type(reply) == 'table' then
      reply = reply.err -- Redis 7 raises a call's error reply as a table
    end
    reply = { tostring(reply) }
  end
  replies[i] = reply
end
return replies
