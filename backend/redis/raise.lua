-- raise: ARGV[1] the contender ID, ARGV[2] a fencing token. Used by Quorum: raises the
-- fence of the contender's tenure to the token if that is greater, so that every instance
-- of a quorum carries the tenure's token and the next tenure, whose quorum shares an
-- instance with this one, gets a greater token whatever the instances' clocks say.
-- Returns 1 if the fence is the contender's, 0 otherwise.
local id, token = ARGV[1], ARGV[2]

if redis.call('hget', fenceKey, 'owner') ~= id then
  return 0
end
local current = redis.call('hget', fenceKey, 'token')
if not current or isGreater(token, current) then
  redis.call('hset', fenceKey, 'token', token)
end
return 1
