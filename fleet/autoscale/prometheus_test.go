package autoscale

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gpubroker/gpubroker/internal/testprom"
)

func TestParseQueryResponse(t *testing.T) {
	cases := []struct {
		body string
		want float64
		err  string
	}{
		{`{"status":"success","data":{"resultType":"vector","result":[{"metric":{"pod":"a"},"value":[1700000000.1,"120.5"]},{"metric":{"pod":"b"},"value":[1700000000.1,"79.5"]}]}}`, 200, ""},
		{`{"status":"success","data":{"resultType":"scalar","result":[1700000000,"42"]}}`, 42, ""},
		{`{"status":"success","data":{"resultType":"vector","result":[]}}`, 0, "no data"},
		{`{"status":"success","data":{"resultType":"matrix","result":[]}}`, 0, "wrap a range in rate()"},
		{`{"status":"error","errorType":"bad_data","error":"parse error at char 5"}`, 0, "bad_data: parse error"},
		{`{"status":"success","data":{"resultType":"vector","result":[{"value":[1,"NaN"]}]}}`, 0, "not a finite number"},
		{`{"status":"success","data":{"resultType":"vector","result":[{"value":[1]}]}}`, 0, "not [time, value]"},
		{`<html>502 Bad Gateway</html>`, 0, "not a Prometheus answer"},
	}
	for _, c := range cases {
		v, err := parseQueryResponse(200, []byte(c.body))
		if c.err != "" {
			if err == nil || !strings.Contains(err.Error(), c.err) {
				t.Errorf("%s: err %v, want %q", c.body, err, c.err)
			}
			continue
		}
		if err != nil || v != c.want {
			t.Errorf("%s: %v %v, want %v", c.body, v, err, c.want)
		}
	}
}

// FuzzParseQueryResponse: any answer gives a finite number or an error.
func FuzzParseQueryResponse(f *testing.F) {
	f.Add([]byte(`{"status":"success","data":{"resultType":"vector","result":[{"metric":{},"value":[1,"3"]}]}}`))
	f.Add([]byte(`{"status":"success","data":{"resultType":"scalar","result":[1,"+Inf"]}}`))
	f.Add([]byte(`{"status":"error","errorType":"timeout","error":"query timed out"}`))
	f.Add([]byte(`{"status":"success","data":{"resultType":"vector","result":[{"value":[1,"1e309"]}]}}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		v, err := parseQueryResponse(200, body)
		if err == nil && (math.IsNaN(v) || math.IsInf(v, 0)) {
			t.Fatalf("accepted %v from %q", v, body)
		}
	})
}

func TestPrometheusHTTPErrors(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/api/v1/query" || r.URL.Query().Get("query") == "" || r.URL.Query().Get("time") == "" {
			t.Errorf("request %s", r.URL)
		}
		w.WriteHeader(http.StatusBadRequest)
		_, _ = fmt.Fprint(w, `{"status":"error","errorType":"bad_data","error":"1:5: parse error: unexpected end of input"}`)
	}))
	defer srv.Close()
	_, err := Prometheus{URL: srv.URL + "/", Query: "sum(rate("}.Value(context.Background())
	if err == nil || !strings.Contains(err.Error(), "HTTP 400: bad_data") {
		t.Errorf("err = %v", err)
	}
	_, err = Prometheus{URL: "http://127.0.0.1:1", Query: "up", HTTP: &http.Client{Timeout: time.Second}}.Value(context.Background())
	if err == nil {
		t.Error("unreachable server: no error")
	}
}

// loadGen exposes a counter that grows at a set rate, as a service's
// request counter does.
type loadGen struct {
	mu    sync.Mutex
	rate  float64 // requests per second
	total float64
	last  time.Time
}

func (g *loadGen) ServeHTTP(w http.ResponseWriter, _ *http.Request) {
	g.mu.Lock()
	now := time.Now()
	g.total += g.rate * now.Sub(g.last).Seconds()
	g.last = now
	total := g.total
	g.mu.Unlock()
	w.Header().Set("Content-Type", "text/plain; version=0.0.4")
	fmt.Fprintf(w, "# HELP chat_requests_total Requests served.\n# TYPE chat_requests_total counter\nchat_requests_total{service=\"chat\"} %f\n", total)
}

func (g *loadGen) set(rate float64) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.total += g.rate * time.Since(g.last).Seconds()
	g.last = time.Now()
	g.rate = rate
}

// TestRealPrometheus runs a real Prometheus server (Debian's prometheus)
// scraping a load generator every second, and scales a service on
// sum(rate(chat_requests_total[5s])) as the load rises and falls.
func TestRealPrometheus(t *testing.T) {
	gen := &loadGen{rate: 200, last: time.Now()}
	target := httptest.NewServer(gen)
	defer target.Close()
	prom := testprom.Start(t, strings.TrimPrefix(target.URL, "http://"))

	p := Prometheus{URL: "http://" + prom.Addr, Query: `sum(rate(chat_requests_total{service="chat"}[5s]))`}
	// wait until the rate is known (two scrapes inside the window).
	value := func() (float64, error) {
		ctx, c := context.WithTimeout(context.Background(), 5*time.Second)
		defer c()
		return p.Value(ctx)
	}
	waitLoad := func(lo, hi float64) float64 {
		t.Helper()
		deadline := time.Now().Add(30 * time.Second)
		var v float64
		var err error
		for time.Now().Before(deadline) {
			if v, err = value(); err == nil && v >= lo && v <= hi {
				return v
			}
			time.Sleep(500 * time.Millisecond)
		}
		t.Fatalf("load never reached [%v, %v]: last %v, %v\nprometheus logs:\n%s", lo, hi, v, err, prom.Logs())
		return 0
	}
	a := New(Config{Min: 1, Max: 20, TargetPerReplica: 50, ScaleDownWindow: 0}, 2)
	v := waitLoad(170, 230)
	d := a.Observe(Sample{At: time.Now(), Ready: 2, Load: &v})
	// ~200 req/s at 50 per replica → 4 (within ±10% tolerance bands).
	if d.Desired < 4 || d.Desired > 5 {
		t.Errorf("at %.0f req/s: %d replicas, want 4-5 (%s)", v, d.Desired, d.Reason)
	}
	gen.set(600)
	v = waitLoad(540, 660)
	d = a.Observe(Sample{At: time.Now(), Ready: a.Current(), Load: &v})
	if d.Desired < 8 {
		t.Errorf("at %.0f req/s: %d replicas, want ≥8 (%s)", v, d.Desired, d.Reason)
	}
	gen.set(40)
	v = waitLoad(30, 50)
	d = a.Observe(Sample{At: time.Now(), Ready: a.Current(), Load: &v})
	if d.Desired != 1 {
		t.Errorf("at %.0f req/s: %d replicas, want 1 (%s)", v, d.Desired, d.Reason)
	}
	// A query for a metric that does not exist is ErrNoData, not zero load.
	_, err := Prometheus{URL: "http://" + prom.Addr, Query: `sum(rate(nothing_total[5s]))`}.Value(context.Background())
	if !errors.Is(err, ErrNoData) {
		t.Errorf("missing metric: %v, want ErrNoData", err)
	}
}
