-- waiters (Waiters): lists the waiters a hand-off can serve, first come first, each with
-- its owner value: those in the waiting set whose registration this version reads and
-- has not lapsed. It changes nothing.
--
-- KEYS  see prelude.lua
-- ARGV  none
-- Returns {'<waiter>', '<value>', '<waiter>', '<value>', ...}.
local nowMs = millis(redis.call('time'))
local list = {}
for _, waiter in ipairs(redis.call('zrange', waitKey, 0, -1)) do
  local reg = registration(waiter)
  if reg and reg.untilMs >= nowMs then
    list[#list + 1] = waiter
    list[#list + 1] = reg.value
  end
end
return list
