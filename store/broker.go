package store

// This file holds Broker, the broker daemon's view of the store, and the
// helpers its tables share. Each table lives in its own file (workloads.go,
// instances.go, events.go, benchmarks.go, tokens.go, leases.go,
// job_runs.go); callers see the plain *Record structs, the gorm row types
// stay private.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"gorm.io/gorm"
)

// Sentinel errors the API layer maps to status codes.
var (
	// ErrNotFound means the record does not exist.
	ErrNotFound = errors.New("not found")
	// ErrConflict means the record already exists (create) or changed.
	ErrConflict = errors.New("already exists")
)

// Broker is the daemon's persistence. Every method commits before it
// returns, so a caller that acknowledges after a nil error never loses an
// acknowledged write.
type Broker struct {
	db *gorm.DB
}

// Broker migrates the broker daemon's tables and returns their store,
// sharing this Store's connection pool. On SQLite the pool is narrowed to
// one connection: writers then queue in Go instead of sleeping in SQLite's
// busy handler, which keeps heartbeat latency flat under load.
//
// On PostgreSQL the pool is bounded (brokerPGConns): without a bound, a
// burst of API requests opens a connection each, runs into the server's
// max_connections and fails; with it, requests queue briefly in Go.
func (s *Store) Broker(ctx context.Context) (*Broker, error) {
	if sqlDB, err := s.db.DB(); err == nil {
		switch s.dialect {
		case SQLite:
			sqlDB.SetMaxOpenConns(1)
		case Postgres:
			sqlDB.SetMaxOpenConns(brokerPGConns)
			sqlDB.SetMaxIdleConns(brokerPGConns)
		}
	}
	return newBroker(ctx, s.db)
}

// brokerPGConns bounds the PostgreSQL pool per replica.
const brokerPGConns = 16

func newBroker(ctx context.Context, db *gorm.DB) (*Broker, error) {
	err := db.WithContext(ctx).AutoMigrate(&workloadRow{}, &instanceRow{}, &eventRow{},
		&benchmarkRow{}, &tokenRow{}, &leaseRow{}, &jobRunRow{})
	if err != nil {
		return nil, fmt.Errorf("migrating broker tables: %w", err)
	}
	return &Broker{db: db}, nil
}

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
