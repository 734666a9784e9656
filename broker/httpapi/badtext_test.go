package httpapi_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gpubroker/gpubroker/apiv1"
	"github.com/gpubroker/gpubroker/broker/httpapi"
	"github.com/gpubroker/gpubroker/internal/testpg"
	"github.com/gpubroker/gpubroker/pricing"
	"github.com/gpubroker/gpubroker/store"
)

// badTextCase is one request that carries text no client may store: it
// must be answered 400 (or 422 where said) with a message naming the
// problem, on every store.
type badTextCase struct {
	name   string
	method string
	path   string // relative; "%s" is the agent id
	key    []string
	body   string
	agent  bool // send with the agent's token instead of the admin's
	status int
	msg    string
}

// BadTextCases are shared with the fuzz seeds (FuzzRequestText).
var badTextCases = []badTextCase{
	// JSON string values and keys, top level and nested, raw and escaped.
	{"NUL in a name (escaped)", "POST", "/api/v1/workloads", nil, `{"name":"a\u0000b","kind":"batch"}`, false, 400, `"name"`},
	{"invalid UTF-8 in a team", "POST", "/api/v1/workloads", nil, "{\"name\":\"a\",\"team\":\"t\xff\",\"kind\":\"batch\"}", false, 400, "not valid UTF-8"},
	{"NUL in a spec value", "POST", "/api/v1/workloads", nil, `{"name":"a","kind":"batch","spec":{"work":{"note":"x\u0000"}}}`, false, 400, "U+0000"},
	{"invalid UTF-8 in a spec", "POST", "/api/v1/workloads", nil, "{\"name\":\"a\",\"kind\":\"batch\",\"spec\":{\"x\":\"\xc3\x28\"}}", false, 400, "not valid UTF-8"},
	{"lone surrogate in a spec", "POST", "/api/v1/workloads", nil, `{"name":"a","kind":"batch","spec":{"x":"\ud800"}}`, false, 400, "U+FFFD"},
	{"control character in a spec key", "POST", "/api/v1/workloads", nil, `{"name":"a","kind":"batch","spec":{"a\u0001":1}}`, false, 400, "the key"},
	{"C1 control in a value", "POST", "/api/v1/workloads", nil, `{"name":"a","kind":"batch","spec":{"x":"\u0085"}}`, false, 400, "U+0085"},
	{"NUL in PUT", "PUT", "/api/v1/workloads/a", nil, `{"kind":"batch","team":"\u0000"}`, false, 400, "U+0000"},
	{"NUL in a heartbeat gpu name", "POST", "/api/v1/agents/%s/heartbeat", nil, `{"gpus":[{"index":0,"name":"T4\u0000"}]}`, true, 400, "U+0000"},
	{"invalid UTF-8 in a heartbeat", "POST", "/api/v1/agents/%s/heartbeat", nil, "{\"gpus\":[{\"index\":0,\"name\":\"\xfe\xff\"}]}", true, 400, "not valid UTF-8"},
	{"NUL in gpu_error", "POST", "/api/v1/agents/%s/heartbeat", nil, `{"gpu_error":"\u0000"}`, true, 400, "gpu_error"},
	{"NUL in a notice detail", "POST", "/api/v1/agents/%s/notices", nil, `{"kind":"rebalance","id":"n1","detail":"\u0000"}`, true, 400, "detail"},
	{"invalid UTF-8 in notice raw", "POST", "/api/v1/agents/%s/notices", nil, "{\"kind\":\"rebalance\",\"id\":\"n2\",\"raw\":{\"x\":\"\xff\"}}", true, 400, "not valid UTF-8"},
	{"NUL in a drain step error", "POST", "/api/v1/agents/%s/drains", nil, `{"ok":false,"steps":[{"name":"s","status":"failed","error":"\u0000"}]}`, true, 400, "U+0000"},
	{"invalid UTF-8 in a hostname", "POST", "/api/v1/agents/register", nil, "{\"hostname\":\"h\xff\",\"cloud\":\"aws\",\"instance_id\":\"i-9\"}", false, 400, "not valid UTF-8"},
	{"NUL in a benchmark gpu name", "POST", "/api/v1/agents/%s/benchmarks", nil, `{"gpus":[{"index":0,"model":"T4","name":"\u0000","tflops":1}]}`, true, 400, "U+0000"},
	{"NUL in a token name", "POST", "/api/v1/tokens", nil, `{"kind":"admin","name":"\u0000"}`, false, 400, "U+0000"},
	// Ids and names in the path.
	{"NUL in a workload path", "GET", "/api/v1/workloads/a%00b", nil, "", false, 400, "request path"},
	{"invalid UTF-8 in a workload path", "DELETE", "/api/v1/workloads/%ff", nil, "", false, 400, "not valid UTF-8"},
	{"invalid UTF-8 in an instance id", "GET", "/api/v1/instances/%C3%28", nil, "", false, 400, "not valid UTF-8"},
	{"NUL in an agent id", "POST", "/api/v1/agents/i%00x/heartbeat", nil, `{}`, true, 400, "request path"},
	{"NUL in an unknown route", "GET", "/api/v1/%00", nil, "", false, 400, "request path"},
	// Query parameters: values, names, encoding, unknown names.
	{"NUL in a query value", "GET", "/api/v1/events?kind=%00", nil, "", false, 400, "query parameter kind"},
	{"invalid UTF-8 in a query value", "GET", "/api/v1/events?instance=%ff", nil, "", false, 400, "not valid UTF-8"},
	{"invalid UTF-8 in a query name", "GET", "/api/v1/offers?%ff=1", nil, "", false, 400, "query parameter name"},
	{"bad query encoding", "GET", "/api/v1/events?kind=%zz", nil, "", false, 400, "does not parse"},
	{"unknown query parameter on workloads", "GET", "/api/v1/workloads?x=1", nil, "", false, 400, "takes no query parameters"},
	{"unknown query parameter on plan", "GET", "/api/v1/plan?verbose=1", nil, "", false, 400, "unknown query parameter"},
	{"unknown query parameter on benchmarks", "GET", "/api/v1/benchmarks?gpu=T4", nil, "", false, 400, "known: instance_type"},
	{"unknown query parameter on an agent route", "POST", "/api/v1/agents/%s/heartbeat?debug=1", nil, `{}`, true, 400, "unknown query parameter"},
	// Idempotency-Key.
	{"invalid UTF-8 Idempotency-Key", "POST", "/api/v1/agents/%s/notices", []string{"k\xff"}, `{"kind":"rebalance","id":"n3"}`, true, 400, "Idempotency-Key"},
	{"Idempotency-Key too long", "POST", "/api/v1/agents/%s/notices", []string{strings.Repeat("k", 201)}, `{"kind":"rebalance","id":"n4"}`, true, 400, "Idempotency-Key"},
	{"Idempotency-Key twice", "POST", "/api/v1/agents/%s/notices", []string{"a", "b"}, `{"kind":"rebalance","id":"n5"}`, true, 400, "once"},
	// A policy body (YAML).
	{"NUL in a posted policy", "POST", "/api/v1/plan", nil, "workloads: []\x00", false, 400, "U+0000"},
	{"invalid UTF-8 in a posted policy", "POST", "/api/v1/plan", nil, "workloads: [\xff]", false, 400, "not valid UTF-8"},
}

