-- acquire: takes a free mutex, renews it for a caller that already owns it, or records
-- the caller as waiting (and registered for a grant) and answers the owner.
--
-- KEYS     see prelude.lua
-- ARGV[1]  id      the contender ID
-- ARGV[2]  lease   ttl + transition in ms: the owner key's PX
-- ARGV[3]  listed  '1' if the caller may be in the waiting set (and registered): an
--                  owner takes itself off; '0' if it is known not to be
-- ARGV[4]  nonce   names this call in the caller's registration; '' for a caller that
--                  takes no grants (a Quorum's)
-- ARGV[5]  ttl     the caller's ttl in ms
-- ARGV[6]  heard   '1' if the caller's own channel was subscribed when it sent the call
-- ARGV[7]  fresh   '1' for the first call of a contention: finding its own ID owning, it
--                  begins a new tenure; finding the mutex owned, it goes to the back of
--                  the queue (an entry an earlier lifecycle of the ID left keeps no place)
-- ARGV[8]  value   optional, '' for none: the owner value of the caller's tenures
-- Returns {'<owner>@@<remaining ms>' or '@@', '<token>', '<value>'} (see prelude.lua).
--
-- Beyond JVM Simba's acquire (SET NX PX, else ZADD NX): a caller that finds itself the
-- owner renews (a lost answer, or a grant it has not heard of), a new owner leaves the
-- waiting set, a tenure gets a token, scores carry microseconds, and a waiter registers.
-- See the package doc, "Hand-over, end to end".
local id = ARGV[1]
local lease = ARGV[2]
local listed = ARGV[3] == '1'
local nonce = ARGV[4]
local ttl = ARGV[5]
local heard = ARGV[6]
local fresh = ARGV[7] == '1'
local value = ARGV[8] or ''

-- The owner is read first, with the token and the stopped contentions: under contention
-- most attempts find the mutex owned, and they return before the declarations only
-- taking it needs.
local owner, fence, stopped = readOwner(stoppedKey)
if hasStopped(stopped, nonce) then
  -- A call of a contention that has stopped, which reached the server after its stop
  -- (its caller gave it up, unanswered): it takes nothing and queues nobody.
  return { '@@', '0', '' }
end
if owner and owner ~= id then
  local now = redis.call('time')
  local nowMs = millis(now)
  enqueue(id, now, nowMs, fresh)
  local token, expires, ownerValue = tokenOf(owner, fence)
  local left = remaining(expires, nowMs)
  register(id, nowMs, nonce, lease, ttl, left, heard, value)
  return { owner .. '@@' .. decimal(left), token, ownerValue }
end
-- (here the prelude's declarations that only the code below uses)
if not owner then
  -- JVM Simba's SET NX PX. MGET reads a key of another type as nothing: then it fails,
  -- and GET fails with WRONGTYPE, so that another program's data is not overwritten.
  if not redis.call('set', ownerKey, id, 'nx', 'px', lease) then
    redis.call('get', ownerKey)
  end
  local now = redis.call('time')
  local token = newToken(fence, now)
  writeToken(id, lease, token, millis(now), value)
  redis.call('publish', ownerKey, 'acquired@@' .. id)
  if listed then
    leave(id)
  end
  return { id .. '@@' .. lease, token, value }
end
if fresh then
  -- A new contention that finds its own ID owning: a key an earlier lifecycle left, or
  -- one a failover brought back after later tenures were lost. A new tenure begins, with
  -- a new token: the old tenure's may be smaller than a lost successor's, who may still
  -- believe.
  local now = redis.call('time')
  local token = newToken(fence, now)
  beginTenure(id, lease, token, millis(now), value)
  if listed then
    leave(id)
  end
  return { id .. '@@' .. lease, token, value }
end
local token, kept = renew(id, lease, fence)
if listed then
  leave(id)
end
return { id .. '@@' .. lease, token, kept }
