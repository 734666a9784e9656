//go:build !agentonly

package main

import (
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gpubroker/gpubroker/apiv1"
	"github.com/gpubroker/gpubroker/internal/testprom"
)

// requestCounter is a load generator's /metrics: a request counter that
// grows at a set rate, as a service's own counter does.
type requestCounter struct {
	mu    sync.Mutex
	rate  float64 // requests per second
	total float64
	last  time.Time
}

func (g *requestCounter) advance(now time.Time) {
	g.total += g.rate * now.Sub(g.last).Seconds()
	g.last = now
}

func (g *requestCounter) ServeHTTP(w http.ResponseWriter, _ *http.Request) {
	g.mu.Lock()
	g.advance(time.Now())
	total := g.total
	g.mu.Unlock()
	w.Header().Set("Content-Type", "text/plain; version=0.0.4")
	fmt.Fprintf(w, "# HELP chat_requests_total Requests served.\n# TYPE chat_requests_total counter\nchat_requests_total{service=\"chat\"} %f\n", total)
}

func (g *requestCounter) set(rate float64) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.advance(time.Now())
	g.rate = rate
}

func listenAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// TestAutoscaleEndToEnd runs `gpubroker serve` with a fleet in dry-run on
// the simulated cloud, an inference service whose policy scales it on a
// real Prometheus server's sum(rate(...)) of a load generator's request
// counter, and live spot hedging on: the load rises and the service's
// slots follow it up, the load drops and they come down after the
// scale-down window. (Nothing is launched in dry-run, so no replica is
// ready: the autoscaler sizes straight from the load, ceil(load ÷ 50), and
// the hedging stage, which has not yet seen the spot pools hold for long,
// keeps the whole target on demand.)
func TestAutoscaleEndToEnd(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end test; skipped with -short")
	}
	gen := &requestCounter{rate: 175, last: time.Now()}
	target := httptest.NewServer(gen)
	defer target.Close()
	prom := testprom.Start(t, strings.TrimPrefix(target.URL, "http://"))

	dir := t.TempDir()
	brokerAddr := listenAddr(t)
	policyYAML := fmt.Sprintf(`clouds: [aws]
workloads:
  - name: chat
    kind: inference
    gpu: {models: [T4], count: 1}
    replicas: {min: 1, max: 10}
    spot: prefer
    placement: {regions: [us-east-1]}
    autoscale:
      prometheus:
        url: http://%s
        query: sum(rate(chat_requests_total{service="chat"}[5s]))
        target_per_replica: 50
      scale_down_window: 3s
`, prom.Addr)
	serveYAML := `fleet:
  mode: dry-run
  interval: 300ms
  hedge_tick: 1s
  clouds:
    fake:
      pretend: aws
`
	for name, body := range map[string]string{"policy.yaml": policyYAML, "serve.yaml": serveYAML} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	cmd, token := startServe(t, dir, "--config", filepath.Join(dir, "serve.yaml"), "-f", filepath.Join(dir, "policy.yaml"),
		"--db", filepath.Join(dir, "broker.db"), "--listen", brokerAddr, "--no-refresh-on-start")
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		if t.Failed() {
			t.Logf("serve log (tail):\n%s", serveLogTail(dir, 6000))
		}
	})

	// replicas counts the service's slots in the fleet (the reconciler
	// records them in dry-run too; slots that left the plan are gone).
	replicas := func() (int, string) {
		req, _ := http.NewRequest(http.MethodGet, "http://"+brokerAddr+"/api/v1/fleet", nil)
		req.Header.Set("Authorization", "Bearer "+token)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return -1, err.Error()
		}
		defer resp.Body.Close()
		var st apiv1.FleetStatus
		if err := json.NewDecoder(resp.Body).Decode(&st); err != nil {
			return -1, err.Error()
		}
		n, od := 0, 0
		for _, s := range st.Slots {
			if s.Workload == "chat" && s.State != "gone" {
				n++
				if s.Capacity == "on-demand" {
					od++
				}
			}
		}
		return n, fmt.Sprintf("%d slots, %d on demand", n, od)
	}
	waitReplicas := func(want int, d time.Duration) {
		t.Helper()
		deadline := time.Now().Add(d)
		last := ""
		for time.Now().Before(deadline) {
			var n int
			if n, last = replicas(); n == want {
				return
			}
			time.Sleep(200 * time.Millisecond)
		}
		t.Fatalf("chat never reached %d replicas in %s: last %s", want, d, last)
	}
	// 175 requests/s over 50 per replica: 4 replicas.
	waitReplicas(4, 45*time.Second)
	// Load up: 375/s → 8.
	gen.set(375)
	waitReplicas(8, 30*time.Second)
	// Load down to 25/s → replicas.min, once the 3s scale-down window has
	// passed.
	gen.set(25)
	waitReplicas(1, 30*time.Second)
}
