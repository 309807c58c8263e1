-- claim_slot (ClaimSlot): records a Scheduler's slot in simba:{mutex}:slot,
-- '<at>@@<token>', if it is later than the recorded one and its token is not less.
--
-- KEYS     '{mutex}', simba:{mutex}:slot (see prelude.lua)
-- ARGV[1]  at     the slot's instant in Unix nanoseconds, a signed decimal
-- ARGV[2]  token  the fencing token of the tenure that starts the slot
-- Returns 1 if it recorded the slot, 0 if not; the key's value when it holds no slot.
local at, token = ARGV[1], ARGV[2]

local last = redis.call('get', slotKey)
if last then
  local lastAt, lastToken = string.match(last, '^(%-?%d+)@@(%d+)$')
  if not isSlotNumber(lastAt) or not isSlotNumber(lastToken) then
    return last
  end
  if not isLater(at, lastAt) or isGreater(lastToken, token) then
    return 0
  end
end
redis.call('set', slotKey, at .. '@@' .. token) -- no expiry: see the package doc
return 1
