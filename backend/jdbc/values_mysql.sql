-- The value table of simba's database/sql backend for MySQL and MariaDB: the owner value
-- (simba.WithOwnerValue) of a mutex's tenure, beside the simba_mutex table (JVM Simba
-- never reads it). One row per mutex, written when a contender with a value begins a
-- tenure; it belongs to the tenure of owner_id whose fencing token is token.
CREATE TABLE IF NOT EXISTS `simba_mutex_value` (
    `mutex`    varchar(66)     NOT NULL COMMENT 'mutex name',
    `owner_id` varchar(128)    NOT NULL COMMENT 'the tenure''s owner',
    `token`    bigint unsigned NOT NULL COMMENT 'the tenure''s fencing token (the version of its first write)',
    `value`    varchar(1024)   NOT NULL COMMENT 'the owner value; empty: none',
    PRIMARY KEY (`mutex`)
) ENGINE = InnoDB DEFAULT CHARACTER SET = utf8mb4 COLLATE = utf8mb4_bin
