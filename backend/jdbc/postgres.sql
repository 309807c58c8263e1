-- The simba_mutex table of simba's database/sql backend for PostgreSQL: JVM Simba's columns
-- in PostgreSQL's types (it has no unsigned integers: CHECK constraints keep the ranges),
-- with the "C" collation, under which different names never compare equal. Times are
-- epoch milliseconds of the database's clock.
CREATE TABLE IF NOT EXISTS "simba_mutex" (
    "mutex"         varchar(66)  COLLATE "C" NOT NULL PRIMARY KEY,
    "acquired_at"   bigint       NOT NULL CHECK ("acquired_at" >= 0),
    "ttl_at"        bigint       NOT NULL CHECK ("ttl_at" >= 0),
    "transition_at" bigint       NOT NULL CHECK ("transition_at" >= 0),
    "owner_id"      varchar(128) COLLATE "C" NOT NULL,
    "version"       bigint       NOT NULL CHECK ("version" BETWEEN 0 AND 4294967295)
)
