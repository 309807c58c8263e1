-- The value table of simba's database/sql backend for PostgreSQL: the owner value
-- (simba.WithOwnerValue) of a mutex's tenure, beside the simba_mutex table, with the
-- columns of the MySQL one in PostgreSQL's types and the "C" collation.
CREATE TABLE IF NOT EXISTS "simba_mutex_value" (
    "mutex"    varchar(66)   COLLATE "C" NOT NULL PRIMARY KEY,
    "owner_id" varchar(128)  COLLATE "C" NOT NULL,
    "token"    bigint        NOT NULL CHECK ("token" >= 0),
    "value"    varchar(1024) COLLATE "C" NOT NULL
)
