package broker_test

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gpubroker/gpubroker/agent/broker"
	"github.com/gpubroker/gpubroker/agent/internal/fakebroker"
	"github.com/gpubroker/gpubroker/apiv1"
)

func setup(t *testing.T) (*fakebroker.Broker, *broker.Client, string) {
	t.Helper()
	fb := fakebroker.New("boot-secret")
	fb.SetBenchmarkRequested(true)
	srv := httptest.NewServer(fb)
	t.Cleanup(srv.Close)
	dir := t.TempDir()
	tf := filepath.Join(dir, "token")
	if err := os.WriteFile(tf, []byte("boot-secret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	c := &broker.Client{BaseURL: srv.URL, HTTP: srv.Client(), TokenFile: tf, StateFile: filepath.Join(dir, "state", "agent.json"),
		Register: apiv1.RegisterRequest{Hostname: "vm0", Cloud: "aws", AgentVersion: "test"}}
	return fb, c, dir
}

func report(t *testing.T, kind, id string) broker.Report {
	r, err := broker.NewReport(kind, id, map[string]string{"id": id})
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func TestRegisterHeartbeatAndPersistedCredentials(t *testing.T) {
	fb, c, _ := setup(t)
	resp, err := c.Heartbeat(context.Background(), apiv1.Heartbeat{Time: time.Now(), Cloud: "aws"})
	if err != nil {
		t.Fatal(err)
	}
	if !resp.BenchmarkRequested || c.AgentID() != "agt-1" {
		t.Fatalf("resp %+v id %q", resp, c.AgentID())
	}
	st, err := os.Stat(c.StateFile)
	if err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("state file: %v, mode %v; want 0600", err, st.Mode())
	}
	// A restarted agent reuses the saved token instead of registering again.
	c2 := &broker.Client{BaseURL: c.BaseURL, HTTP: c.HTTP, TokenFile: c.TokenFile, StateFile: c.StateFile}
	if err := c2.Send(context.Background(), report(t, broker.KindNotice, "n1")); err != nil {
		t.Fatal(err)
	}
	if fb.Registrations() != 1 {
		t.Fatalf("%d registrations, want 1", fb.Registrations())
	}
}

func TestReregistersOn401(t *testing.T) {
	fb, c, _ := setup(t)
	if err := c.Send(context.Background(), report(t, broker.KindNotice, "n1")); err != nil {
		t.Fatal(err)
	}
	fb.ForgetTokens()
	if err := c.Send(context.Background(), report(t, broker.KindDrain, "d1")); err != nil {
		t.Fatal(err)
	}
	if fb.Registrations() != 2 || c.AgentID() != "agt-2" {
		t.Fatalf("registers %d id %s", fb.Registrations(), c.AgentID())
	}
}

func TestErrorsClassifiedAndSecretFree(t *testing.T) {
	fb, c, dir := setup(t)
	fb.SetDown(true)
	err := c.Send(context.Background(), report(t, broker.KindNotice, "n1"))
	if !errors.Is(err, broker.ErrUnavailable) {
		t.Fatalf("down: %v", err)
	}
	fb.SetDown(false)
	fb.SetReject(true)
	err = c.Send(context.Background(), report(t, broker.KindNotice, "n1"))
	if !errors.Is(err, broker.ErrRejected) || !strings.Contains(err.Error(), "unknown field") {
		t.Fatalf("reject: %v", err)
	}
	if strings.Contains(err.Error(), "secret") {
		t.Fatalf("token leaked into error: %v", err)
	}
	_ = os.WriteFile(filepath.Join(dir, "token"), nil, 0o600)
	c3 := &broker.Client{BaseURL: c.BaseURL, TokenFile: filepath.Join(dir, "token")}
	if err := c3.Send(context.Background(), report(t, broker.KindNotice, "n")); !errors.Is(err, broker.ErrNoToken) {
		t.Fatalf("empty token file: %v", err)
	}
}

func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		if cond() {
			return
		}
	}
	t.Fatal("condition not met within 5s")
}

