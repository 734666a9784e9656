//go:build !agentonly

package main

import (
	"context"
	"encoding/json"
	"net"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gpubroker/gpubroker/broker"
	"github.com/gpubroker/gpubroker/store"
)

// seedReportStore registers one spot instance of the fleet example's
// training job three hours ago and records a preemption notice for it.
func seedReportStore(t *testing.T, db string) {
	t.Helper()
	st, err := store.Open(t.Context(), db, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	b, err := st.Broker(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now().UTC()
	inst := store.InstanceRecord{ID: "i-0report", Cloud: "aws", Region: "us-west-2", Zone: "usw2-az3", InstanceType: "p5e.48xlarge",
		GPU: "H200", GPUCount: 8, Capacity: "spot", Workload: "llm-finetune", State: "running"}
	if _, err := b.RegisterAgent(t.Context(), inst, "hash-report-agent-token", now.Add(-3*time.Hour)); err != nil {
		t.Fatal(err)
	}
	if _, err := b.AddEvent(t.Context(), store.EventRecord{At: now.Add(-time.Hour), Kind: "preemption_notice", Instance: "i-0report", Workload: "llm-finetune"}); err != nil {
		t.Fatal(err)
	}
}

func TestReportFromStore(t *testing.T) {
	db := filepath.Join(t.TempDir(), "g.db")
	seedReportStore(t, db)
	out, errs, code := execute(t, newReportCmd(), "report", "-f", "../../examples/fleet.yaml", "--db", db)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	for _, want := range []string{"gpubroker daily report", "Plan (../../examples/fleet.yaml)", "llm-finetune",
		"1 preemption", "aws/usw2-az3/p5e.48xlarge/spot: 1 preemption", "estimated from agent uptime"} {
		if !strings.Contains(out, want) {
			t.Errorf("report lacks %q:\n%s", want, out)
		}
	}
	if regexp.MustCompile(`Spend: \$0\.00`).MatchString(out) {
		t.Errorf("3 hours of a p5e.48xlarge cost nothing:\n%s", out)
	}
	out, _, code = execute(t, newReportCmd(), "report", "-f", "../../examples/fleet.yaml", "--db", db, "--output", "json", "--team", "research")
	var r struct {
		Spend struct {
			Total float64 `json:"total"`
		} `json:"spend"`
		Placements []struct{ Workload string } `json:"placements"`
	}
	if code != 0 || json.Unmarshal([]byte(out), &r) != nil || r.Spend.Total <= 0 {
		t.Fatalf("json report (%d): %s", code, out)
	}
	for _, p := range r.Placements {
		if p.Workload != "llm-finetune" {
			t.Errorf("--team research shows %s", p.Workload)
		}
	}
	out, _, code = execute(t, newReportCmd(), "report", "-f", "../../examples/fleet.yaml", "--db", db, "--output", "blocks")
	if code != 0 || !strings.Contains(out, `"type": "header"`) {
		t.Errorf("blocks (%d): %s", code, out)
	}
}

func TestReportUsageErrors(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--period", "fortnight"}, "want day, week or month"},
		{[]string{"--output", "pdf"}, "want text, json, blocks or html"},
		{[]string{"--send"}, "--send: no Slack destination"},
		{[]string{"--endpoint", "ftp://x"}, "want the broker's URL"},
		{[]string{"--endpoint", "http://127.0.0.1:1", "-f", "x.yaml"}, "leave out -f and --db"},
		{[]string{"--team", "a\x00b"}, "control or invalid characters"},
		{[]string{"-f", "missing.yaml"}, "missing.yaml"},
	} {
		_, errs, code := execute(t, newReportCmd(), append([]string{"report"}, c.args...)...)
		if code != exitUsageError || !strings.Contains(errs, c.want) {
			t.Errorf("%v: exit %d, %q; want 2 and %q", c.args, code, errs, c.want)
		}
	}
}

// TestReportFromBrokerAPI runs a real broker on a seeded store and reads the
// report through its API with the admin token it prints.
func TestReportFromBrokerAPI(t *testing.T) {
	db := filepath.Join(t.TempDir(), "g.db")
	seedReportStore(t, db)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var out syncBuf
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	started := make(chan net.Addr, 1)
	go func() {
		done <- broker.Run(ctx, broker.Config{DSN: db, PolicyPath: "../../examples/fleet.yaml", Plan: broker.OptimizerPlan,
			NoRefresh: true, Listener: ln, Out: &out, Started: started})
	}()
	defer func() { cancel(); <-done }()
	var addr net.Addr
	select {
	case addr = <-started:
	case err := <-done:
		t.Fatalf("broker: %v", err)
	}
	// The store already had an admin token? No: seeding does not create one,
	// so the broker prints its first admin token.
	tok := regexp.MustCompile(`gpb_[A-Za-z0-9_-]{43}`).FindString(out.String())
	if tok == "" {
		t.Fatalf("no admin token printed: %q", out.String())
	}
	t.Setenv("GPUBROKER_TOKEN", tok)
	text, errs, code := execute(t, newReportCmd(), "report", "--endpoint", "http://"+addr.String(), "--period", "week")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	for _, want := range []string{"gpubroker weekly report", "llm-finetune", "1 preemption", "research"} {
		if !strings.Contains(text, want) {
			t.Errorf("API report lacks %q:\n%s", want, text)
		}
	}
	if strings.Contains(text+errs, tok) {
		t.Error("the token appears in the output")
	}
	t.Setenv("GPUBROKER_TOKEN", "gpb_wrong")
	_, errs, code = execute(t, newReportCmd(), "report", "--endpoint", "http://"+addr.String())
	if code != exitFailure || !strings.Contains(errs, "401") && !strings.Contains(strings.ToLower(errs), "unauthor") {
		t.Errorf("wrong token: exit %d %s", code, errs)
	}
}

type syncBuf struct {
	mu sync.Mutex
	b  strings.Builder
}

func (s *syncBuf) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuf) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
