-- The prelude of every script of simba's Redis backend: scripts.go prepends it to each
-- of the other .lua files. The keys, channels and formats, what each script writes and
-- which message wakes whom: the package doc, "Hand-over, end to end".
--
-- KEYS[1]     '{mutex}': every name below is made from it. Its braces are the cluster
--             hash tag, so all of them hash to one slot.
-- KEYS[2..5]  simba:{mutex}, simba:{mutex}:contender, simba:{mutex}:fence and
--             simba:{mutex}:grant: never read, named so that Redis Cluster sees every
--             key a call touches (see scriptKeys).

-- Redis 3.2 to 4.x replicate scripts verbatim unless told otherwise, and then refuse
-- writes after TIME; later versions always replicate effects.
if redis.replicate_commands then
  redis.replicate_commands()
end

local ownerKey = 'simba:' .. KEYS[1]
local waitKey = ownerKey .. ':contender'
local fenceKey = ownerKey .. ':fence'
local grantKey = ownerKey .. ':grant'
local releaseChannel = ownerKey .. ':@@released'

-- millis turns a TIME reply into milliseconds since the Unix epoch (exact in a double).
local function millis(t)
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end

-- isGreater compares two decimal strings without leading zeros as numbers. Lua numbers
-- are doubles, so tokens are never handled as numbers here.
local function isGreater(a, b)
  if #a ~= #b then
    return #a > #b
  end
  return a > b
end

-- tokenOf returns the fencing token of owner's tenure, or '0' when the fence does not
-- name owner (a JVM contender, which keeps no fence, or a fence that has expired).
local function tokenOf(owner)
  local fence = redis.call('hmget', fenceKey, 'owner', 'token')
  if fence[1] == owner and fence[2] then
    return fence[2]
  end
  return '0'
end

-- newToken records a new tenure of id in the fence and returns its token: the server
-- clock in microseconds since the Unix epoch (now, a TIME reply, or read here when nil),
-- or the previous token + 1 if that is not smaller. The clock keeps tokens increasing
-- when the fence is gone (expired, or lost in a restart without persistence); the
-- previous token keeps them increasing within one microsecond and across small backward
-- steps of the clock.
local function newToken(id, lease, now)
  now = now or redis.call('time')
  local token = now[1] .. string.format('%06d', tonumber(now[2]))
  local last = redis.call('hget', fenceKey, 'token')
  if last and string.match(last, '^[1-9]%d*$') and not isGreater(token, last) then
    redis.call('hincrby', fenceKey, 'token', 1)
    token = redis.call('hget', fenceKey, 'token')
  end
  redis.call('hmset', fenceKey, 'token', token, 'owner', id)
  redis.call('pexpire', fenceKey, lease)
  return token
end

-- keepFence makes the fence of id's tenure live as long as its renewed owner key.
local function keepFence(id, lease)
  if redis.call('hget', fenceKey, 'owner') == id then
    redis.call('pexpire', fenceKey, lease)
  end
end

-- register records id's registration in the grant hash at server time now (ms) for an owner
-- whose key has left ms to live: the waiter tries again at the latest about then, plus
-- its jitter of at most a second, so it is taken for gone a lease later still. The
-- registrations and the waiting set expire together, twice that far ahead, whenever
-- they would expire sooner: keys of waiters that are all gone do not stay.
local function register(id, now, nonce, lease, ttl, left, heard)
  local live = math.max(left, 0) + lease + 1000
  redis.call('hset', grantKey, id, table.concat({ nonce, string.format('%.0f', now), lease, ttl,
    string.format('%.0f', now + live), heard }, '@@'))
  if redis.call('pttl', grantKey) < live then
    redis.call('pexpire', grantKey, 2 * live)
    redis.call('pexpire', waitKey, 2 * live)
  end
end

-- registration returns waiter's registration as a table, or nil; known is true when the
-- waiter has one, even one this backend cannot read (an older version's).
local function registration(waiter)
  local reg = redis.call('hget', grantKey, waiter)
  if not reg then
    return nil, false
  end
  local nonce, at, lease, ttl, untilMs, heard =
    string.match(reg, '^([^@]*)@@(%d+)@@(%d+)@@(%d+)@@(%d+)@@([01])$')
  if not at then
    return nil, true
  end
  return { nonce = nonce, at = tonumber(at), lease = tonumber(lease), ttl = tonumber(ttl),
    untilMs = tonumber(untilMs), heard = heard == '1' }, true
end

-- silenceMeansGone reports whether nobody hearing on waiter's channel at server time nowMs
-- means that the waiter is gone: subscriber counts must be exact (exact: not a Redis
-- Cluster, where PUBLISH and PUBSUB NUMSUB count the subscribers of one node only), and
-- the waiter must have been listening when it registered (a JVM waiter, which has no
-- registration, subscribes before its first attempt), or have registered more than
-- confirmWindow ago. A Go waiter's first attempt registers before its subscription is
-- confirmed, and it registers again, listening, as soon as the server confirms it: a round
-- trip or two. A registration that says it did not listen and is older than that is a
-- waiter that ended meanwhile (or whose subscription connection is down, which only
-- polls): passed by rather than granted the mutex for a lease, or woken for nobody.
local confirmWindow = 1000

local function silenceMeansGone(exact, reg, known, nowMs)
  return exact and (not known or (reg ~= nil and (reg.heard or nowMs - reg.at > confirmWindow)))
end

-- The scripts return {'<owner id>@@<remaining ms of the owner key>', '<token>'}, or
-- {'@@', '0'} when there is no owner: JVM Simba's reply and the fencing token.
