-- raise (Quorum only): raises the fence of the caller's tenure to a token if that is
-- greater, so that every instance of a quorum carries the tenure's token and the next
-- tenure, whose quorum shares an instance with this one, gets a greater token whatever
-- the instances' clocks say.
--
-- KEYS     see prelude.lua
-- ARGV[1]  id     the contender ID
-- ARGV[2]  token  the tenure's quorum-wide fencing token
-- Returns 1 if the fence is the caller's, 0 otherwise.
local id = ARGV[1]
local token = ARGV[2]

if redis.call('hget', fenceKey, 'owner') ~= id then
  return 0
end
local current = redis.call('hget', fenceKey, 'token')
if not current or isGreater(token, current) then
  redis.call('hset', fenceKey, 'token', token)
end
return 1
