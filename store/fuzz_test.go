package store

import (
	"errors"
	"net/url"
	"strings"
	"testing"
)

// FuzzParseDSN: any --db value is either understood or rejected with
// ErrBadDSN, never a panic; Redact never lets a URL's password through.
func FuzzParseDSN(f *testing.F) {
	for _, s := range []string{"", "/tmp/x.db", "sqlite:///x.db", "sqlite:x", "postgres://u:p@h:5432/db?sslmode=disable",
		"host=h user=u password=secret dbname=d", "mysql://x", "x.db?y", "postgresql://u:p%40ss@h/db"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, dsn string) {
		t.Setenv("XDG_DATA_HOME", "/data")
		got, err := ParseDSN(dsn)
		if err != nil {
			if !errors.Is(err, ErrBadDSN) {
				t.Fatalf("ParseDSN(%q) error %v is not ErrBadDSN", dsn, err)
			}
			return
		}
		if got.Dialect != SQLite && got.Dialect != Postgres {
			t.Fatalf("ParseDSN(%q) dialect %q", dsn, got.Dialect)
		}
		if got.Dialect == SQLite && (got.Path == "" || strings.ContainsAny(got.Path, "?#")) {
			t.Fatalf("ParseDSN(%q) SQLite path %q", dsn, got.Path)
		}
		red := Redact(dsn)
		if u, err := url.Parse(dsn); err == nil && u.User != nil {
			if pw, ok := u.User.Password(); ok && len(pw) > 3 && strings.Contains(red, pw) && !strings.Contains(u.Host+u.Path+u.User.Username(), pw) {
				t.Fatalf("Redact(%q) = %q keeps the password", dsn, red)
			}
		}
	})
}
