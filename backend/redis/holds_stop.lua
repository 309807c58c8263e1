-- stop.lua for a semaphore's or read-write lock's contention, whose calls
-- holds_acquire.lua then refuses. ARGV: the nonce prefix, the mode, how long to keep the
-- record (ms). Returns 1.
return recordStop(holdStoppedKey, ARGV[1], ARGV[3])
