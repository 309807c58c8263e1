-- Reports whether a waiter other than the caller is alive (see holds_prelude.lua).
-- ARGV: id. Answer: 1 or 0.
for _, w in ipairs(redis.call('zrangebyscore', aliveKey, '(' .. nowMs, '+inf', 'limit', 0, 2)) do
  if w ~= ARGV[1] then
    return 1
  end
end
return 0
