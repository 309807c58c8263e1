-- The wait table of simba's database/sql backend for MySQL and MariaDB: the contenders of
-- services (simba.Service) waiting for a mutex, for a hand-off (backend.HandOffer), beside
-- the simba_mutex table (JVM Simba never reads it). One row per mutex and waiting
-- contender; ttl and lease are what the contender asks an acquisition for, in ms. Times
-- are epoch milliseconds of the database's clock.
CREATE TABLE IF NOT EXISTS `simba_mutex_wait` (
    `mutex`      varchar(66)     NOT NULL COMMENT 'mutex name',
    `contender`  varchar(128)    NOT NULL COMMENT 'the waiting contender''s ID',
    `value`      varchar(1024)   NOT NULL COMMENT 'the owner value it would keep; empty: none',
    `place`      bigint unsigned NOT NULL COMMENT 'its place in the queue: first come, first listed',
    `ttl`        bigint unsigned NOT NULL COMMENT 'its TTL, ms',
    `lease`      bigint unsigned NOT NULL COMMENT 'its TTL and transition, ms',
    `expires_at` bigint unsigned NOT NULL COMMENT 'the end of its patience, epoch ms: a waiter silent longer is gone',
    PRIMARY KEY (`mutex`, `contender`)
) ENGINE = InnoDB DEFAULT CHARACTER SET = utf8mb4 COLLATE = utf8mb4_bin