func (e *env) send(c badTextCase, agentTok string) (int, []byte) {
	e.t.Helper()
	path := c.path
	if strings.Contains(path, "%s") {
		path = fmt.Sprintf(path, "i-ok")
	}
	req, err := http.NewRequest(c.method, e.srv.URL+path, strings.NewReader(c.body))
	if err != nil {
		e.t.Fatal(err)
	}
	if c.body != "" && !strings.HasPrefix(c.body, "workloads") {
		req.Header.Set("Content-Type", "application/json")
	}
	tok := e.admin
	if c.agent {
		tok = agentTok
	}
	req.Header.Set("Authorization", "Bearer "+tok)
	for _, k := range c.key {
		req.Header.Add("Idempotency-Key", k)
	}
	resp, err := e.srv.Client().Do(req)
	if err != nil {
		e.t.Fatalf("%s: %v", c.name, err)
	}
	defer resp.Body.Close()
	out, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, out
}

// TestBadTextOnEveryStore sends each bad-text case to the real handlers on
// SQLite and PostgreSQL: a 400 naming the problem, never a 500, nothing
// stored; afterwards the broker answers the same client's good requests and
// everything it serves is valid JSON.
func TestBadTextOnEveryStore(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *env) {
		agentTok := e.register("i-ok", "")
		for _, c := range badTextCases {
			code, out := e.send(c, agentTok)
			if code != c.status {
				t.Errorf("%s: status %d, want %d: %s", c.name, code, c.status, out)
				continue
			}
			if !json.Valid(out) {
				t.Errorf("%s: the answer is not valid JSON: %q", c.name, out)
				continue
			}
			eb := decode[errBody](t, out)
			if eb.Error.Code != "bad_request" || !strings.Contains(eb.Error.Message, c.msg) {
				t.Errorf("%s: error %+v; want bad_request mentioning %q", c.name, eb.Error, c.msg)
			}
		}
		// Nothing of it was stored, and the good requests still work.
		e.want("POST", "/api/v1/agents/i-ok/heartbeat", agentTok, map[string]any{"load1": 1}, http.StatusOK)
		e.want("POST", "/api/v1/workloads", e.admin, map[string]any{"name": "ok", "kind": "batch", "spec": map[string]any{"note": "tab\tand\nnewline are fine"}}, http.StatusCreated)
		for _, p := range []string{"/api/v1/workloads", "/api/v1/events?limit=1000", "/api/v1/instances"} {
			out := e.want("GET", p, e.admin, nil, http.StatusOK)
			if !json.Valid(out) || strings.Contains(string(out), `\u0000`) {
				t.Errorf("GET %s serves %s", p, out)
			}
		}
		ws := decode[struct {
			Items []apiv1.Workload `json:"items"`
		}](t, e.want("GET", "/api/v1/workloads", e.admin, nil, http.StatusOK))
		if len(ws.Items) != 1 {
			t.Errorf("workloads %v; only the good one may be stored", ws.Items)
		}
	})
}

