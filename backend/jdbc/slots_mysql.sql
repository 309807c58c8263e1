-- The slot table of simba's database/sql backend for MySQL and MariaDB: per mutex, the
-- last slot a Scheduler started (backend.SlotRecorder), beside the simba_mutex table (JVM
-- Simba never reads it). Nothing deletes its rows (a few bytes per mutex).
CREATE TABLE IF NOT EXISTS `simba_mutex_slot` (
    `mutex` varchar(66)     NOT NULL COMMENT 'mutex name',
    `at`    bigint          NOT NULL COMMENT 'the instant the slot was scheduled for, Unix ns',
    `token` bigint unsigned NOT NULL COMMENT 'the fencing token of the tenure that started it',
    PRIMARY KEY (`mutex`)
) ENGINE = InnoDB DEFAULT CHARACTER SET = utf8mb4 COLLATE = utf8mb4_bin
