-- lookup: answers the owner without contending, writing nothing (for a one-off read on a
-- server that refuses writes: see watch.lua).
--
-- KEYS  see prelude.lua
-- ARGV  none
-- Returns {'<owner>@@<remaining ms>' or '@@', '<token>', '<value>'} (see prelude.lua).
return (lookup())
