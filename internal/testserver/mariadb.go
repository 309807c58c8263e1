package testserver

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
)

// MariaDB is a test MariaDB server with a database "simba" and a TCP user simba/simba.
type MariaDB struct {
	*Server
	socket string
	client string
}

// NewMariaDB prepares a mariadbd with a private data directory in dir (which must be short:
// the socket path is limited to 107 bytes) on a free loopback port; extra server options
// are appended to its command line. Call Start to run it; the first start installs the
// data directory and creates the database and user.
func NewMariaDB(dir string, extra ...string) (*MariaDB, error) {
	bin, err := lookPath("mariadbd")
	if err != nil {
		return nil, err
	}
	install, err := lookPath("mariadb-install-db")
	if err != nil {
		return nil, err
	}
	admin, err := lookPath("mariadb-admin")
	if err != nil {
		return nil, err
	}
	client, err := lookPath("mariadb")
	if err != nil {
		return nil, err
	}
	s, err := newServer("mariadb", dir)
	if err != nil {
		return nil, err
	}
	m := &MariaDB{Server: s, socket: filepath.Join(dir, "mysqld.sock"), client: client}
	if len(m.socket) > 100 {
		return nil, fmt.Errorf("testserver: socket path %q too long; use a shorter directory", m.socket)
	}
	data := filepath.Join(dir, "data")
	// A temporary directory of the server's own: bootstraps of two servers at once (the
	// tests of two packages) sharing /tmp removed each other's temporary tables.
	tmp := filepath.Join(dir, "tmp")
	if err := os.MkdirAll(tmp, 0o700); err != nil {
		return nil, err
	}
	s.args = func() []string {
		return append([]string{bin, "--no-defaults", "--user=root", "--datadir=" + data, "--tmpdir=" + tmp,
			"--socket=" + m.socket, "--port=" + strconv.Itoa(s.Port), "--bind-address=" + s.Host,
			"--pid-file=" + filepath.Join(dir, "mariadbd.pid"), "--log-error=" + filepath.Join(dir, "error.log"),
			"--skip-name-resolve", "--max-connections=500", "--innodb-buffer-pool-size=64M",
		}, extra...)
	}
	s.before = func(ctx context.Context) error {
		if _, err := os.Stat(filepath.Join(data, "mysql")); err == nil {
			return nil
		}
		cmd := exec.CommandContext(ctx, install, "--no-defaults", "--datadir="+data, "--user=root",
			"--auth-root-authentication-method=socket", "--skip-test-db")
		cmd.Env = append(os.Environ(), "TMPDIR="+tmp) // the bootstrap server's tmpdir
		out, err := cmd.CombinedOutput()
		if err != nil {
			return fmt.Errorf("mariadb-install-db: %w: %s", err, out)
		}
		return nil
	}
	s.ready = func(ctx context.Context) error {
		out, err := exec.CommandContext(ctx, admin, "--no-defaults", "--socket="+m.socket, "-uroot", "ping").CombinedOutput()
		if err != nil || !strings.Contains(string(out), "alive") {
			return fmt.Errorf("mariadb-admin ping: %v: %s", err, out)
		}
		return nil
	}
	s.setup = func(ctx context.Context) error {
		return m.Exec(ctx, `CREATE DATABASE IF NOT EXISTS simba;
CREATE USER IF NOT EXISTS 'simba'@'127.0.0.1' IDENTIFIED BY 'simba';
CREATE USER IF NOT EXISTS 'simba'@'localhost' IDENTIFIED BY 'simba';
GRANT ALL PRIVILEGES ON simba.* TO 'simba'@'127.0.0.1';
GRANT ALL PRIVILEGES ON simba.* TO 'simba'@'localhost';
FLUSH PRIVILEGES;`)
	}
	return m, nil
}

// DSN returns a go-sql-driver DSN for the simba user on the simba database, with
// interpolateParams=true (one round trip per statement) and extra parameters appended.
func (m *MariaDB) DSN(params ...string) string {
	return fmt.Sprintf("simba:simba@tcp(%s)/simba?%s", m.Addr(), strings.Join(append([]string{"interpolateParams=true"}, params...), "&"))
}

// Exec runs SQL as root over the server's socket with the mariadb client.
func (m *MariaDB) Exec(ctx context.Context, sql string) error {
	cmd := exec.CommandContext(ctx, m.client, "--no-defaults", "--socket="+m.socket, "-uroot")
	cmd.Stdin = strings.NewReader(sql)
	out, err := cmd.CombinedOutput()
	if err != nil {
		return fmt.Errorf("mariadb: %w: %s", err, out)
	}
	return nil
}