// TestIdempotencyKeyReusedWithAnotherBody: the same key and body is a
// duplicate (202), the same key with another body a 422 that changes
// nothing, on every store.
func TestIdempotencyKeyReusedWithAnotherBody(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *env) {
		tok := e.register("i-1", "")
		first := `{"kind":"rebalance","id":"n1","detail":"first"}`
		if code, out := e.postKey("/api/v1/agents/i-1/notices", tok, "key-1", first); code != http.StatusAccepted {
			t.Fatalf("first report: %d %s", code, out)
		}
		code, out := e.postKey("/api/v1/agents/i-1/notices", tok, "key-1", first)
		if code != http.StatusAccepted || !strings.Contains(string(out), `"duplicate":true`) {
			t.Fatalf("repeat: %d %s; want 202 duplicate", code, out)
		}
		code, out = e.postKey("/api/v1/agents/i-1/notices", tok, "key-1", `{"kind":"rebalance","id":"n1","detail":"second"}`)
		if code != http.StatusUnprocessableEntity {
			t.Fatalf("same key, other body: %d %s; want 422", code, out)
		}
		if eb := decode[errBody](t, out); eb.Error.Code != "idempotency_key_reused" {
			t.Fatalf("error %+v", eb.Error)
		}
		evs := decode[struct {
			Items []apiv1.Event `json:"items"`
		}](t, e.want("GET", "/api/v1/events?instance=i-1&kind=notice", e.admin, nil, http.StatusOK))
		if len(evs.Items) != 1 || !strings.Contains(evs.Items[0].Message, "first") {
			t.Fatalf("events %+v; want only the first report", evs.Items)
		}
	})
}

