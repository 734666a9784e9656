// Package testprom runs a real Prometheus server (Debian's `prometheus`)
// for tests, scraping one target every second. Without the binary tests
// skip with the reason; under CI (CI=true) they fail, because nothing may
// skip there (.ci/run installs it).
package testprom

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

// Server is a running Prometheus.
type Server struct {
	// Addr is host:port of its HTTP API.
	Addr string

	mu   sync.Mutex
	logs strings.Builder
}

// Logs is what the server printed so far.
func (s *Server) Logs() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.logs.String()
}

func (s *Server) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.logs.Write(p)
}

// Start runs Prometheus scraping target (host:port) as job "chat" every
// second until the test ends; its logs are printed if the test failed.
func Start(t *testing.T, target string) *Server {
	t.Helper()
	bin, err := exec.LookPath("prometheus")
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal("prometheus is not installed; CI must run this test (.ci/run installs it)")
		}
		t.Skip("prometheus not installed (apt-get install prometheus): skipping a test against a real Prometheus")
	}
	dir := t.TempDir()
	cfg := filepath.Join(dir, "prometheus.yml")
	conf := fmt.Sprintf("global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\nscrape_configs:\n  - job_name: chat\n    static_configs:\n      - targets: [%q]\n", target)
	if err := os.WriteFile(cfg, []byte(conf), 0o644); err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &Server{Addr: ln.Addr().String()}
	_ = ln.Close()
	ctx, cancel := context.WithCancel(context.Background())
	cmd := exec.CommandContext(ctx, bin, "--config.file="+cfg, "--storage.tsdb.path="+filepath.Join(dir, "data"),
		"--web.listen-address="+s.Addr, "--log.level=warn")
	cmd.Stdout, cmd.Stderr = s, s
	if err := cmd.Start(); err != nil {
		cancel()
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cancel()
		_ = cmd.Wait()
		if t.Failed() {
			t.Logf("prometheus logs:\n%s", s.Logs())
		}
	})
	return s
}
