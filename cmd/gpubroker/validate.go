//go:build !agentonly

package main

import (
	"fmt"
	"io"
	"math"
	"os"
	"path"
	"path/filepath"
	"strings"

	"github.com/gpubroker/gpubroker/policy"
	"github.com/gpubroker/gpubroker/store"
)

// checkDBPath checks a --db value that is only read from: a SQLite file
// must exist (opening one that does not would create an empty database and
// silently show the snapshot). PostgreSQL URLs are checked on connect.
func checkDBPath(db string) error {
	if db == "" || strings.HasPrefix(db, "postgres://") || strings.HasPrefix(db, "postgresql://") {
		return nil
	}
	p := strings.TrimPrefix(db, "sqlite://")
	if i := strings.IndexByte(p, '?'); i >= 0 {
		p = p[:i]
	}
	fi, err := os.Stat(p)
	switch {
	case err != nil:
		return fmt.Errorf("--db %s: no such database file; run 'gpubroker catalog refresh --db %s' to create one, or leave --db out to use the default", db, db)
	case fi.IsDir():
		return fmt.Errorf("--db %s is a directory; want a SQLite file, sqlite://PATH or a postgres:// URL", db)
	}
	return nil
}

// checkGlobs checks --region patterns the way policy files do.
func checkGlobs(flag string, patterns []string) error {
	for _, p := range patterns {
		if p == "" {
			return fmt.Errorf("%s: empty pattern; use '*' for any region", flag)
		}
		if _, err := path.Match(p, ""); err != nil {
			return fmt.Errorf("%s %q: %v; patterns use *, ? and [a-z] as in 'us-*'", flag, p, err)
		}
	}
	return nil
}

// checkNonNegative checks a number flag that must be 0 or more and finite.
func checkNonNegative(flag string, v float64, unit string) error {
	if v < 0 || math.IsNaN(v) || math.IsInf(v, 0) {
		return fmt.Errorf("%s %v: want 0 (no limit) or a positive number of %s", flag, v, unit)
	}
	return nil
}

// loadPolicy reads a policy file, or standard input when path is "-" (named
// "<stdin>" in error positions). Inputs are bounded by policy.MaxFileSize.
func loadPolicy(stdin io.Reader, path string) (*policy.Policy, error) {
	if path != "-" {
		return policy.Load(path)
	}
	data, err := io.ReadAll(io.LimitReader(stdin, policy.MaxFileSize+1))
	if err != nil {
		return nil, fmt.Errorf("reading policy from standard input: %w", err)
	}
	return policy.Parse("<stdin>", data)
}

// createdSQLite is a SQLite file (and maybe its folder) that did not exist
// before this run.
type createdSQLite struct {
	path   string
	newDir bool
}

// newSQLiteFile reports the SQLite file dsn names when it does not exist
// yet, or nil (PostgreSQL, or an existing file).
func newSQLiteFile(dsn string) (*createdSQLite, error) {
	t, err := store.ParseDSN(dsn)
	if err != nil || t.Path == "" {
		return nil, err
	}
	if _, err := os.Stat(t.Path); err == nil {
		return nil, nil
	}
	_, derr := os.Stat(filepath.Dir(t.Path))
	return &createdSQLite{path: t.Path, newDir: derr != nil}, nil
}

// remove deletes the file with its WAL and shared-memory files, and the
// folder when this run made it and it is empty.
func (c *createdSQLite) remove() {
	for _, suffix := range []string{"", "-wal", "-shm", "-journal"} {
		_ = os.Remove(c.path + suffix)
	}
	if c.newDir {
		_ = os.Remove(filepath.Dir(c.path))
	}
}
