-- The slot table of simba's database/sql backend for PostgreSQL: per mutex, the last slot
-- a Scheduler started (backend.SlotRecorder), beside the simba_mutex table. Nothing
-- deletes its rows (a few bytes per mutex).
CREATE TABLE IF NOT EXISTS "simba_mutex_slot" (
    "mutex" varchar(66) COLLATE "C" NOT NULL PRIMARY KEY,
    "at"    bigint      NOT NULL,
    "token" bigint      NOT NULL CHECK ("token" >= 0)
)
