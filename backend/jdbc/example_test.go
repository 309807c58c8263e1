package jdbc_test

import (
	"context"
	"database/sql"
	"fmt"
	"log"

	_ "github.com/go-sql-driver/mysql"
	_ "github.com/jackc/pgx/v5/stdlib"

	"github.com/simba-go/simba"
	"github.com/simba-go/simba/backend/jdbc"
)

// A Locker on MySQL or MariaDB. The pool is the application's: simba never closes it. It
// needs a server, so it has no output to check.
func Example() {
	// interpolateParams=true: one round trip per statement instead of three.
	db, err := sql.Open("mysql", "app:secret@tcp(db.internal:3306)/app?interpolateParams=true")
	if err != nil {
		log.Fatal(err)
	}
	defer db.Close()
	ctx := context.Background()
	if err := jdbc.CreateTable(ctx, db); err != nil { // or run jdbc.DDL() in a migration
		log.Fatal(err)
	}
	backend, err := jdbc.New(db)
	if err != nil {
		log.Fatal(err)
	}
	defer backend.Close() // frees its pinned connections; stop services first

	locker, err := simba.NewLocker(backend, "nightly-export")
	if err != nil {
		log.Fatal(err)
	}
	lease, err := locker.Acquire(ctx)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("exporting with fencing token", lease.Token())
	// Work that must stop when ownership is lost uses lease.Context().
	if err := lease.Release(ctx); err != nil {
		log.Print(err)
	}
}

// A Locker on PostgreSQL, through pgx's database/sql driver. It needs a server, so it has no
// output to check.
func Example_postgres() {
	db, err := sql.Open("pgx", "postgres://app:secret@db.internal:5432/app")
	if err != nil {
		log.Fatal(err)
	}
	defer db.Close()
	ctx := context.Background()
	dialect := jdbc.WithDialect(jdbc.Postgres)
	if err := jdbc.CreateTable(ctx, db, dialect); err != nil { // or run jdbc.DDL(dialect) in a migration
		log.Fatal(err)
	}
	// Behind PgBouncer in transaction mode, add jdbc.WithHandOver(false).
	backend, err := jdbc.New(db, dialect)
	if err != nil {
		log.Fatal(err)
	}
	defer backend.Close()

	locker, err := simba.NewLocker(backend, "nightly-export")
	if err != nil {
		log.Fatal(err)
	}
	lease, err := locker.Acquire(ctx)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("exporting with fencing token", lease.Token())
	if err := lease.Release(ctx); err != nil {
		log.Print(err)
	}
}

// The table's DDL, for migrations run by other tools.
func ExampleDDL() {
	ddl, err := jdbc.DDL(jdbc.WithTable("app.simba_mutex"))
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(ddl)
	// Output:
	// -- The simba_mutex table of simba's database/sql backend for MySQL and MariaDB: the format
	// -- JVM Simba uses, with a binary collation so that names differing in case or accents
	// -- never share a row. Times are epoch milliseconds of the database's clock.
	// CREATE TABLE IF NOT EXISTS `app`.`simba_mutex` (
	//     `mutex`         varchar(66)     NOT NULL COMMENT 'mutex name',
	//     `acquired_at`   bigint unsigned NOT NULL COMMENT 'last acquisition or renewal (simba: also release, creation), epoch ms',
	//     `ttl_at`        bigint unsigned NOT NULL COMMENT 'end of the owner''s TTL, epoch ms',
	//     `transition_at` bigint unsigned NOT NULL COMMENT 'end of the transition window, epoch ms',
	//     `owner_id`      varchar(128)    NOT NULL COMMENT 'owner''s contender ID; empty: no owner',
	//     `version`       int unsigned    NOT NULL COMMENT 'bumped by every change; fencing tokens come from it',
	//     PRIMARY KEY (`mutex`)
	// ) ENGINE = InnoDB DEFAULT CHARACTER SET = utf8mb4 COLLATE = utf8mb4_bin
}

// PostgreSQL's DDL.
func ExampleDDL_postgres() {
	ddl, err := jdbc.DDL(jdbc.WithDialect(jdbc.Postgres))
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(ddl)
	// Output:
	// -- The simba_mutex table of simba's database/sql backend for PostgreSQL: JVM Simba's columns
	// -- in PostgreSQL's types (it has no unsigned integers: CHECK constraints keep the ranges),
	// -- with the "C" collation, under which different names never compare equal. Times are
	// -- epoch milliseconds of the database's clock.
	// CREATE TABLE IF NOT EXISTS "simba_mutex" (
	//     "mutex"         varchar(66)  COLLATE "C" NOT NULL PRIMARY KEY,
	//     "acquired_at"   bigint       NOT NULL CHECK ("acquired_at" >= 0),
	//     "ttl_at"        bigint       NOT NULL CHECK ("ttl_at" >= 0),
	//     "transition_at" bigint       NOT NULL CHECK ("transition_at" >= 0),
	//     "owner_id"      varchar(128) COLLATE "C" NOT NULL,
	//     "version"       bigint       NOT NULL CHECK ("version" BETWEEN 0 AND 4294967295)
	// )
}
