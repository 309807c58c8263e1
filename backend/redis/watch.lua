-- watch: a retriever's lookup. It answers the owner as lookup.lua does and marks the
-- mutex watched (the retrievers key) until ARGV[1] ms after the owner key expires, past
-- the retriever's next lookup: a release that finds nobody waiting announces itself only
-- while someone watches.
--
-- KEYS     see prelude.lua
-- ARGV[1]  for  how long the mark outlasts the owner key, ms
-- Returns lookup.lua's answer.
local answer, left = lookup()
redis.call('set', retrieversKey, '1', 'px', decimal(math.max(left, 0) + ARGV[1]))
return answer
