package store

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"time"

	"github.com/glebarez/sqlite"
	"gorm.io/driver/postgres"
	"gorm.io/gorm"
	"gorm.io/gorm/logger"
)

// Dialect names the database behind a Store.
type Dialect string

// Supported dialects.
const (
	SQLite   Dialect = "sqlite"
	Postgres Dialect = "postgres"
)

// ErrBadDSN is wrapped by Open when the DSN names no supported database.
var ErrBadDSN = errors.New("bad database DSN")

// Store is an open database. It is safe for concurrent use.
type Store struct {
	db      *gorm.DB
	dialect Dialect
	// where is the DSN with any password removed, for messages.
	where string
	log   *slog.Logger
}

// DefaultPath is the SQLite file used when no DSN is given:
// $XDG_DATA_HOME/gpubroker/gpubroker.db, or ~/.local/share/gpubroker/gpubroker.db.
func DefaultPath() (string, error) {
	if d := os.Getenv("XDG_DATA_HOME"); d != "" && filepath.IsAbs(d) {
		return filepath.Join(d, "gpubroker", "gpubroker.db"), nil
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return "", fmt.Errorf("finding the default database path: %w (give --db)", err)
	}
	return filepath.Join(home, ".local", "share", "gpubroker", "gpubroker.db"), nil
}

// Target is where a DSN points, as Open would interpret it.
type Target struct {
	Dialect Dialect
	// Path is the SQLite file; for PostgreSQL it is empty.
	Path string
	// DSN is what is handed to the driver.
	DSN string
}

// ParseDSN interprets dsn: "" is the default SQLite file; "sqlite://PATH",
// "sqlite:PATH" or a plain path is a SQLite file; "postgres://..." ,
// "postgresql://..." or a libpq "host=... dbname=..." string is PostgreSQL.
func ParseDSN(dsn string) (Target, error) {
	dsn = strings.TrimSpace(dsn)
	switch {
	case dsn == "":
		p, err := DefaultPath()
		if err != nil {
			return Target{}, err
		}
		return Target{Dialect: SQLite, Path: p}, nil
	case strings.HasPrefix(dsn, "postgres://"), strings.HasPrefix(dsn, "postgresql://"):
		if _, err := url.Parse(dsn); err != nil {
			return Target{}, fmt.Errorf("%w: PostgreSQL URL does not parse (want postgres://user:password@host:5432/dbname)", ErrBadDSN)
		}
		return Target{Dialect: Postgres, DSN: dsn}, nil
	case strings.HasPrefix(dsn, "host=") || strings.Contains(dsn, " dbname=") || strings.HasPrefix(dsn, "dbname="):
		return Target{Dialect: Postgres, DSN: dsn}, nil
	case strings.HasPrefix(dsn, "sqlite://"):
		dsn = strings.TrimPrefix(dsn, "sqlite://")
	case strings.HasPrefix(dsn, "sqlite:"):
		dsn = strings.TrimPrefix(dsn, "sqlite:")
	case strings.Contains(dsn, "://"):
		scheme, _, _ := strings.Cut(dsn, "://")
		return Target{}, fmt.Errorf("%w: unsupported scheme %q; want a file path, sqlite://PATH or postgres://user:password@host/dbname", ErrBadDSN, scheme)
	}
	if dsn == "" {
		return Target{}, fmt.Errorf("%w: empty SQLite path; want sqlite://PATH", ErrBadDSN)
	}
	if strings.ContainsAny(dsn, "?#") {
		return Target{}, fmt.Errorf("%w: SQLite path %q holds '?' or '#'; give a plain file path", ErrBadDSN, dsn)
	}
	return Target{Dialect: SQLite, Path: dsn}, nil
}

var kvPassword = regexp.MustCompile(`password=('[^']*'|\S*)`)

// Redact returns dsn with any password replaced, safe for logs and errors.
func Redact(dsn string) string {
	if u, err := url.Parse(dsn); err == nil && (u.User != nil || strings.Contains(u.RawQuery, "password")) {
		if u.User != nil {
			if _, has := u.User.Password(); has {
				u.User = url.UserPassword(u.User.Username(), "xxxxx")
			}
		}
		if q := u.Query(); q.Has("password") {
			q.Set("password", "xxxxx")
			u.RawQuery = q.Encode()
		}
		return u.String()
	}
	return kvPassword.ReplaceAllString(dsn, "password=xxxxx")
}

// Open connects to the database dsn names (see ParseDSN), creating the
// SQLite file and its directory if needed, and migrates the schema.
// A nil logger discards logs.
func Open(ctx context.Context, dsn string, log *slog.Logger) (*Store, error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	t, err := ParseDSN(dsn)
	if err != nil {
		return nil, err
	}
	gl := logger.NewSlogLogger(log.With("component", "store"), logger.Config{
		LogLevel: logger.Warn, SlowThreshold: 2 * time.Second,
		ParameterizedQueries: true, IgnoreRecordNotFoundError: true,
	})
	cfg := &gorm.Config{Logger: gl, SkipDefaultTransaction: true, NowFunc: func() time.Time { return time.Now().UTC() }}
	var dial gorm.Dialector
	where := Redact(t.DSN)
	switch t.Dialect {
	case SQLite:
		if err := os.MkdirAll(filepath.Dir(t.Path), 0o700); err != nil {
			return nil, fmt.Errorf("creating the database directory: %w", err)
		}
		// WAL lets readers (prices) run while a refresh writes; the busy
		// timeout waits out another process's write instead of failing;
		// immediate transactions take the write lock up front, so two
		// writers queue rather than deadlock on lock upgrade.
		q := url.Values{}
		q.Add("_pragma", "journal_mode(WAL)")
		q.Add("_pragma", "busy_timeout(10000)")
		q.Add("_pragma", "foreign_keys(1)")
		q.Add("_pragma", "synchronous(NORMAL)")
		q.Set("_txlock", "immediate")
		t.DSN = t.Path + "?" + q.Encode()
		where = t.Path
		dial = sqlite.Open(t.DSN)
	case Postgres:
		dial = postgres.Open(t.DSN)
	}
	db, err := gorm.Open(dial, cfg)
	if err != nil {
		return nil, fmt.Errorf("opening %s database %s: %w", t.Dialect, where, redactErr(err, t.DSN))
	}
	s := &Store{db: db, dialect: t.Dialect, where: where, log: log}
	if sqlDB, err := db.DB(); err == nil {
		if err := sqlDB.PingContext(ctx); err != nil {
			_ = sqlDB.Close()
			return nil, fmt.Errorf("connecting to %s database %s: %w", t.Dialect, where, redactErr(err, t.DSN))
		}
	}
	if err := s.migrate(ctx); err != nil {
		_ = s.Close()
		return nil, fmt.Errorf("migrating %s database %s: %w", t.Dialect, where, err)
	}
	return s, nil
}

// redactErr strips a DSN's password from a driver error, which may quote it.
func redactErr(err error, dsn string) error {
	u, perr := url.Parse(dsn)
	if perr != nil || u.User == nil {
		return err
	}
	pw, ok := u.User.Password()
	if !ok || pw == "" || !strings.Contains(err.Error(), pw) {
		return err
	}
	return errors.New(strings.ReplaceAll(err.Error(), pw, "xxxxx"))
}

// Dialect says which database this store uses.
func (s *Store) Dialect() Dialect { return s.dialect }

// Where is the database location with any password removed.
func (s *Store) Where() string { return s.where }

// Close releases the connection pool.
func (s *Store) Close() error {
	sqlDB, err := s.db.DB()
	if err != nil {
		return err
	}
	return sqlDB.Close()
}
