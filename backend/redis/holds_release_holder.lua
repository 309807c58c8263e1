-- Gives up holder ARGV[1]'s hold, of mode ARGV[2], in its name, only while its token is
-- ARGV[3]: an administrator's release of one tenure (see holds_prelude.lua), which leaves
-- a later hold of the same ID alone. Answer: 1 if it released, else 0.
local id, mode, token = ARGV[1], ARGV[2], ARGV[3]
local freed = prune()
local held = string.match(redis.call('hget', holdsKey, id) or '', '^(%d+)@@')
local released = held == token and dropHolder(id)
if freed or released then
  wake(id, mode)
end
keep()
return released and 1 or 0
