-- The hold table of simba's database/sql backend for MySQL and MariaDB: semaphores and
-- read-write locks, beside the simba_mutex table (JVM Simba never reads it). One row per
-- name and kind (holder empty) counts the places and tokens handed out and keeps a
-- semaphore's permit count; one row per holder or waiter. Times are epoch milliseconds of
-- the database's clock (UTC).
CREATE TABLE IF NOT EXISTS `simba_mutex_hold` (
    `kind`        tinyint unsigned NOT NULL COMMENT '1: semaphore, 2: read-write lock',
    `name`        varchar(66)      NOT NULL COMMENT 'semaphore or read-write lock name',
    `holder`      varchar(128)     NOT NULL COMMENT 'contender ID; empty: the name''s row',
    `shared`      tinyint(1)       NOT NULL COMMENT 'a read hold (or waiting for one)',
    `permits`     int unsigned     NOT NULL COMMENT 'the name''s row: a semaphore''s permit count',
    `place`       bigint unsigned  NOT NULL COMMENT 'the name''s row: the last place or token handed out; else the place in the queue',
    `token`       bigint unsigned  NOT NULL COMMENT 'the hold''s fencing token; 0: waiting',
    `acquired_at` bigint unsigned  NOT NULL COMMENT 'admission, epoch ms',
    `ttl_at`      bigint unsigned  NOT NULL COMMENT 'end of the holder''s TTL, epoch ms',
    `expires_at`  bigint unsigned  NOT NULL COMMENT 'a holder''s end of the transition window, a waiter''s end of patience, epoch ms',
    PRIMARY KEY (`kind`, `name`, `holder`)
) ENGINE = InnoDB DEFAULT CHARACTER SET = utf8mb4 COLLATE = utf8mb4_bin
