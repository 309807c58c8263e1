-- stop: records that the contention whose nonces begin with ARGV[1] has stopped while one
-- of its acquire calls went unanswered: that call may still reach the server (it waited
-- in a socket buffer, or on a slow path, after its caller gave it up), and acquire.lua
-- then takes nothing for it. The stopped key keeps the latest 8 such prefixes, for ARGV[2]
-- ms after the latest.
--
-- KEYS     see prelude.lua
-- ARGV[1]  prefix  the contention's nonce prefix, "<8 characters>-"
-- ARGV[2]  px      how long to keep the record, ms
-- Returns 1.
local prefix, px = ARGV[1], ARGV[2]
local kept = { prefix }
-- GET, not MGET: another program's data under that name is refused (WRONGTYPE).
local list = redis.call('get', stoppedKey)
if list then
  for p in string.gmatch(list, '%S+') do
    if #kept < 8 and p ~= prefix then
      kept[#kept + 1] = p
    end
  end
end
redis.call('set', stoppedKey, table.concat(kept, ' '), 'px', px)
return 1
