package broker

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/gpubroker/gpubroker/broker/httpapi"
	"github.com/gpubroker/gpubroker/dashboard"
	"github.com/gpubroker/gpubroker/pricing"
	"github.com/gpubroker/gpubroker/store"
)

// BenchmarkDashboardPages renders each dashboard page from a real SQLite
// store holding 10,000 agents' instances and 50,000 events, through the
// broker's adapters, as a logged-in browser requests them. It reports the
// server time per page and the page's weight (B/page).
func BenchmarkDashboardPages(b *testing.B) {
	const instances, events = 10_000, 50_000
	ctx := context.Background()
	now := time.Now().UTC()
	path := filepath.Join(b.TempDir(), "bench.db")
	// GPUBROKER_BENCH_DB keeps the seeded database between runs (seeding
	// takes about a minute); an existing file there is used as it is.
	reuse := false
	if p := os.Getenv("GPUBROKER_BENCH_DB"); p != "" {
		path = p
		_, err := os.Stat(p)
		reuse = err == nil
	}
	st, err := store.Open(ctx, path, nil)
	if err != nil {
		b.Fatal(err)
	}
	defer st.Close()
	br, err := st.Broker(ctx)
	if err != nil {
		b.Fatal(err)
	}
	if !reuse {
		seedDashboard(b, br, instances, events, now)
	}

	cat, err := pricing.EmbeddedCatalog()
	if err != nil {
		b.Fatal(err)
	}
	planner := &policyPlanner{plan: OptimizerPlan, catalog: func() *pricing.Catalog { return cat }, now: time.Now,
		policyName: "../examples/fleet.yaml", policy: mustRead(b, "../examples/fleet.yaml"), metrics: httpapi.NewMetrics(nil),
		store: br, log: slog.New(slog.DiscardHandler)}
	api := httpapi.New(httpapi.Config{Store: br, Catalog: func() *pricing.Catalog { return cat }})
	tok, hash, _ := httpapi.NewToken()
	if err := br.AddToken(ctx, store.TokenRecord{Hash: hash, Kind: store.TokenAdmin, Subject: "bench", CreatedAt: now}); err != nil {
		b.Fatal(err)
	}
	ds := dashStore{st: st, b: br}
	dash, err := dashboard.New(dashboard.Config{Auth: api, Offers: dashboard.OffersFunc(func() *pricing.Catalog { return cat }),
		History: ds, Plan: dashPlan{planner}, Budgets: dashPlan{planner}, Agents: ds, Benchmarks: ds, Events: ds,
		// The seeded heartbeats may be from an earlier run (reused DB).
		ActiveWithin: 365 * 24 * time.Hour})
	if err != nil {
		b.Fatal(err)
	}
	h := dash.Handler()
	cookie := benchLogin(b, h, tok)

	for _, p := range []string{"/", "/ui/fleet", "/ui/fleet?page=50", "/ui/fleet?workload=workload-007", "/ui/events",
		"/ui/events?kind=preemption_notice&before=30000", "/ui/prices", "/ui/plan", "/ui/budgets"} {
		name := strings.NewReplacer("/ui/", "", "?", "_", "=", "-", "&", "_").Replace(p)
		if p == "/" {
			name = "overview"
		}
		b.Run(name, func(b *testing.B) {
			var size int
			for b.Loop() {
				req := httptest.NewRequest(http.MethodGet, p, nil)
				req.AddCookie(cookie)
				rec := httptest.NewRecorder()
				h.ServeHTTP(rec, req)
				if rec.Code != http.StatusOK {
					b.Fatalf("%s: %d", p, rec.Code)
				}
				size = rec.Body.Len()
			}
			b.ReportMetric(float64(size), "B/page")
		})
	}
}

// seedDashboard stores instances with heartbeats and events (one
// "registered" event per instance, the rest of other kinds).
func seedDashboard(b *testing.B, br *store.Broker, instances, events int, now time.Time) {
	ctx := context.Background()
	seedStart := time.Now()
	tel, _ := json.Marshal([]map[string]any{{"index": 0, "name": "NVIDIA H100 80GB HBM3", "util_gpu_pct": 93, "memory_used_mib": 70000,
		"memory_total_mib": 81559, "temperature_c": 63, "power_w": 610}})
	var ups []store.HeartbeatUpdate
	clouds := []string{"aws", "gcp", "azure"}
	for i := range instances {
		id := fmt.Sprintf("i-%08d", i)
		rec := store.InstanceRecord{ID: id, Hostname: id, Cloud: clouds[i%3], Region: "us-east-1", Zone: "us-east-1a",
			InstanceType: "p5.48xlarge", GPU: "H100", GPUCount: 8, Capacity: []string{"spot", "on-demand"}[i%2],
			Workload: fmt.Sprintf("workload-%03d", i%200)}
		if _, err := br.RegisterAgent(ctx, rec, httpapi.HashToken(id), now.Add(-time.Hour)); err != nil {
			b.Fatal(err)
		}
		ups = append(ups, store.HeartbeatUpdate{Instance: id, At: now, Load1: 2, Utilization: 90, Telemetry: tel})
		if len(ups) == 500 {
			if _, err := br.Heartbeats(ctx, ups); err != nil {
				b.Fatal(err)
			}
			ups = ups[:0]
		}
	}
	// RegisterAgent recorded one event per instance; add the rest.
	kinds := []string{"preemption_notice", "drained", "price_change", "launched", "budget_alert"}
	for i := range events - instances {
		if _, err := br.AddEvent(ctx, store.EventRecord{At: now.Add(-time.Duration(events-i) * time.Second), Kind: kinds[i%len(kinds)],
			Instance: fmt.Sprintf("i-%08d", i%instances), Workload: fmt.Sprintf("workload-%03d", i%200), Message: "benchmark event"}); err != nil {
			b.Fatal(err)
		}
	}
	if n, err := br.CountEvents(ctx); err != nil || n != int64(events) {
		b.Fatalf("%d events, %v", n, err)
	}
	b.Logf("seeded %d instances and %d events in %s", instances, events, time.Since(seedStart).Round(time.Millisecond))
}

func mustRead(b *testing.B, path string) []byte {
	data, err := readPolicy(path)
	if err != nil {
		b.Fatal(err)
	}
	return data
}

// benchLogin logs in through the form and returns the session cookie.
func benchLogin(b *testing.B, h http.Handler, token string) *http.Cookie {
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/ui/login", nil))
	body, _ := io.ReadAll(rec.Body)
	m := regexp.MustCompile(`name="csrf" value="([^"]+)"`).FindSubmatch(body)
	if m == nil {
		b.Fatal("no CSRF token on the login form")
	}
	form := url.Values{"csrf": {string(m[1])}, "token": {token}}
	req := httptest.NewRequest(http.MethodPost, "/ui/login", strings.NewReader(form.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	for _, c := range rec.Result().Cookies() {
		req.AddCookie(c)
	}
	rec = httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	for _, c := range rec.Result().Cookies() {
		if c.Name == "gpubroker_session" && c.Value != "" {
			return c
		}
	}
	b.Fatalf("login failed: %d", rec.Code)
	return nil
}
