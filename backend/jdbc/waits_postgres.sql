-- The wait table of simba's database/sql backend for PostgreSQL: the contenders of
-- services waiting for a mutex, for a hand-off, beside the simba_mutex table, with the
-- columns of the MySQL one in PostgreSQL's types and the "C" collation.
CREATE TABLE IF NOT EXISTS "simba_mutex_wait" (
    "mutex"      varchar(66)   COLLATE "C" NOT NULL,
    "contender"  varchar(128)  COLLATE "C" NOT NULL,
    "value"      varchar(1024) COLLATE "C" NOT NULL,
    "place"      bigint        NOT NULL CHECK ("place" >= 0),
    "ttl"        bigint        NOT NULL CHECK ("ttl" >= 0),
    "lease"      bigint        NOT NULL CHECK ("lease" >= 0),
    "expires_at" bigint        NOT NULL CHECK ("expires_at" >= 0),
    PRIMARY KEY ("mutex", "contender")
)
