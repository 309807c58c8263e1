-- lookup: no arguments. Answers the owner without contending (for retrievers).
local owner = redis.call('get', ownerKey)
if not owner then
  return { '@@', '0' }
end
return { owner .. '@@' .. redis.call('pttl', ownerKey), tokenOf(owner) }
