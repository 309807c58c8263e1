-- guard (renew): ARGV[1] the contender ID, ARGV[2] the lease in ms (ttl + transition).
-- Extends the lease only while the contender owns the mutex (SET XX PX); otherwise answers
-- the owner, or '@@' when there is none. It never acquires: an owner whose key has lapsed
-- learns that its tenure ended.
local id, lease = ARGV[1], ARGV[2]

local owner = redis.call('get', ownerKey)
if not owner then
  return { '@@', '0' }
end
if owner == id then
  redis.call('set', ownerKey, id, 'xx', 'px', lease)
  keepFence(id, lease)
  return { id .. '@@' .. lease, tokenOf(id) }
end
return { owner .. '@@' .. redis.call('pttl', ownerKey), tokenOf(owner) }