func TestReporterSpoolsWhileDownAndDeliversInOrder(t *testing.T) {
	fb, c, dir := setup(t)
	fb.SetDown(true)
	sp, err := broker.NewSpool(filepath.Join(dir, "spool"), 0)
	if err != nil {
		t.Fatal(err)
	}
	r := &broker.Reporter{Client: c, Spool: sp, RetryEvery: 20 * time.Millisecond,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { r.Run(ctx); close(done) }()
	defer func() { cancel(); <-done }()

	r.Enqueue(report(t, broker.KindNotice, "n1"))
	r.Enqueue(report(t, broker.KindDrain, "d1"))
	waitFor(t, func() bool { return sp.Len() == 2 })
	ents, _ := os.ReadDir(filepath.Join(dir, "spool"))
	for _, e := range ents {
		if strings.HasPrefix(e.Name(), ".tmp") {
			t.Fatalf("temp file left in spool: %s", e.Name())
		}
	}
	fb.SetDown(false)
	r.Enqueue(report(t, broker.KindBenchmark, "b1"))
	waitFor(t, func() bool { return len(fb.Received()) == 3 })
	var keys []string
	for _, g := range fb.Received() {
		keys = append(keys, g.Path+":"+g.Key)
	}
	if got := strings.Join(keys, ","); got != "notices:n1,drains:d1,benchmarks:b1" {
		t.Fatalf("delivered %s; want notice, drain, benchmark in order", got)
	}
	if sp.Len() != 0 {
		t.Fatalf("%d left in spool", sp.Len())
	}
}

func TestRejectedReportIsDroppedNotSpooled(t *testing.T) {
	fb, c, _ := setup(t)
	fb.SetReject(true)
	sp, _ := broker.NewSpool("", 0)
	r := &broker.Reporter{Client: c, Spool: sp, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { r.Run(ctx); close(done) }()
	r.Enqueue(report(t, broker.KindNotice, "n1"))
	waitFor(t, func() bool { return fb.Rejections() == 1 })
	time.Sleep(20 * time.Millisecond) // let the reporter finish handling the answer
	cancel()
	<-done
	if sp.Len() != 0 {
		t.Fatalf("a rejected report was spooled")
	}
}

func TestSpoolSurvivesRestartAndIsBounded(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "spool")
	sp, _ := broker.NewSpool(dir, 3)
	for i := range 5 {
		if err := sp.Put(report(t, broker.KindNotice, string(rune('a'+i)))); err != nil {
			t.Fatal(err)
		}
	}
	sp2, _ := broker.NewSpool(dir, 3)
	var ids []string
	sp2.Drain(func(r broker.Report) bool { ids = append(ids, r.ID); return false })
	if strings.Join(ids, "") != "cde" {
		t.Fatalf("after restart got %v; want the newest 3 in order", ids)
	}
	// A corrupt file is discarded, not retried forever.
	_ = os.WriteFile(filepath.Join(dir, "00000000000000000001-000001-notice.json"), []byte("{"), 0o600)
	sp2.Drain(func(broker.Report) bool { t.Fatal("corrupt report delivered"); return false })
	if sp2.Len() != 0 {
		t.Fatal("corrupt report kept")
	}
}

// TestSpoolFallsBackToMemory: a spool directory that cannot take a
// report (here: removed under the agent, as a full or read-only disk
// fails the write) keeps the report in memory, and delivers it.
func TestSpoolFallsBackToMemory(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "spool")
	sp, err := broker.NewSpool(dir, 8)
	if err != nil {
		t.Fatal(err)
	}
	if err := sp.Put(report(t, broker.KindNotice, "on-disk")); err != nil {
		t.Fatal(err)
	}
	var fallbacks int
	sp.OnFallback = func(error) { fallbacks++ }
	// Replace the directory by a file: every write into it now fails.
	if err := os.RemoveAll(dir); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(dir, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"m1", "m2"} {
		if err := sp.Put(report(t, broker.KindNotice, id)); err != nil {
			t.Fatalf("Put with a broken disk: %v", err)
		}
	}
	if sp.Len() != 2 || sp.InMemory() != 2 || fallbacks != 2 {
		t.Fatalf("len %d, in memory %d, fallbacks %d", sp.Len(), sp.InMemory(), fallbacks)
	}
	var got []string
	sp.Drain(func(r broker.Report) bool { got = append(got, r.ID); return false })
	if strings.Join(got, ",") != "m1,m2" || sp.Len() != 0 {
		t.Fatalf("drained %v, left %d", got, sp.Len())
	}
}
