-- Admits or renews the caller's hold, or queues it (see holds_prelude.lua).
-- ARGV: id, mode, permits (a semaphore's, else ''), ttl (ms), lease (ttl + transition,
-- ms), fresh ('1' for the first call of a contention: a hold its ID still has is an
-- earlier one's, so a new hold begins with a new token, and a waiter goes to the back),
-- beside (a downgrade's write holder, or ''), nonce (names the attempt in the waiter's
-- registration for a grant, see grant; '' for none).
-- Answer: the hold record (see answer), or {'permits', '<count kept>'} for another count.
local id, mode, permits, ttl, lease, fresh, beside, nonce =
  ARGV[1], ARGV[2], ARGV[3], tonumber(ARGV[4]), tonumber(ARGV[5]), ARGV[6] == '1', ARGV[7], ARGV[8]

if nonce ~= '' and hasStopped(redis.call('get', holdStoppedKey), nonce) then
  -- A call of a contention that has stopped, which reached the server after its stop
  -- (its caller gave it up, unanswered): it admits, renews and queues nobody.
  return noHolder
end

local freed = prune()

if mode == 'p' then
  local kept = redis.call('get', permitsKey)
  if kept ~= permits then
    if kept and redis.call('zcard', holdersKey) + redis.call('zcard', queueKey) > 0 then
      if freed then
        wake(id, mode)
      end
      keep()
      return { 'permits', kept }
    end
    redis.call('set', permitsKey, permits)
  end
end

-- hold writes id's hold, renewed now, with its token and admission time.
local function hold(token, since)
  writeHold(id, token, since, nowMs + ttl, nowMs + lease)
end

local token, since = string.match(redis.call('hget', holdsKey, id) or '', '^(%d+)@@%d+@@(%d+)$')
local reply -- a waiter's: soonest()
local held = token ~= nil and redis.call('zscore', holdersKey, id) ~= false
if held then
  if fresh then
    token, since = newHoldToken(), decimal(nowMs)
  end
  hold(token, since)
  freed = dropWaiter(id) or freed
else
  local arrival = nowTime[1] .. string.format('%06d', tonumber(nowTime[2]))
  if fresh then
    freed = dropWaiter(id) or freed -- the waiters behind an earlier entry move up
  end
  redis.call('zadd', queueKey, 'nx', arrival, id)
  if mode == 'x' then
    redis.call('zadd', writersKey, 'nx', redis.call('zscore', queueKey, id), id)
  end
  local downgrade = beside ~= '' and mode == 's' and redis.call('zcard', holdersKey) == 1
    and redis.call('hget', holdsKey, writerField) == beside
  if downgrade or fits(redis.call('zrank', queueKey, id), mode) then
    dropWaiter(id)
    hold(newHoldToken(), decimal(nowMs))
    if mode == 'x' then
      redis.call('hset', holdsKey, writerField, id)
    end
    held = true
  else
    -- A live waiter asks again by the end of the soonest hold's transition (the answer),
    -- plus its jitter of at most a second: silent for a lease longer still, it is gone.
    reply = soonest()
    local left = tonumber(string.match(reply[1], '@@(-?%d*)$')) or 0
    redis.call('zadd', aliveKey, decimal(nowMs + math.max(left, 0) + lease + 1000), id)
    if nonce ~= '' then
      redis.call('hset', holdsKey, id .. grantSuffix, table.concat({ nonce, decimal(nowMs), decimal(lease), decimal(ttl) }, '@@'))
    end
  end
end

if freed then
  wake(id, mode)
end
keep()
return reply or answer(id)
