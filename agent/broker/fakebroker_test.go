package broker_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
)

// fakeBroker implements the broker's agent API as docs/agent.md specifies.
type fakeBroker struct {
	mu        sync.Mutex
	bootstrap string
	tokens    map[string]string // token -> agent id
	n         int
	down      bool
	reject    bool
	got       []received
	seenKeys  map[string]bool
	registers int
}

type received struct {
	path, key string
	body      map[string]any
}

func newFakeBroker(bootstrap string) *fakeBroker {
	return &fakeBroker{bootstrap: bootstrap, tokens: map[string]string{}, seenKeys: map[string]bool{}}
}

func (f *fakeBroker) setDown(d bool)   { f.mu.Lock(); f.down = d; f.mu.Unlock() }
func (f *fakeBroker) setReject(r bool) { f.mu.Lock(); f.reject = r; f.mu.Unlock() }
func (f *fakeBroker) forgetTokens()    { f.mu.Lock(); clear(f.tokens); f.mu.Unlock() }
func (f *fakeBroker) received() []received {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]received(nil), f.got...)
}

func (f *fakeBroker) ServeHTTP(w http.ResponseWriter, r *http.Request) {
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
		http.Error(w, `{"error":"unknown field \"x\""}`, http.StatusUnprocessableEntity)
		return
	}
	key := r.Header.Get("Idempotency-Key")
	switch suffix {
	case "heartbeat":
		f.got = append(f.got, received{path: suffix, body: body})
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, `{"benchmark_requested":true}`)
	case "notices", "drains", "benchmarks":
		if key == "" {
			http.Error(w, `{"error":"Idempotency-Key required"}`, http.StatusBadRequest)
			return
		}
		if !f.seenKeys[suffix+key] {
			f.seenKeys[suffix+key] = true
			f.got = append(f.got, received{path: suffix, key: key, body: body})
		}
		w.WriteHeader(http.StatusAccepted)
	default:
		http.NotFound(w, r)
	}
}
