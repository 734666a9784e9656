package store

// This file holds Broker, the broker daemon's view of the store, and the
// helpers its tables share. Each table lives in its own file (workloads.go,
// instances.go, events.go, benchmarks.go, tokens.go, leases.go,
// job_runs.go); callers see the plain *Record structs, the gorm row types
// stay private.

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"unicode/utf8"

	"github.com/jackc/pgx/v5/pgconn"

	"gorm.io/gorm"
)

// Sentinel errors the API layer maps to status codes.
var (
	// ErrNotFound means the record does not exist.
	ErrNotFound = errors.New("not found")
	// ErrConflict means the record already exists (create) or changed.
	ErrConflict = errors.New("already exists")
	// ErrKeyReused means an idempotency key already recorded a different
	// report.
	ErrKeyReused = errors.New("idempotency key already used for a different report")
)

// Broker is the daemon's persistence. Every method commits before it
// returns, so a caller that acknowledges after a nil error never loses an
// acknowledged write.
type Broker struct {
	db *gorm.DB
}

// Broker returns the broker daemon's view of this store, sharing its
// connection pool (its tables were migrated by Open with every other
// table). On SQLite the pool is narrowed to one connection: writers then
// queue in Go instead of sleeping in SQLite's busy handler, which keeps
// heartbeat latency flat under load.
//
// On PostgreSQL the pool is bounded (brokerPGConns): without a bound, a
// burst of API requests opens a connection each, runs into the server's
// max_connections and fails; with it, requests queue briefly in Go.
func (s *Store) Broker(_ context.Context) (*Broker, error) {
	if sqlDB, err := s.db.DB(); err == nil {
		switch s.dialect {
		case SQLite:
			sqlDB.SetMaxOpenConns(1)
		case Postgres:
			sqlDB.SetMaxOpenConns(brokerPGConns)
			sqlDB.SetMaxIdleConns(brokerPGConns)
		}
	}
	return &Broker{db: s.db}, nil
}

// brokerPGConns bounds the PostgreSQL pool per replica.
const brokerPGConns = 16

// Dialect is "sqlite" or "postgres".
func (b *Broker) Dialect() string { return b.db.Name() }

// Ping checks the database answers.
func (b *Broker) Ping(ctx context.Context) error {
	sqlDB, err := b.db.DB()
	if err != nil {
		return err
	}
	return sqlDB.PingContext(ctx)
}

// CheckIntegrity runs SQLite's integrity check (PostgreSQL needs none: it
// never commits a torn page) and fails on any problem it reports.
func (b *Broker) CheckIntegrity(ctx context.Context) error {
	if b.db.Name() != "sqlite" {
		return nil
	}
	var res []string
	if err := b.db.WithContext(ctx).Raw("PRAGMA integrity_check").Scan(&res).Error; err != nil {
		return fmt.Errorf("integrity check: %w", err)
	}
	if len(res) != 1 || res[0] != "ok" {
		return fmt.Errorf("integrity check: %s", strings.Join(res, "; "))
	}
	return nil
}

func isUniqueViolation(err error) bool {
	if errors.Is(err, gorm.ErrDuplicatedKey) {
		return true
	}
	s := err.Error()
	return strings.Contains(s, "UNIQUE constraint failed") || strings.Contains(s, "duplicate key value") ||
		strings.Contains(s, "SQLSTATE 23505")
}

func rawOrNil(s string) json.RawMessage {
	if s == "" {
		return nil
	}
	return json.RawMessage(s)
}

// ErrInvalidText is wrapped when a value to store is not valid UTF-8 or
// holds a NUL byte. PostgreSQL rejects both in text columns, and SQLite
// would store them and serve them back as invalid JSON; the API checks its
// input first, and this check keeps one bad value from failing a shared
// transaction (a heartbeat group commit) should anything slip through.
var ErrInvalidText = errors.New("text is not valid UTF-8 or holds a NUL byte")

// checkText returns ErrInvalidText, naming field, when any of vals is not
// storable text.
func checkText(field string, vals ...string) error {
	for _, v := range vals {
		if !utf8.ValidString(v) || strings.IndexByte(v, 0) >= 0 {
			return fmt.Errorf("%s: %w", field, ErrInvalidText)
		}
	}
	return nil
}

// ErrUnavailable marks an error as "the database cannot be reached now";
// IsUnavailable also recognises the drivers' own connection errors.
var ErrUnavailable = errors.New("the database is unavailable")

// IsUnavailable reports whether err means the database could not be
// reached or is shutting down or overloaded, rather than that the request
// was wrong: the caller should answer "try again later" (503), not blame
// the client or report an internal bug.
func IsUnavailable(err error) bool {
	if err == nil {
		return false
	}
	// A connection cut mid-query surfaces from pgx as a bare (unexpected)
	// EOF.
	if errors.Is(err, ErrUnavailable) || errors.Is(err, driver.ErrBadConn) || errors.Is(err, sql.ErrConnDone) ||
		errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF) {
		return true
	}
	var netErr net.Error
	if errors.As(err, &netErr) {
		return true
	}
	var connErr *pgconn.ConnectError
	if errors.As(err, &connErr) {
		return true
	}
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		// Class 08: connection exception; 53: insufficient resources;
		// 57P01-57P03: admin shutdown, crash shutdown, cannot connect now.
		c := pgErr.Code
		return strings.HasPrefix(c, "08") || strings.HasPrefix(c, "53") || c == "57P01" || c == "57P02" || c == "57P03"
	}
	msg := err.Error()
	for _, s := range []string{"database is locked", "SQLITE_BUSY", "connection refused", "conn closed",
		"failed to connect", "sql: database is closed", "unable to open database file"} {
		if strings.Contains(msg, s) {
			return true
		}
	}
	return false
}
