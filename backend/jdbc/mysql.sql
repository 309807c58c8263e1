-- The simba_mutex table of simba's database/sql backend for MySQL and MariaDB: the format
-- JVM Simba uses, with a binary collation so that names differing in case or accents
-- never share a row. Times are epoch milliseconds of the database's clock.
CREATE TABLE IF NOT EXISTS `simba_mutex` (
    `mutex`         varchar(66)     NOT NULL COMMENT 'mutex name',
    `acquired_at`   bigint unsigned NOT NULL COMMENT 'last acquisition or renewal (simba: also release, creation), epoch ms',
    `ttl_at`        bigint unsigned NOT NULL COMMENT 'end of the owner''s TTL, epoch ms',
    `transition_at` bigint unsigned NOT NULL COMMENT 'end of the transition window, epoch ms',
    `owner_id`      varchar(128)    NOT NULL COMMENT 'owner''s contender ID; empty: no owner',
    `version`       int unsigned    NOT NULL COMMENT 'bumped by every change; fencing tokens come from it',
    PRIMARY KEY (`mutex`)
) ENGINE = InnoDB DEFAULT CHARACTER SET = utf8mb4 COLLATE = utf8mb4_bin
