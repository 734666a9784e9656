//go:build !agentonly

package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestCatalogRefreshRejectsBadPolicy(t *testing.T) {
	bad := filepath.Join(t.TempDir(), "bad.yaml")
	if err := os.WriteFile(bad, []byte("version: 1\nclouds: [aws, ibm]\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	code, _, stderr := runCLI(t, "catalog", "refresh", "-f", bad, "--db", filepath.Join(t.TempDir(), "x.db"))
	if code != 2 || !strings.Contains(stderr, "bad.yaml:2:") || !strings.Contains(stderr, "ibm") {
		t.Fatalf("exit %d, stderr %q; want exit 2 with a file:line:col error naming ibm", code, stderr)
	}
}

func TestPolicyScope(t *testing.T) {
	clouds, regions, err := policyScope("../../examples/eu-residency.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if len(clouds) == 0 || len(regions) == 0 {
		t.Fatalf("clouds %v regions %v: want the policy's (defaulted) scope", clouds, regions)
	}
}
