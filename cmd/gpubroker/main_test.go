package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"testing"
)

// envAsCLI makes the test binary behave as the gpubroker command, so the
// fleet's end-to-end test runs real `gpubroker serve` and `gpubroker agent`
// processes without building a separate binary.
const envAsCLI = "GPUBROKER_E2E_AS_CLI"

// TestMain points XDG_DATA_HOME at an empty directory, so no test reads the
// developer's default database: `prices` and `plan` overlay it when it
// exists, and golden outputs must not depend on it.
// With envAsCLI set, the binary is the gpubroker command instead.
func TestMain(m *testing.M) {
	if os.Getenv(envAsCLI) == "1" {
		ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
		code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
		stop()
		os.Exit(code)
	}
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
