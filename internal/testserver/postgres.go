package testserver

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
)

// Postgres is a test PostgreSQL server with a database "simba" owned by a login role
// simba/simba (md5 password authentication over TCP), and the superuser postgres on its
// unix socket.
type Postgres struct {
	*Server
	socketDir string
	psql      string
	cred      *syscall.Credential // the user the server runs as; nil: this process's
}

// NewPostgres prepares a postgres with a private data directory in dir (which must be
// short: the unix socket's path is limited to 107 bytes) on a free loopback port; extra
// server options ("-c", "name=value" pairs) are appended to its command line. Call Start
// to run it; the first start runs initdb and creates the role and the database.
//
// PostgreSQL refuses to run as root: as root, the server runs as the postgres user of
// Debian's package (or nobody), which is given dir, and dir's parents are made searchable
// by every user.
func NewPostgres(dir string, extra ...string) (*Postgres, error) {
	bin, err := lookPostgres("postgres")
	if err != nil {
		return nil, err
	}
	initdb, err := lookPostgres("initdb")
	if err != nil {
		return nil, err
	}
	isReady, err := lookPostgres("pg_isready")
	if err != nil {
		return nil, err
	}
	psql, err := lookPostgres("psql")
	if err != nil {
		return nil, err
	}
	s, err := newServer("postgres", dir)
	if err != nil {
		return nil, err
	}
	p := &Postgres{Server: s, socketDir: dir, psql: psql}
	if len(filepath.Join(dir, ".s.PGSQL.65535")) > 100 {
		return nil, fmt.Errorf("testserver: socket directory %q too long; use a shorter directory", dir)
	}
	if os.Geteuid() == 0 {
		if p.cred, err = unprivileged(); err != nil {
			return nil, err
		}
		if err := os.Chown(dir, int(p.cred.Uid), int(p.cred.Gid)); err != nil {
			return nil, err
		}
		if err := traversable(filepath.Dir(dir)); err != nil {
			return nil, err
		}
	}
	s.attr = func(a *syscall.SysProcAttr) { a.Credential = p.cred }
	// SIGINT is PostgreSQL's fast shutdown: SIGTERM (smart) would wait for every client.
	s.stop, s.tree = syscall.SIGINT, true
	data := filepath.Join(dir, "data")
	s.args = func() []string {
		return append([]string{bin, "-D", data, "-p", strconv.Itoa(s.Port), "-h", s.Host, "-k", p.socketDir,
			"-c", "max_connections=300", "-c", "shared_buffers=32MB", "-c", "log_min_messages=warning",
			// md5, not SCRAM: a SCRAM log-in costs each side thousands of hash rounds
			// (tens of milliseconds under the race detector), more than some tests give a
			// first call.
			"-c", "password_encryption=md5",
		}, extra...)
	}
	s.before = func(ctx context.Context) error {
		if _, err := os.Stat(filepath.Join(data, "PG_VERSION")); err == nil {
			return nil
		}
		pwfile := filepath.Join(dir, "pw")
		if err := os.WriteFile(pwfile, []byte("postgres\n"), 0o600); err != nil {
			return err
		}
		if p.cred != nil {
			if err := os.Chown(pwfile, int(p.cred.Uid), int(p.cred.Gid)); err != nil {
				return err
			}
		}
		cmd := exec.CommandContext(ctx, initdb, "-D", data, "-U", "postgres", "--pwfile="+pwfile,
			"--auth-local=trust", "--auth-host=md5", "-E", "UTF8", "--locale=C", "--no-sync")
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: p.cred}
		out, err := cmd.CombinedOutput()
		if err != nil {
			return fmt.Errorf("initdb: %w: %s", err, out)
		}
		return nil
	}
	s.ready = func(ctx context.Context) error {
		out, err := exec.CommandContext(ctx, isReady, "-h", p.socketDir, "-p", strconv.Itoa(s.Port), "-U", "postgres").CombinedOutput()
		if err != nil {
			return fmt.Errorf("pg_isready: %v: %s", err, out)
		}
		return nil
	}
	s.setup = func(ctx context.Context) error {
		return p.Exec(ctx, "CREATE ROLE simba LOGIN PASSWORD 'simba'; CREATE DATABASE simba OWNER simba;")
	}
	return p, nil
}

// DSN returns a pgx DSN (a URL) for the simba role on the simba database over TCP, with
// extra query parameters appended ("connect_timeout=5", "options=-c%20lock_timeout%3D1s").
func (p *Postgres) DSN(params ...string) string {
	dsn := fmt.Sprintf("postgres://simba:simba@%s/simba?sslmode=disable", p.Addr())
	if len(params) > 0 {
		dsn += "&" + strings.Join(params, "&")
	}
	return dsn
}

// Exec runs SQL as the superuser over the server's unix socket with psql, in the simba
// database once it exists; it stops at the first error.
func (p *Postgres) Exec(ctx context.Context, sql string) error {
	db := "simba"
	if strings.Contains(sql, "CREATE DATABASE simba") {
		db = "postgres"
	}
	cmd := exec.CommandContext(ctx, p.psql, "-X", "-q", "-v", "ON_ERROR_STOP=1", "-h", p.socketDir,
		"-p", strconv.Itoa(p.Port), "-U", "postgres", "-d", db)
	cmd.Stdin = strings.NewReader(sql)
	cmd.Env = append(os.Environ(), "PGCONNECT_TIMEOUT=10")
	out, err := cmd.CombinedOutput()
	if err != nil {
		return fmt.Errorf("psql: %w: %s", err, out)
	}
	return nil
}

// lookPostgres finds a PostgreSQL program: on the PATH, or in the newest of Debian's
// /usr/lib/postgresql/<version>/bin, which is not on the PATH.
func lookPostgres(name string) (string, error) {
	if p, err := exec.LookPath(name); err == nil {
		return p, nil
	}
	dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	sort.Slice(dirs, func(i, j int) bool { return version(dirs[i]) > version(dirs[j]) })
	for _, d := range dirs {
		p := filepath.Join(d, name)
		if st, err := os.Stat(p); err == nil && !st.IsDir() {
			return p, nil
		}
	}
	return "", fmt.Errorf("%w: %s (install postgresql-15, or run make setup)", ErrMissing, name)
}

// version returns the major version in a path /usr/lib/postgresql/<version>/bin.
func version(dir string) int {
	v, _ := strconv.Atoi(filepath.Base(filepath.Dir(dir)))
	return v
}

// traversable lets every user search dir and its parents (o+x, not read), so that a
// server running as another user reaches its directory below them; a temporary
// directory's parents are often 0700.
func traversable(dir string) error {
	for d := dir; ; d = filepath.Dir(d) {
		st, err := os.Stat(d)
		if err != nil {
			return err
		}
		if st.Mode().Perm()&0o001 == 0 {
			if err := os.Chmod(d, st.Mode().Perm()|0o001); err != nil {
				return fmt.Errorf("testserver: let the server's user reach %s: %w", d, err)
			}
		}
		if d == filepath.Dir(d) {
			return nil
		}
	}
}

// unprivileged returns the credentials of the user a server started by root runs as.
func unprivileged() (*syscall.Credential, error) {
	for _, name := range []string{"postgres", "nobody"} {
		u, err := user.Lookup(name)
		if err != nil {
			continue
		}
		uid, err1 := strconv.ParseUint(u.Uid, 10, 32)
		gid, err2 := strconv.ParseUint(u.Gid, 10, 32)
		if err1 == nil && err2 == nil {
			return &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}, nil
		}
	}
	return nil, fmt.Errorf("testserver: postgres refuses to run as root, and there is no postgres or nobody user")
}
