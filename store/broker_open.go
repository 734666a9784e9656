// Package store keeps gpubroker's state with gorm: SQLite (pure Go, no cgo)
// by default and PostgreSQL for several broker replicas. Other packages see
// plain structs, never gorm types.
package store

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/glebarez/sqlite"
	"gorm.io/driver/postgres"
	"gorm.io/gorm"
	"gorm.io/gorm/logger"
)

// IsPostgresDSN reports whether dsn names a PostgreSQL database (a URL or a
// key=value DSN) rather than a SQLite file.
func IsPostgresDSN(dsn string) bool {
	return strings.HasPrefix(dsn, "postgres://") || strings.HasPrefix(dsn, "postgresql://") ||
		strings.Contains(dsn, "host=") || strings.Contains(dsn, "dbname=")
}

// OpenBrokerDB opens the database the broker daemon uses. A SQLite path gets
// WAL mode (readers never block the writer, and a committed transaction
// survives a killed process), a busy timeout, and a single connection so
// writers queue in Go instead of failing with SQLITE_BUSY.
func OpenBrokerDB(dsn string) (*gorm.DB, error) {
	cfg := &gorm.Config{Logger: logger.Discard, TranslateError: true}
	if IsPostgresDSN(dsn) {
		db, err := gorm.Open(postgres.Open(dsn), cfg)
		if err != nil {
			return nil, fmt.Errorf("opening PostgreSQL: %w", err)
		}
		sqlDB, err := db.DB()
		if err != nil {
			return nil, err
		}
		sqlDB.SetMaxOpenConns(32)
		sqlDB.SetMaxIdleConns(32)
		sqlDB.SetConnMaxIdleTime(5 * time.Minute)
		return db, nil
	}
	path := strings.TrimPrefix(dsn, "sqlite://")
	if path == "" {
		return nil, fmt.Errorf("empty database path; give a SQLite file or a postgres:// DSN")
	}
	if dir := filepath.Dir(path); dir != "." {
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return nil, fmt.Errorf("creating database directory: %w", err)
		}
	}
	sep := "?"
	if strings.Contains(path, "?") {
		sep = "&"
	}
	full := path + sep + "_pragma=journal_mode(WAL)&_pragma=busy_timeout(10000)&_pragma=synchronous(NORMAL)&_pragma=foreign_keys(1)"
	db, err := gorm.Open(sqlite.Open(full), cfg)
	if err != nil {
		return nil, fmt.Errorf("opening SQLite %s: %w", path, err)
	}
	sqlDB, err := db.DB()
	if err != nil {
		return nil, err
	}
	sqlDB.SetMaxOpenConns(1)
	return db, nil
}
