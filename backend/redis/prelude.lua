-- The prelude of every script of simba's Redis backend. In the library of Redis functions
-- (scripts.go) the declarations below come once, before the functions; the names made
-- from KEYS[1] are set by each call. For EVALSHA, scripts.go prepends to each of the other
-- .lua files what comes before the first declaration below and the declarations the file
-- uses, itself or through another (a call creates the closure of every function
-- declared, used or not). The keys, channels and formats, what each script writes and
-- which message wakes whom: the package doc, "Hand-over, end to end".
--
-- KEYS[1]     '{mutex}': every name below is made from it. Its braces are the cluster
--             hash tag, so all of them hash to one slot.
-- KEYS[2..]   on a Redis Cluster, the keys the script touches, never read:
--             simba:{mutex}, simba:{mutex}:contender, simba:{mutex}:token,
--             simba:{mutex}:grant, simba:{mutex}:stopped and simba:{mutex}:retrievers, or
--             simba:{mutex}:slot for the slot scripts; named so that the Cluster sees
--             every key a call touches (see scriptKeys).

-- Redis 3.2 to 4.x replicate scripts verbatim unless told otherwise, and then refuse
-- writes after TIME; later versions always replicate effects.
if redis.replicate_commands then
  redis.replicate_commands()
end

local ownerKey = 'simba:' .. KEYS[1]
local waitKey = ownerKey .. ':contender'
local tokenKey = ownerKey .. ':token'
local grantKey = ownerKey .. ':grant'
local releaseChannel = ownerKey .. ':@@released'
local slotKey = ownerKey .. ':slot'
local stoppedKey = ownerKey .. ':stopped'
local retrieversKey = ownerKey .. ':retrievers'

-- millis turns a TIME reply into milliseconds since the Unix epoch (exact in a double).
-- Arithmetic converts a string of digits (strtod) once; tonumber converts it twice (Lua
-- 5.1 checks it can, then does), which in the contended scripts cost Redis more than some
-- of their commands.
local function millis(t)
  return t[1] * 1000 + math.floor(t[2] / 1000)
end

-- decimal writes n, an integer (a number, or already a string of digits), as a string of
-- digits. Lua writes a number (concatenated, or passed to redis.call) as a double, with
-- glibc's printf, which costs Redis as much as a command; %d writes it as an integer.
local function decimal(n)
  if type(n) == 'string' then
    return n
  end
  return string.format('%d', n)
end

-- isGreater compares two decimal strings without leading zeros as numbers. Lua numbers
-- are doubles, so tokens are never handled as numbers here.
local function isGreater(a, b)
  if #a ~= #b then
    return #a > #b
  end
  return a > b
end

-- isLater compares two signed decimal strings without leading zeros (Unix nanoseconds)
-- as numbers: whether a is greater than b.
local function isLater(a, b)
  local negA, negB = string.sub(a, 1, 1) == '-', string.sub(b, 1, 1) == '-'
  if negA ~= negB then
    return negB
  end
  if negA then
    return isGreater(string.sub(b, 2), string.sub(a, 2))
  end
  return isGreater(a, b)
end

-- isSlotNumber reports whether s is a signed decimal without leading zeros, as Go writes
-- a slot's instant and token.
local function isSlotNumber(s)
  return s ~= nil and (s == '0' or string.match(s, '^%-?[1-9]%d*$') ~= nil)
end

-- isToken reports whether s is a token: a decimal number without leading zeros.
local function isToken(s)
  return s ~= nil and string.match(s, '^[1-9]%d*$') ~= nil
end

