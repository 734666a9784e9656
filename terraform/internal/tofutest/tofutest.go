// Package tofutest runs the provider's tests against real components: the
// OpenTofu CLI (built from source by .ci/run and cached outside the
// repository) and a real broker (broker.Run on SQLite, on a real port).
// Where OpenTofu is absent, tests skip with the reason; under CI (CI=true)
// they fail instead, because nothing may skip there.
package tofutest

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"sync"
	"testing"
	"time"

	"github.com/gpubroker/gpubroker/broker"
)

// Version is the OpenTofu release the tests run against.
const Version = "1.9.4"

// EnvTofu names the OpenTofu binary to use.
const EnvTofu = "GPUBROKER_TOFU"

// Find returns the OpenTofu binary: $GPUBROKER_TOFU, or the build that
// .ci/run caches at $XDG_CACHE_HOME/gpubroker/tofu-1.9.4 (~/.cache/...).
// It returns "" and the places it looked when there is none.
func Find() (string, []string) {
	var tried []string
	if p := os.Getenv(EnvTofu); p != "" {
		if executable(p) {
			return p, nil
		}
		tried = append(tried, p+" ($"+EnvTofu+")")
	}
	if dir, err := os.UserCacheDir(); err == nil {
		p := filepath.Join(dir, "gpubroker", "tofu-"+Version)
		if executable(p) {
			return p, nil
		}
		tried = append(tried, p)
	}
	return "", tried
}

func executable(p string) bool {
	st, err := os.Stat(p)
	return err == nil && !st.IsDir() && st.Mode()&0o111 != 0
}

// Binary returns the OpenTofu binary, or skips the test (fails it under
// CI) when there is none.
func Binary(tb testing.TB) string {
	tb.Helper()
	p, tried := Find()
	if p != "" {
		return p
	}
	msg := fmt.Sprintf("OpenTofu %s not found (looked at %v); build it as .ci/run does or set %s", Version, tried, EnvTofu)
	if os.Getenv("CI") == "true" {
		tb.Fatal(msg + "; CI must not skip")
	}
	tb.Skip(msg)
	return ""
}

// AcceptanceEnv points terraform-plugin-testing at OpenTofu: the binary,
// and the provider address OpenTofu gives "gpubroker/gpubroker".
func AcceptanceEnv(tb testing.TB) {
	tb.Helper()
	bin := Binary(tb)
	// An empty CLI configuration: no warning about a missing ~/.terraformrc,
	// and nothing from the developer's own.
	cliConfig := filepath.Join(tb.TempDir(), "tofurc")
	if err := os.WriteFile(cliConfig, nil, 0o644); err != nil {
		tb.Fatal(err)
	}
	for k, v := range map[string]string{
		"TF_CLI_CONFIG_FILE":        cliConfig,
		"TF_ACC":                    "1",
		"TF_ACC_TERRAFORM_PATH":     bin,
		"TF_ACC_PROVIDER_HOST":      "registry.opentofu.org",
		"TF_ACC_PROVIDER_NAMESPACE": "gpubroker",
		"CHECKPOINT_DISABLE":        "1",
		"TF_IN_AUTOMATION":          "1",
	} {
		setenv(tb, k, v)
	}
}

func setenv(tb testing.TB, k, v string) {
	if t, ok := tb.(interface{ Setenv(string, string) }); ok {
		t.Setenv(k, v)
		return
	}
	tb.Fatalf("cannot set %s in %T", k, tb)
}

// Broker is a running broker.
type Broker struct {
	// URL is the API's base URL, e.g. http://127.0.0.1:41234.
	URL string
	// Token is the admin token it printed on first start.
	Token string
}

var tokenRE = regexp.MustCompile(`gpb_[A-Za-z0-9_-]{43}`)

// syncBuffer is a bytes.Buffer safe for the broker's goroutine to write
// while the test reads.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// StartBroker runs a real broker (the `gpubroker serve` wiring) on a new
// SQLite database and a free loopback port, with the real optimizer for
// plans and no price refresh (its catalog is the embedded snapshot). It
// stops when the test ends.
func StartBroker(tb testing.TB) Broker {
	tb.Helper()
	return StartBrokerWithPolicy(tb, "")
}

// StartBrokerWithPolicy is StartBroker with a policy file loaded (as
// `gpubroker serve -f FILE`), for its plan and budgets.
func StartBrokerWithPolicy(tb testing.TB, policyPath string) Broker {
	tb.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatalf("listening: %v", err)
	}
	out := &syncBuffer{}
	started := make(chan net.Addr, 1)
	cfg := broker.Config{PolicyPath: policyPath, DSN: filepath.Join(tb.TempDir(), "broker.db"), Listener: ln, Out: out,
		Plan: broker.OptimizerPlan, NoRefresh: true, Started: started, ShutdownGrace: 5 * time.Second}
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() { errc <- broker.Run(ctx, cfg) }()
	select {
	case <-started:
	case err := <-errc:
		cancel()
		tb.Fatalf("broker exited at start: %v", err)
	case <-time.After(30 * time.Second):
		cancel()
		tb.Fatal("broker did not start within 30s")
	}
	tb.Cleanup(func() {
		cancel()
		select {
		case err := <-errc:
			if err != nil {
				tb.Errorf("broker stopped with %v", err)
			}
		case <-time.After(30 * time.Second):
			tb.Error("broker did not stop within 30s")
		}
	})
	tok := tokenRE.FindString(out.String())
	if tok == "" {
		tb.Fatal("the broker printed no admin token on its first start")
	}
	return Broker{URL: "http://" + ln.Addr().String(), Token: tok}
}
