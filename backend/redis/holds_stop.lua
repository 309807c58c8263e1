-- stop.lua for a semaphore's or read-write lock's contention, whose calls
-- holds_acquire.lua then refuses. ARGV: the nonce prefix, the mode, how long to keep the
-- record (ms), the contender ID. Returns the token of the ID's hold, or '' when it holds
-- nothing.
recordStop(holdStoppedKey, ARGV[1], ARGV[3])
if not redis.call('zscore', holdersKey, ARGV[4]) then
  return ''
end
return string.match(redis.call('hget', holdsKey, ARGV[4]) or '', '^(%d+)@@') or ''