// TestGarbageAgentDoesNotFailOthers: one agent sends garbage as fast as it
// can while 1,000 others heartbeat; every one of their heartbeats succeeds.
func TestGarbageAgentDoesNotFailOthers(t *testing.T) {
	if testing.Short() {
		t.Skip("1,000 agents: not in -short")
	}
	forEachBackend(t, func(t *testing.T, e *env) {
		const agents, beats = 1000, 3
		ctx := context.Background()
		toks := make([]string, agents)
		for i := range toks {
			tok, hash, err := httpapi.NewToken()
			if err != nil {
				t.Fatal(err)
			}
			id := fmt.Sprintf("i-%04d", i)
			if _, err := e.broker.RegisterAgent(ctx, store.InstanceRecord{ID: id, Cloud: "aws"}, hash, time.Now()); err != nil {
				t.Fatal(err)
			}
			toks[i] = tok
		}
		badTok := e.register("i-bad", "")
		garbage := []string{
			"{\"gpus\":[{\"index\":0,\"name\":\"\xff\xfe\"}]}", `{"gpus":[{"index":0,"name":"\u0000"}]}`,
			`{"gpu_error":"\ud800"}`, `{"load1":"x"}`, `{`, "\x00\x00", `{"gpus":[{"index":0,"util_gpu_pct":1e999}]}`,
		}
		tr := &http.Transport{MaxIdleConnsPerHost: 128}
		defer tr.CloseIdleConnections()
		client := &http.Client{Transport: tr, Timeout: 60 * time.Second}
		post := func(id, tok, body string) (int, error) {
			req, _ := http.NewRequest("POST", e.srv.URL+"/api/v1/agents/"+id+"/heartbeat", strings.NewReader(body))
			req.Header.Set("Authorization", "Bearer "+tok)
			req.Header.Set("Content-Type", "application/json")
			resp, err := client.Do(req)
			if err != nil {
				return 0, err
			}
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			return resp.StatusCode, nil
		}
		stop := make(chan struct{})
		var garbageSent, garbage400 atomic.Int64
		var gwg sync.WaitGroup
		gwg.Add(1)
		go func() {
			defer gwg.Done()
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				code, err := post("i-bad", badTok, garbage[i%len(garbage)])
				garbageSent.Add(1)
				if err == nil && code == http.StatusBadRequest {
					garbage400.Add(1)
				}
			}
		}()
		var failures atomic.Int64
		var firstErr atomic.Value
		sem := make(chan struct{}, 100)
		var wg sync.WaitGroup
		for k := range beats {
			for i := range agents {
				wg.Add(1)
				sem <- struct{}{}
				go func() {
					defer wg.Done()
					defer func() { <-sem }()
					code, err := post(fmt.Sprintf("i-%04d", i), toks[i], fmt.Sprintf(`{"load1":%d,"gpus":[{"index":0,"util_gpu_pct":50}]}`, k+1))
					if err != nil || code != http.StatusOK {
						failures.Add(1)
						firstErr.CompareAndSwap(nil, fmt.Sprintf("agent %d beat %d: %d %v", i, k, code, err))
					}
				}()
			}
		}
		wg.Wait()
		close(stop)
		gwg.Wait()
		if n := failures.Load(); n != 0 {
			t.Fatalf("%d of %d heartbeats failed while one agent sent garbage; first: %v", n, agents*beats, firstErr.Load())
		}
		if garbageSent.Load() == 0 || garbage400.Load() != garbageSent.Load() {
			t.Fatalf("garbage: %d sent, %d answered 400; want every one refused", garbageSent.Load(), garbage400.Load())
		}
		t.Logf("%d heartbeats of %d agents all succeeded beside %d garbage requests", agents*beats, agents, garbageSent.Load())
		total, active, err := e.broker.CountInstances(ctx, time.Now().Add(-time.Minute))
		if err != nil || active != agents || total != agents+1 {
			t.Fatalf("instances %d, active %d (%v); want %d active", total, active, err, agents)
		}
	})
}

// proxy is a TCP proxy to PostgreSQL that the test can cut, as a network
// outage or a database restart would.
type proxy struct {
	ln     net.Listener
	target string
	mu     sync.Mutex
	conns  []net.Conn
	cut    bool
}

