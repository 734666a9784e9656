package agent_test

import (
	"encoding/json"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gpubroker/gpubroker/agent"
	"github.com/gpubroker/gpubroker/agent/internal/fakecloud"
)

func TestParseProgress(t *testing.T) {
	for _, tc := range []struct {
		name, in string
		done     float64
		step     int64
		err      string // substring; "" = valid
	}{
		{"fraction", `{"done": 0.42}`, 0.42, 0, ""},
		{"all fields", `{"done": 0.5, "step": 4200, "eta_seconds": 5400}` + "\n", 0.5, 4200, ""},
		{"finished", `{"done": 1}`, 1, 0, ""},
		{"above one", `{"done": 1.5}`, 0, 0, "p.json:1:2: done is 1.5; want a fraction from 0 to 1"},
		{"negative on line 2", "{\n  \"done\": -0.1}", 0, 0, "p.json:2:3: done is -0.1"},
		{"a string", `{"done": "half"}`, 0, 0, "p.json:1:16: done is a JSON string; want a number"},
		{"float step", `{"done": 0.5, "step": 1.5}`, 0, 0, "step is a JSON number 1.5; want a whole number"},
		{"negative step", `{"done": 0.5, "step": -2}`, 0, 0, "step is -2; want 0 or more"},
		{"eta too large", `{"done": 0.5, "eta_seconds": 1e12}`, 0, 0, "eta_seconds is 1e+12"},
		{"unknown field", `{"done": 0.5, "percent": 50}`, 0, 0, `unknown field "percent"; known fields: done, step, eta_seconds`},
		{"no done", `{"step": 3}`, 0, 0, `p.json:1:1: no "done"`},
		{"empty", ``, 0, 0, "empty or cut short"},
		{"cut short", `{"done": 0.`, 0, 0, "p.json:1:"},
		{"two objects", `{"done": 0.5} {"done": 0.6}`, 0, 0, "text after the JSON object"},
		{"not an object", `[0.5]`, 0, 0, "want a number"},
		{"too large", `{"done": 0.5}` + strings.Repeat(" ", 70000), 0, 0, "at most"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, err := agent.ParseProgress("p.json", []byte(tc.in))
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("error %v, want one containing %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if p.Done != tc.done || (tc.step != 0 && (p.Step == nil || *p.Step != tc.step)) {
				t.Fatalf("parsed %+v", p)
			}
		})
	}
}

func FuzzParseProgress(f *testing.F) {
	// Seeds live in testdata/fuzz/FuzzParseProgress.
	f.Fuzz(func(t *testing.T, b []byte) {
		p, err := agent.ParseProgress("p.json", b)
		if err != nil {
			if !strings.HasPrefix(err.Error(), "p.json:") {
				t.Fatalf("error without a position: %v", err)
			}
			return
		}
		if p.Done < 0 || p.Done > 1 || (p.Step != nil && *p.Step < 0) || (p.ETASeconds != nil && (*p.ETASeconds < 0 || *p.ETASeconds > 1e9)) {
			t.Fatalf("accepted out of range %+v", p)
		}
		again, err := json.Marshal(p)
		if err != nil {
			t.Fatal(err)
		}
		q, err := agent.ParseProgress("again.json", again)
		if err != nil || q.Done != p.Done {
			t.Fatalf("round trip of %s: %+v, %v", again, q, err)
		}
	})
}

// TestProgressFileForwarded runs the agent: each new version of the
// progress file reaches the broker once, dated by its modification time.
func TestProgressFileForwarded(t *testing.T) {
	e := newEnv(t)
	file := filepath.Join(e.dir, "progress.json")
	at := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	write := func(body string, mod time.Time) {
		tmp := file + ".tmp"
		if err := os.WriteFile(tmp, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Chtimes(tmp, mod, mod); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(tmp, file); err != nil {
			t.Fatal(err)
		}
	}
	write(`{"done": 0.25, "step": 100}`, at)
	imds := fakecloud.NewAWS()
	srv := httptest.NewServer(imds)
	t.Cleanup(srv.Close)
	e.cfg.Cloud, e.cfg.MetadataURL = "aws", srv.URL
	e.cfg.Progress.File, e.cfg.Progress.Interval = file, 10*time.Millisecond
	e.start(t, agent.Options{})
	progress := func() []map[string]any {
		var out []map[string]any
		for _, r := range e.broker.Received() {
			if r.Path == "progress" {
				out = append(out, r.Body)
			}
		}
		return out
	}
	waitFor(t, "the first progress report", func() bool { return len(progress()) == 1 })
	got := progress()[0]
	if got["done"] != 0.25 || got["step"] != float64(100) || got["reported_at"] != at.Format(time.RFC3339) {
		t.Fatalf("first report %v", got)
	}
	write(`{"done": oops`, at.Add(time.Minute))   // not understood: skipped
	write(`{"done": 0.5}`, at.Add(2*time.Minute)) // the next version goes out
	// Wait for the new version rather than for an exact count: a report
	// the broker is slow to acknowledge may be sent again, which is
	// harmless (the broker keeps the newest reported_at).
	waitFor(t, "the second progress report", func() bool {
		ps := progress()
		return len(ps) > 0 && ps[len(ps)-1]["done"] == 0.5
	}, func() string { return paths(e.broker.Received()) })
	for i, got := range progress() {
		first := got["done"] == 0.25 && got["reported_at"] == at.Format(time.RFC3339)
		second := got["done"] == 0.5 && got["reported_at"] == at.Add(2*time.Minute).Format(time.RFC3339)
		if !first && !second {
			t.Fatalf("report %d %v: want the first or the second version (the bad one is skipped)", i, got)
		}
	}
}
