// Package shareddata finds the project's shared data folder (../shared next
// to the repository: real price catalogs and spot traces) for tests and
// benchmarks. Where it is absent, tests skip with a reason; under CI
// (CI=true) they fail instead, because nothing may skip there.
package shareddata

import (
	"os"
	"path/filepath"
	"testing"
)

// EnvDir overrides where the shared data folder is.
const EnvDir = "GPUBROKER_SHARED_DATA"

// Find returns the path of ../shared/data, or "" when it cannot be found.
func Find() string {
	if d := os.Getenv(EnvDir); d != "" {
		return d
	}
	dir, err := os.Getwd()
	if err != nil {
		return ""
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			d := filepath.Join(dir, "..", "shared", "data")
			if st, err := os.Stat(d); err == nil && st.IsDir() {
				return d
			}
			return ""
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return ""
		}
		dir = parent
	}
}

// Dir returns the shared data folder joined with elem, or skips the test
// (fails it under CI) when that path does not exist.
func Dir(tb testing.TB, elem ...string) string {
	tb.Helper()
	d := Find()
	if d != "" {
		p := filepath.Join(append([]string{d}, elem...)...)
		if _, err := os.Stat(p); err == nil {
			return p
		}
	}
	if os.Getenv("CI") == "true" {
		tb.Fatalf("shared data %v not found (set %s); CI must not skip", elem, EnvDir)
	}
	tb.Skipf("shared data %v not found next to the repository (set %s to run this test)", elem, EnvDir)
	return ""
}