func newProxy(t *testing.T, target string) *proxy {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &proxy{ln: ln, target: target}
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			p.mu.Lock()
			if p.cut {
				p.mu.Unlock()
				c.Close()
				continue
			}
			u, err := net.Dial("tcp", target)
			if err != nil {
				p.mu.Unlock()
				c.Close()
				continue
			}
			p.conns = append(p.conns, c, u)
			p.mu.Unlock()
			go func() { _, _ = io.Copy(u, c); u.Close() }()
			go func() { _, _ = io.Copy(c, u); c.Close() }()
		}
	}()
	t.Cleanup(func() { p.ln.Close(); p.cutNow() })
	return p
}

func (p *proxy) cutNow() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.cut = true
	for _, c := range p.conns {
		c.Close()
	}
	p.conns = nil
}

// TestDatabaseOutage cuts the connection to PostgreSQL under a running API:
// requests get 503 with Retry-After, /readyz says not ready, and no answer
// names the database's user, host or port.
func TestDatabaseOutage(t *testing.T) {
	dsn := testpg.DSN(t)
	u, err := url.Parse(dsn)
	if err != nil {
		t.Fatal(err)
	}
	p := newProxy(t, u.Host)
	realHost := u.Host
	u.Host = p.ln.Addr().String()
	ctx := context.Background()
	st, err := store.Open(ctx, u.String(), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	b, _ := st.Broker(ctx)
	tok, hash, _ := httpapi.NewToken()
	if _, err := b.EnsureFirstAdminToken(ctx, hash, "test", time.Now()); err != nil {
		t.Fatal(err)
	}
	agentTok, agentHash, _ := httpapi.NewToken()
	if _, err := b.RegisterAgent(ctx, store.InstanceRecord{ID: "i-1", Cloud: "aws"}, agentHash, time.Now()); err != nil {
		t.Fatal(err)
	}
	cat, _ := pricing.EmbeddedCatalog()
	api := httpapi.New(httpapi.Config{Store: b, Catalog: func() *pricing.Catalog { return cat }, Ready: b.Ping, Logger: slog.New(slog.NewTextHandler(testWriter{t}, nil))})
	srv := httptest.NewServer(api.Handler())
	defer srv.Close()
	call := func(method, path, token, body string) (int, http.Header, string) {
		req, _ := http.NewRequest(method, srv.URL+path, strings.NewReader(body))
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := srv.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		out, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, resp.Header, string(out)
	}
	// Warm the token cache, as a running broker's would be.
	if code, _, out := call("GET", "/api/v1/workloads", tok, ""); code != 200 {
		t.Fatalf("before the outage: %d %s", code, out)
	}
	if code, _, out := call("POST", "/api/v1/agents/i-1/heartbeat", agentTok, `{}`); code != 200 {
		t.Fatalf("before the outage: %d %s", code, out)
	}
	if code, _, _ := call("GET", "/readyz", "", ""); code != 200 {
		t.Fatal("not ready before the outage")
	}
	p.cutNow()
	secret := []string{u.User.Username(), realHost, p.ln.Addr().String(), "127.0.0.1", u.Path}
	for _, r := range []struct{ method, path, token, body string }{
		{"GET", "/api/v1/workloads", tok, ""},
		{"POST", "/api/v1/agents/i-1/heartbeat", agentTok, `{}`},
		{"POST", "/api/v1/agents/i-1/notices", agentTok, `{"kind":"rebalance","id":"n"}`},
		{"GET", "/readyz", "", ""},
	} {
		code, h, out := call(r.method, r.path, r.token, r.body)
		if code != http.StatusServiceUnavailable {
			t.Errorf("%s %s during the outage: %d %s; want 503", r.method, r.path, code, out)
		}
		if r.path != "/readyz" && h.Get("Retry-After") == "" {
			t.Errorf("%s %s: 503 without Retry-After", r.method, r.path)
		}
		for _, s := range secret {
			if s != "" && s != "/" && strings.Contains(out, s) {
				t.Errorf("%s %s answer %q names %q", r.method, r.path, out, s)
			}
		}
		if r.path == "/readyz" && !strings.Contains(out, "not ready") {
			t.Errorf("/readyz: %s", out)
		}
	}
	if err := b.Ping(ctx); err == nil || !store.IsUnavailable(err) {
		t.Errorf("Ping during the outage = %v; want an unavailable error", err)
	}
	if errors.Is(ctx.Err(), context.Canceled) {
		t.Fatal("unreachable")
	}
}

type testWriter struct{ t *testing.T }

func (w testWriter) Write(b []byte) (int, error) {
	w.t.Log(strings.TrimSpace(string(b)))
	return len(b), nil
}

// FuzzRequestText sends arbitrary paths, queries, Idempotency-Keys and
// bodies through the real router and handlers (SQLite store) for a
// registered agent. Seeds are every badTextCases entry. Whatever comes in,
// the answer is never a 5xx and always valid JSON.
func FuzzRequestText(f *testing.F) {
	for _, c := range badTextCases {
		key := ""
		if len(c.key) > 0 {
			key = c.key[0]
		}
		f.Add(c.method, c.path, key, c.body, c.agent)
	}
	f.Add("POST", "/api/v1/agents/%s/heartbeat", "", `{"load1":1}`, true)
	f.Add("POST", "/api/v1/workloads", "", `{"name":"ok","kind":"batch","spec":{"work":{"gpu_hours":1}}}`, false)
	f.Add("GET", "/api/v1/spend?since=2026-11-01&until=2026-12-01&by=team", "", "", false)
	f.Add("GET", "/api/v1/spend?since=9999-99-99&by=%ff", "", "", false)
	ctx := context.Background()
	st, err := store.Open(ctx, f.TempDir()+"/fuzz.db", nil)
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { _ = st.Close() })
	b, _ := st.Broker(ctx)
	admin, hash, _ := httpapi.NewToken()
	agentTok, agentHash, _ := httpapi.NewToken()
	if _, err := b.EnsureFirstAdminToken(ctx, hash, "fuzz", time.Now()); err != nil {
		f.Fatal(err)
	}
	if _, err := b.RegisterAgent(ctx, store.InstanceRecord{ID: "i-ok", Cloud: "aws"}, agentHash, time.Now()); err != nil {
		f.Fatal(err)
	}
	cat, _ := pricing.EmbeddedCatalog()
	// One broker for every input: state carries over, as in production.
	srv := httptest.NewServer(httpapi.New(httpapi.Config{Store: b, Catalog: func() *pricing.Catalog { return cat },
		Planner: &fakePlanner{},
		Spend: func(ctx context.Context, q apiv1.SpendQuery) (apiv1.Spend, error) {
			rows, err := b.ListSpend(ctx, q.Since, q.Until)
			return apiv1.Spend{Since: q.Since, Until: q.Until, By: q.By, Lines: make([]apiv1.SpendLine, 0, len(rows))}, err
		}}).Handler())
	f.Cleanup(srv.Close)
	e := &env{srv: srv, admin: admin}
	f.Fuzz(func(t *testing.T, method, path, key, body string, agent bool) {
		switch method {
		case "GET", "POST", "PUT", "DELETE":
		default:
			method = "POST"
		}
		if !strings.HasPrefix(path, "/") || strings.ContainsAny(path, " #") || strings.Count(path, "%s") > 1 {
			return // not a request line net/http would send
		}
		var keys []string
		if key != "" {
			keys = []string{key}
		}
		req, err := http.NewRequest(method, e.srv.URL+strings.Replace(path, "%s", "i-ok", 1), strings.NewReader(body))
		if err != nil {
			return
		}
		tok := e.admin
		if agent {
			tok = agentTok
		}
		req.Header.Set("Authorization", "Bearer "+tok)
		req.Header.Set("Content-Type", "application/json")
		for _, k := range keys {
			req.Header.Add("Idempotency-Key", k)
		}
		resp, err := e.srv.Client().Do(req)
		if err != nil {
			return // the client refused to send it (e.g. a control character in a header)
		}
		out, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode >= 500 {
			t.Fatalf("%s %q key %q body %q: %d %s", method, path, key, body, resp.StatusCode, out)
		}
		if len(out) > 0 && !json.Valid(out) {
			t.Fatalf("%s %q: answer is not valid JSON: %q", method, path, out)
		}
	})
}
