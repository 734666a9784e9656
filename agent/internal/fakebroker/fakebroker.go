// Package fakebroker implements the broker's agent API (docs/agent.md) in
// memory, with knobs to take it down, reject requests and forget tokens.
// Tests of the agent and its measurements talk to it over real HTTP.
package fakebroker

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
)

// Broker is the fake. Its zero value is not usable; call New.
type Broker struct {
	mu        sync.Mutex
	bootstrap string
	tokens    map[string]string // token -> agent id
	n         int
	down      bool
	reject    bool
	got       []Received
	rejected  int
	benchReq  bool
	interval  int
	seenKeys  map[string]bool
	registers int
}

// Received is one accepted request.
type Received struct {
	// Path is the endpoint suffix: heartbeat, notices, drains, benchmarks.
	Path string
	// Key is the Idempotency-Key.
	Key  string
	Body map[string]any
}

// New returns a fake that accepts bootstrap as the registration token.
func New(bootstrap string) *Broker {
	return &Broker{bootstrap: bootstrap, tokens: map[string]string{}, seenKeys: map[string]bool{}}
}

// SetHeartbeatInterval sets the heartbeat_interval_seconds the heartbeat
// answer carries (0: none).
func (f *Broker) SetHeartbeatInterval(s int) { f.mu.Lock(); f.interval = s; f.mu.Unlock() }

// SetDown makes every request fail with 503.
func (f *Broker) SetDown(d bool) { f.mu.Lock(); f.down = d; f.mu.Unlock() }

// SetReject makes reports fail with 422.
func (f *Broker) SetReject(r bool) { f.mu.Lock(); f.reject = r; f.mu.Unlock() }

// SetBenchmarkRequested sets the heartbeat answer's benchmark_requested.
func (f *Broker) SetBenchmarkRequested(b bool) { f.mu.Lock(); f.benchReq = b; f.mu.Unlock() }

// ForgetTokens drops every agent token, so agents get 401 and re-register.
func (f *Broker) ForgetTokens() { f.mu.Lock(); clear(f.tokens); f.mu.Unlock() }

// Rejections counts requests refused because of SetReject.
func (f *Broker) Rejections() int { f.mu.Lock(); defer f.mu.Unlock(); return f.rejected }

// Registrations counts registrations.
func (f *Broker) Registrations() int { f.mu.Lock(); defer f.mu.Unlock(); return f.registers }

// Received returns the accepted requests in arrival order (repeats of an
// Idempotency-Key are not listed twice).
func (f *Broker) Received() []Received {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]Received(nil), f.got...)
}

// ServeHTTP implements the agent API.
func (f *Broker) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.down {
		http.Error(w, `{"error":"starting up"}`, http.StatusServiceUnavailable)
		return
	}
	if r.Method != http.MethodPost || r.Header.Get("Content-Type") != "application/json" {
		http.Error(w, `{"error":"POST application/json only"}`, http.StatusBadRequest)
		return
	}
	tok, _ := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	b, _ := io.ReadAll(r.Body)
	var body map[string]any
	if err := json.Unmarshal(b, &body); err != nil {
		http.Error(w, `{"error":"body is not a JSON object"}`, http.StatusBadRequest)
		return
	}
	if r.URL.Path == "/api/v1/agents/register" {
		if tok != f.bootstrap {
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		f.n++
		f.registers++
		id, at := fmt.Sprintf("agt-%d", f.n), fmt.Sprintf("secret-agent-token-%d", f.n)
		f.tokens[at] = id
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusCreated)
		_ = json.NewEncoder(w).Encode(map[string]any{"agent_id": id, "token": at, "heartbeat_interval_seconds": 30})
		return
	}
	rest, ok := strings.CutPrefix(r.URL.Path, "/api/v1/agents/")
	id, suffix, _ := strings.Cut(rest, "/")
	if !ok || f.tokens[tok] != id {
		w.WriteHeader(http.StatusUnauthorized)
		return
	}
	if f.reject {
		f.rejected++
		http.Error(w, `{"error":"unknown field \"x\""}`, http.StatusUnprocessableEntity)
		return
	}
	key := r.Header.Get("Idempotency-Key")
	switch suffix {
	case "heartbeat":
		f.got = append(f.got, Received{Path: suffix, Body: body})
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"benchmark_requested":%t,"heartbeat_interval_seconds":%d}`, f.benchReq, f.interval)
	case "progress":
		f.got = append(f.got, Received{Path: suffix, Body: body})
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, `{"status":"stored","workload":"train"}`)
	case "notices", "drains", "benchmarks":
		if key == "" {
			http.Error(w, `{"error":"Idempotency-Key required"}`, http.StatusBadRequest)
			return
		}
		if !f.seenKeys[suffix+key] {
			f.seenKeys[suffix+key] = true
			f.got = append(f.got, Received{Path: suffix, Key: key, Body: body})
		}
		w.WriteHeader(http.StatusAccepted)
	default:
		http.NotFound(w, r)
	}
}
