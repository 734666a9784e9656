// Package testpg gives tests a private PostgreSQL schema on the server named
// by GPUBROKER_TEST_POSTGRES_DSN. Without it, tests skip with the reason;
// under CI (CI=true) they fail instead, because nothing may skip there.
package testpg

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"net/url"
	"os"
	"testing"
	"time"

	// The pgx stdlib driver creates and drops the schema.
	_ "github.com/jackc/pgx/v5/stdlib"
)

// EnvDSN names the PostgreSQL server tests use, e.g.
// postgres://gpbdaemon:gpbdaemon@127.0.0.1:5432/gpubroker_daemon_test?sslmode=disable.
const EnvDSN = "GPUBROKER_TEST_POSTGRES_DSN"

// DSN creates a fresh schema, drops it when the test ends, and returns a
// DSN whose search_path points at it, so parallel tests never share tables.
func DSN(t testing.TB) string {
	t.Helper()
	base := os.Getenv(EnvDSN)
	if base == "" {
		if os.Getenv("CI") == "true" {
			t.Fatalf("%s is not set; CI must run the PostgreSQL tests", EnvDSN)
		}
		t.Skipf("%s not set: skipping PostgreSQL (e.g. postgres://user:pw@127.0.0.1:5432/db?sslmode=disable)", EnvDSN)
	}
	var b [6]byte
	_, _ = rand.Read(b[:])
	schema := "t_" + hex.EncodeToString(b[:])
	db, err := sql.Open("pgx", base)
	if err != nil {
		t.Fatalf("opening %s: %v", EnvDSN, err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := db.ExecContext(ctx, "CREATE SCHEMA "+schema); err != nil {
		_ = db.Close()
		t.Fatalf("creating schema: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if _, err := db.ExecContext(ctx, "DROP SCHEMA "+schema+" CASCADE"); err != nil {
			t.Logf("dropping schema %s: %v", schema, err)
		}
		_ = db.Close()
	})
	u, err := url.Parse(base)
	if err != nil {
		t.Fatalf("%s must be a postgres:// URL: %v", EnvDSN, err)
	}
	q := u.Query()
	q.Set("search_path", schema)
	u.RawQuery = q.Encode()
	return u.String()
}