-- plusOne adds 1 to a token, digit by digit.
local function plusOne(s)
  local i = #s
  while i > 0 and string.byte(s, i) == 57 do -- '9'
    i = i - 1
  end
  if i == 0 then
    return '1' .. string.rep('0', #s)
  end
  return string.sub(s, 1, i - 1) .. string.char(string.byte(s, i) + 1) .. string.rep('0', #s - i)
end

-- readOwner reads the owner key and the token key in one call: the owner's ID (false
-- when there is none) and the token key's value (false when it is gone),
-- '<token>@@<expires>@@<id>[@@<value>]': the token of the latest tenure a Go contender
-- began, when the owner key expires if that contender owns it (server ms), its ID, and
-- the tenure's owner value, when it has one; with a third key (the stopped key, or the
-- retrievers key), also that key's value, false when it is gone.
local function readOwner(third)
  local v
  if third then
    v = redis.call('mget', ownerKey, tokenKey, third)
  else
    v = redis.call('mget', ownerKey, tokenKey)
  end
  if not v[2] then
    -- MGET reads a key of another type as nothing: GET fails on it with WRONGTYPE, so
    -- that another program's data there is refused, not overwritten. A missing token
    -- key (no Go tenure for a lease) costs this one command more.
    redis.call('get', tokenKey)
  end
  return v[1], v[2], v[3]
end

-- hasStopped reports whether the contention whose call carries nonce is among those the
-- stop script recorded in stopped, the stopped key's value (false: none).
local function hasStopped(stopped, nonce)
  if not stopped then
    return false
  end
  local prefix = string.match(nonce, '^(.*%-)%d+$')
  return prefix ~= nil and string.find(' ' .. stopped .. ' ', ' ' .. prefix .. ' ', 1, true) ~= nil
end

