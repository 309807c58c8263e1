-- fenced: a write fenced by a tenure's token (FencedSet). It is made only while the token
-- is at least the greatest one a write through the fence key carried, and raises the fence
-- to it. The fence key never expires: it must outlive every tenure that writes through it.
--
-- KEYS[1]  the fence key
-- KEYS[2]  the key written
-- ARGV[1]  the token, decimal without leading zeros
-- ARGV[2]  the value
-- ARGV[3]  the key's expiry in ms, '0' for none
-- Returns 1 if the write was made, 0 if it was fenced out.
local token = ARGV[1]
local seen = redis.call('get', KEYS[1])
-- Decimal strings without leading zeros compare as numbers by length, then digits: Lua
-- numbers are doubles, so tokens are never handled as numbers.
if seen and (#seen > #token or (#seen == #token and seen > token)) then
  return 0
end
redis.call('set', KEYS[1], token)
if ARGV[3] == '0' then
  redis.call('set', KEYS[2], ARGV[2])
else
  redis.call('set', KEYS[2], ARGV[2], 'px', ARGV[3])
end
return 1
