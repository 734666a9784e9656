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
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/stdlib"
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

// Options are the settings of OpenWith beyond the DSN.
type Options struct {
	// PasswordFile names a file holding the PostgreSQL password (one line;
	// a trailing newline is ignored). It wins over a password in the DSN
	// and over PGPASSWORD. Without it, pgx reads PGPASSWORD and then
	// ~/.pgpass (or PGPASSFILE), so the password never has to be on the
	// command line or in the configuration file.
	PasswordFile string
}

// Open connects to the database dsn names (see ParseDSN), creating the
// SQLite file and its directory if needed, and migrates the schema.
// A nil logger discards logs.
func Open(ctx context.Context, dsn string, log *slog.Logger) (*Store, error) {
	return OpenWith(ctx, dsn, log, Options{})
}

// OpenWith is Open with options.
func OpenWith(ctx context.Context, dsn string, log *slog.Logger, opt Options) (*Store, error) {
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
	password := ""
	switch t.Dialect {
	case SQLite:
		if opt.PasswordFile != "" {
			return nil, fmt.Errorf("%w: a password file is for PostgreSQL; SQLite has no password", ErrBadDSN)
		}
		if err := os.MkdirAll(filepath.Dir(t.Path), 0o700); err != nil {
			return nil, fmt.Errorf("creating the database directory: %w", err)
		}
		q := url.Values{}
		for _, p := range sqlitePragmas {
			q.Add("_pragma", p)
		}
		q.Set("_txlock", "immediate")
		t.DSN = t.Path + "?" + q.Encode()
		where = t.Path
		dial = sqlite.Open(t.DSN)
	case Postgres:
		// pgx parses the DSN and fills in what it leaves out from the
		// environment (PGPASSWORD, PGHOST, ...) and the password file
		// ~/.pgpass, the way psql does.
		pcfg, err := pgx.ParseConfig(t.DSN)
		if err != nil {
			return nil, fmt.Errorf("%w: PostgreSQL DSN %s does not parse; want postgres://user@host:5432/dbname", ErrBadDSN, where)
		}
		if dsnHasPassword(t.DSN) {
			log.Warn("the database DSN holds a password, which process listings and shell history show; " +
				"set PGPASSWORD or a password file (db_password_file, --db-password-file) instead")
		}
		if opt.PasswordFile != "" {
			pw, err := readPasswordFile(opt.PasswordFile)
			if err != nil {
				return nil, err
			}
			pcfg.Password = pw
		}
		password = pcfg.Password
		dial = postgres.New(postgres.Config{Conn: stdlib.OpenDB(*pcfg)})
	}
	db, err := gorm.Open(dial, cfg)
	if err != nil {
		return nil, fmt.Errorf("opening %s database %s: %w", t.Dialect, where, redactErr(err, t.DSN, password))
	}
	s := &Store{db: db, dialect: t.Dialect, where: where, log: log}
	if sqlDB, err := db.DB(); err == nil {
		if err := sqlDB.PingContext(ctx); err != nil {
			_ = sqlDB.Close()
			return nil, fmt.Errorf("connecting to %s database %s: %w", t.Dialect, where, redactErr(err, t.DSN, password))
		}
	}
	if err := s.migrate(ctx); err != nil {
		_ = s.Close()
		return nil, fmt.Errorf("migrating %s database %s: %w", t.Dialect, where, redactErr(err, t.DSN, password))
	}
	return s, nil
}

// sqlitePragmas are the SQLite settings of every connection.
//
// WAL lets readers (prices, the API) run while a refresh writes; the busy
// timeout waits out another process's write instead of failing; foreign
// keys are enforced.
//
// synchronous(FULL) is chosen for durability: the broker acknowledges a
// write (201/202, a heartbeat's 200) only after its commit, and with FULL
// every commit is fsynced to the WAL before it returns, so an acknowledged
// write survives a power loss or kernel crash, not only a process crash.
// NORMAL would fsync only at checkpoints, and the last commits before a
// power loss could vanish although their clients were told they were
// stored. FULL costs one fsync per transaction; heartbeats are
// group-committed (docs/api.md), so under load one fsync serves hundreds.
var sqlitePragmas = []string{"journal_mode(WAL)", "busy_timeout(10000)", "foreign_keys(1)", "synchronous(FULL)"}

// readPasswordFile reads a password from the first line of path.
func readPasswordFile(path string) (string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return "", fmt.Errorf("reading the database password file: %w", err)
	}
	pw, _, _ := strings.Cut(string(b), "\n")
	pw = strings.TrimSuffix(pw, "\r")
	if pw == "" {
		return "", fmt.Errorf("the database password file %s is empty; write the password on its first line", path)
	}
	return pw, nil
}

// dsnHasPassword reports whether a PostgreSQL DSN spells out a password.
func dsnHasPassword(dsn string) bool {
	if u, err := url.Parse(dsn); err == nil && u.Scheme != "" {
		if _, ok := u.User.Password(); ok {
			return true
		}
		return u.Query().Has("password")
	}
	return kvPassword.MatchString(dsn)
}

// redactErr strips the password (from the DSN or a password file) from a
// driver error, which may quote it.
func redactErr(err error, dsn, password string) error {
	pw := password
	if u, perr := url.Parse(dsn); perr == nil && u.User != nil {
		if p, ok := u.User.Password(); ok && p != "" {
			pw = p
		}
	}
	if pw == "" || !strings.Contains(err.Error(), pw) {
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
