-- Gives the caller's hold up and takes it off the queue, waking the waiters that now fit
-- (see holds_prelude.lua). ARGV: id, mode. Answer: 1 if it held, else 0.
local id, mode = ARGV[1], ARGV[2]
local freed = prune()
local held = dropHolder(id)
local waited = dropWaiter(id)
if freed or held or waited then
  wake(id, mode)
end
keep()
return held and 1 or 0
