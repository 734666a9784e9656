package broker

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// syncBuffer is a bytes.Buffer safe for the daemon's goroutines.
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

var tokenRE = regexp.MustCompile(`gpb_[A-Za-z0-9_-]{43}`)

type running struct {
	url     string
	out     *syncBuffer
	logs    *syncBuffer
	cancel  context.CancelFunc
	errc    chan error
	stopped bool
}

func startDaemon(t *testing.T, cfg Config) *running {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	r := &running{out: &syncBuffer{}, logs: &syncBuffer{}, errc: make(chan error, 1)}
	cfg.Listener = ln
	cfg.Out = r.out
	cfg.Logger = slog.New(slog.NewJSONHandler(r.logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	started := make(chan net.Addr, 1)
	cfg.Started = started
	ctx, cancel := context.WithCancel(context.Background())
	r.cancel = cancel
	go func() { r.errc <- Run(ctx, cfg) }()
	select {
	case addr := <-started:
		r.url = "http://" + addr.String()
	case err := <-r.errc:
		t.Fatalf("daemon exited at start: %v", err)
	case <-time.After(20 * time.Second):
		t.Fatal("daemon did not start")
	}
	t.Cleanup(func() { r.stop(t) })
	return r
}

func (r *running) stop(t *testing.T) {
	if r.stopped {
		return
	}
	r.stopped = true
	r.cancel()
	select {
	case err := <-r.errc:
		if err != nil {
			t.Errorf("daemon returned %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Error("daemon did not stop")
	}
}

func request(t *testing.T, method, url, token, body string) (int, []byte) {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, b
}

// TestRunFirstStart checks the admin token is printed once, only to the
// output, never logged and never stored in clear, and that the loaded
// policy is planned by the real optimizer.
func TestRunFirstStart(t *testing.T) {
	dir := t.TempDir()
	db := filepath.Join(dir, "broker.db")
	cfg := Config{DSN: db, PolicyPath: "../examples/minimal.yaml", Plan: OptimizerPlan, NoRefresh: true}
	r := startDaemon(t, cfg)
	tok := tokenRE.FindString(r.out.String())
	if tok == "" {
		t.Fatalf("no admin token printed: %q", r.out.String())
	}
	if !strings.Contains(r.out.String(), "listening on "+r.url) {
		t.Errorf("listen address not printed: %q", r.out.String())
	}
	code, body := request(t, "GET", r.url+"/api/v1/plan", tok, "")
	if code != 200 {
		t.Fatalf("plan: %d %s", code, body)
	}
	var plan struct {
		Policy     string
		Placements []struct{ Workload string }
	}
	if err := json.Unmarshal(body, &plan); err != nil || len(plan.Placements) == 0 {
		t.Fatalf("plan body %s: %v", body, err)
	}
	code, body = request(t, "POST", r.url+"/api/v1/plan?name=posted.yaml", tok, "workloads:\n  - name: x\n    kind: trainin\n")
	if code != 400 || !strings.Contains(string(body), "posted.yaml:3:") {
		t.Fatalf("bad posted policy: %d %s; want 400 with file:line:col", code, body)
	}
	code, _ = request(t, "GET", r.url+"/readyz", "", "")
	if code != 200 {
		t.Fatalf("readyz %d", code)
	}
	code, body = request(t, "GET", r.url+"/metrics", "", "")
	if code != 200 || !strings.Contains(string(body), "gpubroker_plan_cost_usd ") || !strings.Contains(string(body), "gpubroker_leader 1") {
		t.Fatalf("metrics %d lack plan cost or leader:\n%s", code, body)
	}
	r.stop(t)

	r2 := startDaemon(t, cfg)
	if strings.Contains(r2.out.String(), "gpb_") {
		t.Fatalf("second start printed a token again: %q", r2.out.String())
	}
	if code, body := request(t, "GET", r2.url+"/api/v1/workloads", tok, ""); code != 200 {
		t.Fatalf("first token after restart: %d %s", code, body)
	}
	r2.stop(t)
	for _, logs := range []string{r.logs.String(), r2.logs.String()} {
		if strings.Contains(logs, tok) {
			t.Fatal("the admin token appears in the logs")
		}
	}
	for _, f := range []string{db, db + "-wal"} {
		b, err := os.ReadFile(f)
		if err != nil && !os.IsNotExist(err) {
			t.Fatal(err)
		}
		if bytes.Contains(b, []byte(tok)) {
			t.Fatalf("the admin token is stored in clear in %s", f)
		}
	}
}

// TestRunFinishesJobsOnShutdown stops the daemon while a job runs: the job
// completes with its context intact and its run is recorded as finished.
func TestRunFinishesJobsOnShutdown(t *testing.T) {
	db := filepath.Join(t.TempDir(), "broker.db")
	started := make(chan struct{})
	var once sync.Once
	var finished, cancelled atomic.Bool
	job := Job{Name: "slow", Schedule: "@every 100ms", Run: func(ctx context.Context) error {
		if finished.Load() {
			return nil
		}
		once.Do(func() { close(started) })
		select {
		case <-time.After(700 * time.Millisecond):
			finished.Store(true)
		case <-ctx.Done():
			cancelled.Store(true)
		}
		return nil
	}}
	r := startDaemon(t, Config{DSN: db, NoRefresh: true, ExtraJobs: []Job{job}, ShutdownGrace: 10 * time.Second})
	select {
	case <-started:
	case <-time.After(10 * time.Second):
		t.Fatal("job never started")
	}
	begin := time.Now()
	r.stop(t)
	if !finished.Load() || cancelled.Load() {
		t.Fatalf("job finished=%v cancelled=%v; shutdown must let it finish", finished.Load(), cancelled.Load())
	}
	t.Logf("shutdown waited %s for the job", time.Since(begin))
	runs, err := openBroker(t, db).ListJobRuns(context.Background(), "slow")
	if err != nil || len(runs) == 0 || runs[0].FinishedAt.IsZero() {
		t.Fatalf("job runs %+v, %v: the run must be recorded as finished", runs, err)
	}
}

func TestRunBadConfig(t *testing.T) {
	for _, c := range []struct {
		name string
		cfg  Config
		want string
	}{
		{"missing policy", Config{PolicyPath: "nope.yaml", DSN: filepath.Join(t.TempDir(), "a.db")}, "reading the policy"},
		{"bad policy", Config{PolicyPath: "testdata/bad-policy.yaml", Plan: OptimizerPlan, DSN: filepath.Join(t.TempDir(), "b.db")}, "bad-policy.yaml:"},
		{"bad dsn", Config{DSN: "mysql://x"}, "unsupported scheme"},
		{"bad schedule", Config{DSN: filepath.Join(t.TempDir(), "c.db"), ReplanSchedule: "sometimes", Plan: OptimizerPlan}, "schedule"},
		{"renew over ttl", Config{LeaseTTL: time.Second, LeaseRenew: 2 * time.Second}, "must be shorter"},
	} {
		t.Run(c.name, func(t *testing.T) {
			c.cfg.Listen = "127.0.0.1:0"
			err := Run(context.Background(), c.cfg)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("err %v; want it to mention %q", err, c.want)
			}
		})
	}
}

// scanAddr reads a child's output until its listen line.
func scanAddr(r io.Reader, lines chan<- string) {
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		lines <- sc.Text()
	}
	close(lines)
}