-- recordStop records in key (a stopped key) that the contention whose nonces begin with
-- prefix has stopped, keeping the latest 8 such prefixes for px ms after the latest (see
-- stop.lua).
local function recordStop(key, prefix, px)
  local kept = { prefix }
  -- GET, not MGET: another program's data under that name is refused (WRONGTYPE).
  local list = redis.call('get', key)
  if list then
    for p in string.gmatch(list, '%S+') do
      if #kept < 8 and p ~= prefix then
        kept[#kept + 1] = p
      end
    end
  end
  redis.call('set', key, table.concat(kept, ' '), 'px', px)
end

-- splitFence returns the token, the expiry, the contender ID and the owner value ('' for
-- none) of a token key's value, or nil. The ID ends at the first '@@' after the expiry (a
-- Go contender's ID contains none and does not end with '@'); the value is the rest,
-- whatever it holds.
local function splitFence(fence)
  if not fence then
    return nil
  end
  local token, expires, rest = string.match(fence, '^([^@]*)@@(%d*)@@(.*)$')
  if not token then
    return nil
  end
  local cut = string.find(rest, '@@', 1, true)
  if not cut then
    return token, expires, rest, ''
  end
  return token, expires, string.sub(rest, 1, cut - 1), string.sub(rest, cut + 2)
end

-- joinFence makes a token key's value; a tenure without an owner value keeps the format
-- of versions before values.
local function joinFence(token, expires, id, value)
  if value == '' then
    return token .. '@@' .. expires .. '@@' .. id
  end
  return token .. '@@' .. expires .. '@@' .. id .. '@@' .. value
end

-- tokenOf returns the fencing token of owner's tenure from the token key's value, or '0'
-- when it names someone else (owner is a JVM contender, which keeps no token) or is gone;
-- when the owner key expires if the value is owner's (nil otherwise); and the tenure's
-- owner value ('' unless the value is owner's): a value is only ever read with its token.
local function tokenOf(owner, fence)
  local token, expires, holder, value = splitFence(fence)
  if holder == owner then
    return token, expires ~= '' and expires + 0 or nil, value
  end
  return '0', nil, ''
end

-- remaining returns how long the owner key has left at server time nowMs (ms): until
-- expires, when the token key tells it, and otherwise as the key says (PTTL).
local function remaining(expires, nowMs)
  if expires and expires > nowMs then
    return expires - nowMs
  end
  return redis.call('pttl', ownerKey)
end

-- lookup answers the owner without contending, {'<owner>@@<remaining ms>' or '@@',
-- '<token>', '<value>'}, and returns the remaining ms too (0 with no owner).
local function lookup()
  local owner, fence = readOwner()
  if not owner then
    return { '@@', '0', '' }, 0
  end
  local token, _, value = tokenOf(owner, fence)
  local left = redis.call('pttl', ownerKey)
  return { owner .. '@@' .. decimal(left), token, value }, left
end

-- newToken returns the token of a new tenure, given the token key's value and the server
-- clock (a TIME reply): the clock in microseconds since the Unix epoch, or the previous
-- token + 1 if that is not smaller. The clock keeps tokens increasing when the key is
-- gone (expired, or lost in a restart without persistence); the previous token keeps them
-- increasing within one microsecond and across small backward steps of the clock.
local function newToken(fence, now)
  local token = now[1] .. string.sub('00000' .. now[2], -6) -- microseconds, 6 digits
  -- splitFence's token, when isToken holds for it, in one match.
  local last = fence and string.match(fence, '^([1-9]%d*)@@%d*@@')
  if last and not isGreater(token, last) then
    token = plusOne(last)
  end
  return token
end

-- raiseFence raises the token of id's tenure in the token key (whose value is fence) to
-- token if that is greater, keeping the key's expiry. It returns the key's value
-- afterwards, or nil when the key does not name id.
local function raiseFence(id, fence, token)
  local current, expires, holder, value = splitFence(fence)
  if holder ~= id then
    return nil
  end
  if isToken(current) and not isGreater(token, current) then
    return fence
  end
  local raised = joinFence(token, expires, id, value)
  local px = redis.call('pttl', tokenKey)
  if px > 0 then
    redis.call('set', tokenKey, raised, 'px', decimal(px))
  else
    redis.call('set', tokenKey, raised) -- a key without expiry, set by hand
  end
  return raised
end

-- writeToken records id's tenure, whose owner key the caller has just set to expire px ms
-- from server time nowMs (ms), with token and its owner value in the token key, which
-- expires with it.
local function writeToken(id, px, token, nowMs, value)
  redis.call('set', tokenKey, joinFence(token, decimal(nowMs + px), id, value), 'px', decimal(px))
end

-- beginTenure makes id the owner for px ms from server time nowMs with a new token and
-- owner value, and announces it on simba:{mutex}.
local function beginTenure(id, px, token, nowMs, value)
  redis.call('set', ownerKey, id, 'px', decimal(px))
  writeToken(id, px, token, nowMs, value)
  redis.call('publish', ownerKey, 'acquired@@' .. id)
end

-- renew extends id's tenure, which the owner key names, to px ms (a string) from now, and
-- returns its token and owner value, or '0' and '' when the token key has lapsed (it is not
-- brought back: the contender knows its token).
local function renew(id, px, fence)
  redis.call('set', ownerKey, id, 'xx', 'px', px)
  local token, _, value = tokenOf(id, fence)
  if token ~= '0' then
    writeToken(id, px, token, millis(redis.call('time')), value)
  end
  return token, value
end

-- register records id's registration in the grant hash at server time now (ms) for an owner
-- whose key has left ms to live: the waiter tries again at the latest about then, plus
-- its jitter of at most a second, so it is taken for gone a lease later still. The
-- registrations and the waiting set expire together, twice that far ahead, whenever
-- they would expire sooner: keys of waiters that are all gone do not stay. lease and ttl
-- are the caller's ARGV, decimal strings.
local function register(id, now, nonce, lease, ttl, left, heard, value)
  local live = math.max(left, 0) + lease + 1000
  local reg = nonce .. '@@' .. decimal(now) .. '@@' .. lease .. '@@' .. ttl .. '@@' ..
    decimal(now + live) .. '@@' .. heard
  if value ~= '' then
    reg = reg .. '@@' .. value -- for the release that grants id the mutex to write
  end
  redis.call('hset', grantKey, id, reg)
  if redis.call('pttl', grantKey) < live then
    redis.call('pexpire', grantKey, decimal(2 * live))
    redis.call('pexpire', waitKey, decimal(2 * live))
  end
end

-- leave takes id out of the waiting set and its registration out of the grant hash.
local function leave(id)
  redis.call('zrem', waitKey, id)
  redis.call('hdel', grantKey, id)
end

-- registration returns waiter's registration as a table, or nil; known is true when the
-- waiter has one, even one this backend cannot read (an older version's).
local function registration(waiter)
  local reg = redis.call('hget', grantKey, waiter)
  if not reg then
    return nil, false
  end
  local nonce, at, lease, ttl, untilMs, heard, rest =
    string.match(reg, '^([^@]*)@@(%d+)@@(%d+)@@(%d+)@@(%d+)@@([01])(.*)$')
  if not at or (rest ~= '' and string.sub(rest, 1, 2) ~= '@@') then
    return nil, true
  end
  -- + 0 converts the digits matched above as millis does, once.
  return { nonce = nonce, at = at + 0, lease = lease + 0, ttl = ttl + 0, untilMs = untilMs + 0,
    heard = heard == '1', value = string.sub(rest, 3) }, true
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

-- grantable reports whether a waiter whose registration is reg (nil: none readable) can
-- be granted the mutex at server time nowMs (ms). The waiter believes for its ttl from the
-- send time of the attempt that registered, which came before reg.at: it is granted the
-- mutex only while more than a tenth of that ttl is left after reg.at. The key expires a
-- lease after reg.at, after that.
local function grantable(reg, nowMs)
  if not reg or reg.nonce == '' then
    return false
  end
  local age = nowMs - reg.at
  return age >= 0 and age * 10 < reg.ttl * 9
end

-- grant makes waiter, whose registration reg is grantable, the owner with a new token
-- (from the token key's value fence and now, a TIME reply; nowMs in ms) and its owner
-- value, and tells it on its channel that from handed it the mutex. It returns how long
-- the owner key lives (ms, a lease after reg.at), or nil when nobody heard although
-- unheardIsGone (see silenceMeansGone): a grant nobody got is void, and nothing of it is
-- written.
local function grant(from, waiter, reg, fence, now, nowMs, unheardIsGone)
  local token = newToken(fence, now)
  local message = 'granted@@' .. reg.nonce .. '@@' .. token .. '@@' .. from
  if redis.call('publish', ownerKey .. ':' .. waiter, message) == 0 and unheardIsGone then
    return nil
  end
  local px = reg.lease - (nowMs - reg.at)
  beginTenure(waiter, px, token, nowMs, reg.value)
  return px
end

-- wake tells waiter on its channel that from released the mutex (JVM Simba's only
-- message to a waiter), and reports whether it was heard or unheardIsGone is false.
local function wake(from, waiter, unheardIsGone)
  return redis.call('publish', ownerKey .. ':' .. waiter, 'released@@' .. from) > 0 or not unheardIsGone
end

-- enqueue adds id to the waiting set at server time now (a TIME reply; nowMs in ms): at the back, or,
-- unless fresh, at the place it has. First come, first served with JVM Simba, which
-- scores a waiter with the server's time in whole seconds: s for any time within second
-- s. A Go waiter that comes at s + f is scored s - 1 + f, before every JVM waiter that
-- comes later within second s (score s) and after every waiter of earlier seconds; the
-- JVM waiters that came earlier within second s, which are in the set with score s now,
-- are moved to just before it.
local function enqueue(id, now, nowMs, fresh)
  local sec = decimal(math.floor(nowMs / 1000) - 1)
  local score = sec .. '.' .. string.sub('00000' .. now[2], -6)
  local added
  if fresh then
    added = redis.call('zadd', waitKey, 'ch', score, id)
  else
    added = redis.call('zadd', waitKey, 'nx', score, id)
  end
  if added == 1 then
    local earlier = redis.call('zrangebyscore', waitKey, now[1], now[1])
    if #earlier > 0 then
      local before = sec .. '.' .. string.format('%06d', math.max(now[2] - 1, 0))
      for _, waiter in ipairs(earlier) do
        redis.call('zadd', waitKey, 'xx', before, waiter)
      end
    end
  end
end

-- The scripts return {'<owner id>@@<remaining ms of the owner key>', '<token>', '<value>'},
-- or {'@@', '0', ''} when there is no owner: JVM Simba's reply, the fencing token and the
-- owner value of the tenure the token names.
