package broker

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gpubroker/gpubroker/pricing"
	"github.com/gpubroker/gpubroker/providers/fake"
	"github.com/gpubroker/gpubroker/refresh"
	"github.com/gpubroker/gpubroker/store"
)

// syncBuffer is a log sink safe for the broker's goroutines.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}
func (s *syncBuffer) String() string { s.mu.Lock(); defer s.mu.Unlock(); return s.b.String() }

func fakeAWS(t *testing.T, delay time.Duration) (*fake.Source, refresh.Registry) {
	t.Helper()
	f, _ := fake.New(t.Context(), fake.Config{Cloud: pricing.AWS})
	f.SetOffers("us-east-1", pricing.Offer{Cloud: pricing.AWS, Region: "us-east-1", InstanceType: "g6.xlarge", GPU: pricing.L4,
		GPUCount: 1, OnDemandPrice: 0.8048})
	f.SetDelay(delay)
	return f, refresh.Registry{pricing.AWS: func(context.Context, refresh.SourceConfig) (refresh.OfferSource, error) { return f, nil }}
}

func testConfig(t *testing.T, schedule string) Config {
	cfg := DefaultConfig()
	cfg.DB = filepath.Join(t.TempDir(), "g.db")
	cfg.Refresh.Schedule = schedule
	cfg.Refresh.Regions = []string{"us-east-1"}
	return cfg
}

func storedOffers(t *testing.T, dsn string) int {
	t.Helper()
	st, err := store.Open(t.Context(), dsn, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	offers, err := st.Offers(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	return len(offers)
}

// runFor runs the broker until stop is closed and returns Run's error and
// how long shutdown took.
func runFor(t *testing.T, b *Broker, stop <-chan struct{}) (time.Duration, error) {
	t.Helper()
	ctx, cancel := context.WithCancel(t.Context())
	errc := make(chan error, 1)
	go func() { errc <- b.Run(ctx) }()
	<-stop
	cancel()
	start := time.Now()
	select {
	case err := <-errc:
		return time.Since(start), err
	case <-time.After(20 * time.Second):
		t.Fatal("Run did not return after cancel")
		return 0, nil
	}
}

func TestRunRefreshesOnStartAndOnSchedule(t *testing.T) {
	f, reg := fakeAWS(t, 0)
	cfg := testConfig(t, "@every 1s")
	var logs syncBuffer
	b, err := New(cfg, Options{Sources: reg, Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	stop := make(chan struct{})
	time.AfterFunc(2500*time.Millisecond, func() { close(stop) })
	if _, err := runFor(t, b, stop); err != nil {
		t.Fatal(err)
	}
	// On start at ~0s, then at ~1s and ~2s.
	if n := f.Calls(); n < 2 || n > 4 {
		t.Errorf("%d refreshes in 2.5s with on-start and @every 1s, want 2-4", n)
	}
	if n := storedOffers(t, cfg.DB); n != 1 {
		t.Errorf("%d offers stored, want 1", n)
	}
	for _, s := range []string{`msg="broker started"`, `refresh_schedule="@every 1s"`, `msg="refresh finished" refreshed=1`, `msg="broker stopped"`} {
		if !strings.Contains(logs.String(), s) {
			t.Errorf("logs lack %q:\n%s", s, logs.String())
		}
	}
}

func TestOverlappingRefreshIsSkipped(t *testing.T) {
	f, reg := fakeAWS(t, 300*time.Millisecond)
	cfg := testConfig(t, DefaultRefreshSchedule)
	b, err := New(cfg, Options{Sources: reg})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.RefreshNow(t.Context()); err == nil {
		t.Fatal("RefreshNow before Run should fail: no store")
	}
	st, err := store.Open(t.Context(), cfg.DB, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	b.st = st
	first := make(chan error, 1)
	go func() { _, err := b.RefreshNow(t.Context()); first <- err }()
	time.Sleep(50 * time.Millisecond)
	if _, err := b.RefreshNow(t.Context()); !errors.Is(err, ErrRefreshRunning) {
		t.Errorf("second refresh while the first runs: %v, want ErrRefreshRunning", err)
	}
	if err := <-first; err != nil {
		t.Fatal(err)
	}
	if rep, err := b.RefreshNow(t.Context()); err != nil || rep.Count(refresh.Refreshed) != 1 {
		t.Errorf("refresh after the first finished: %v", err)
	}
	if f.Calls() != 2 {
		t.Errorf("%d fetches, want 2 (the overlapping one skipped)", f.Calls())
	}
}

// whenCalled closes the returned channel once f was asked for offers.
func whenCalled(f *fake.Source) <-chan struct{} {
	c := make(chan struct{})
	go func() {
		for f.Calls() == 0 {
			time.Sleep(5 * time.Millisecond)
		}
		close(c)
	}()
	return c
}

func TestShutdownLetsRunningRefreshFinish(t *testing.T) {
	f, reg := fakeAWS(t, 400*time.Millisecond)
	cfg := testConfig(t, DefaultRefreshSchedule)
	cfg.ShutdownGrace = 10 * time.Second
	b, _ := New(cfg, Options{Sources: reg})
	stop := whenCalled(f)
	if _, err := runFor(t, b, stop); err != nil {
		t.Fatal(err)
	}
	if n := storedOffers(t, cfg.DB); n != 1 {
		t.Errorf("the refresh running at shutdown should have finished and stored 1 offer; %d stored", n)
	}
}

func TestShutdownCancelsRefreshAfterGrace(t *testing.T) {
	f, reg := fakeAWS(t, time.Hour)
	cfg := testConfig(t, DefaultRefreshSchedule)
	cfg.ShutdownGrace = 100 * time.Millisecond
	b, _ := New(cfg, Options{Sources: reg})
	stop := whenCalled(f)
	took, err := runFor(t, b, stop)
	if err != nil {
		t.Fatal(err)
	}
	if took > 5*time.Second {
		t.Errorf("shutdown took %v with a 100ms grace", took)
	}
	if n := storedOffers(t, cfg.DB); n != 0 {
		t.Errorf("a cancelled refresh stored %d offers", n)
	}
}

func TestNewRejectsBadConfig(t *testing.T) {
	_, reg := fakeAWS(t, 0)
	cfg := testConfig(t, "every day")
	if _, err := New(cfg, Options{Sources: reg}); err == nil || !strings.Contains(err.Error(), "not a cron schedule") {
		t.Errorf("bad schedule: %v", err)
	}
	cfg = testConfig(t, DefaultRefreshSchedule)
	cfg.Refresh.Clouds = []pricing.Cloud{pricing.GCP}
	if _, err := New(cfg, Options{Sources: reg}); err == nil || !strings.Contains(err.Error(), "no price source") {
		t.Errorf("cloud without a source: %v", err)
	}
}

func TestRunFailsOnBadStore(t *testing.T) {
	_, reg := fakeAWS(t, 0)
	cfg := testConfig(t, DefaultRefreshSchedule)
	cfg.DB = "mysql://x"
	b, _ := New(cfg, Options{Sources: reg})
	if err := b.Run(t.Context()); !errors.Is(err, store.ErrBadDSN) {
		t.Errorf("Run with a bad DSN: %v", err)
	}
}
