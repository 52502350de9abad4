package testpg

import (
	"context"
	"os"
	"strings"
	"syscall"
	"testing"

	"github.com/jackc/pgx/v5"
)

func TestMain(m *testing.M) { os.Exit(Main(m)) }

func query(t *testing.T, url, sql string) (string, error) {
	t.Helper()
	ctx := context.Background()
	c, err := pgx.Connect(ctx, url)
	if err != nil {
		return "", err
	}
	defer c.Close(ctx)
	var s string
	if strings.HasPrefix(sql, "SELECT") || strings.HasPrefix(sql, "SHOW") {
		err = c.QueryRow(ctx, sql).Scan(&s)
	} else {
		_, err = c.Exec(ctx, sql)
	}
	return s, err
}

// TestSharedDatabases: two databases on the shared server are separate,
// the server is PostgreSQL 15 and does not run as root.
func TestSharedDatabases(t *testing.T) {
	a, b := URL(t), URL(t)
	if a == b {
		t.Fatalf("two tests got the same database %s", a)
	}
	v, err := query(t, a, `SHOW server_version`)
	if err != nil || v[:3] != "15." {
		t.Fatalf("server_version %q, %v; want 15.x", v, err)
	}
	if _, err := query(t, a, `CREATE TABLE x (id int)`); err != nil {
		t.Fatal(err)
	}
	if _, err := query(t, b, `SELECT 'x' FROM x`); err == nil {
		t.Fatal("database b sees database a's table")
	}
	// The postmaster's pid file belongs to the user it runs as.
	dir, err := query(t, a, `SELECT current_setting('data_directory')`)
	if err != nil {
		t.Fatal(err)
	}
	st, err := os.Stat(dir + "/postmaster.pid")
	if err != nil {
		t.Fatal(err)
	}
	if uid := st.Sys().(*syscall.Stat_t).Uid; uid == 0 {
		t.Errorf("postgres runs as root")
	}
}

// TestRestart: a server of its own stops (clients get errors) and starts
// again on the same port with its data.
func TestRestart(t *testing.T) {
	s := New(t)
	u := s.Database(t)
	if _, err := query(t, u, `CREATE TABLE kept (v text); INSERT INTO kept VALUES ('yes')`); err != nil {
		t.Fatal(err)
	}
	if err := s.Stop(); err != nil {
		t.Fatal(err)
	}
	if _, err := query(t, u, `SELECT 'up'`); err == nil {
		t.Fatal("a stopped server answered")
	}
	if err := s.Start(); err != nil {
		t.Fatal(err)
	}
	if v, err := query(t, u, `SELECT v FROM kept`); err != nil || v != "yes" {
		t.Fatalf("after restart: %q %v", v, err)
	}
}
