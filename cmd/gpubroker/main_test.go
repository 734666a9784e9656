package main

import (
	"fmt"
	"os"
	"testing"
)

// TestMain points XDG_DATA_HOME at an empty directory, so no test reads the
// developer's default database: `prices` and `plan` overlay it when it
// exists, and golden outputs must not depend on it.
func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "gpubroker-cmd-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	os.Setenv("XDG_DATA_HOME", dir)
	code := m.Run()
	_ = os.RemoveAll(dir)
	os.Exit(code)
}
