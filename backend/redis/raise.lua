-- raise (Quorum only): raises the token of the caller's tenure to a token if that is
-- greater, so that every instance of a quorum carries the tenure's token and the next
-- tenure, whose quorum shares an instance with this one, gets a greater token whatever
-- the instances' clocks say.
--
-- KEYS     see prelude.lua
-- ARGV[1]  id     the contender ID
-- ARGV[2]  token  the tenure's quorum-wide fencing token
-- Returns 1 if the token key is the caller's, 0 otherwise.
if not raiseFence(ARGV[1], redis.call('get', tokenKey), ARGV[2]) then
  return 0
end
return 1
