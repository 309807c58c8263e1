-- The hold table of simba's database/sql backend for PostgreSQL: semaphores and
-- read-write locks, beside the simba_mutex table, with the columns of the MySQL one in
-- PostgreSQL's types and the "C" collation. Times are epoch milliseconds of the
-- database's clock.
CREATE TABLE IF NOT EXISTS "simba_mutex_hold" (
    "kind"        smallint     NOT NULL CHECK ("kind" IN (1, 2)),
    "name"        varchar(66)  COLLATE "C" NOT NULL,
    "holder"      varchar(128) COLLATE "C" NOT NULL,
    "shared"      boolean      NOT NULL,
    "permits"     integer      NOT NULL CHECK ("permits" >= 0),
    "place"       bigint       NOT NULL CHECK ("place" >= 0),
    "token"       bigint       NOT NULL CHECK ("token" >= 0),
    "acquired_at" bigint       NOT NULL CHECK ("acquired_at" >= 0),
    "ttl_at"      bigint       NOT NULL CHECK ("ttl_at" >= 0),
    "expires_at"  bigint       NOT NULL CHECK ("expires_at" >= 0),
    PRIMARY KEY ("kind", "name", "holder")
)
