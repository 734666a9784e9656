package broker

import (
	"context"
	"log/slog"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gpubroker/gpubroker/broker/httpapi"
	"github.com/gpubroker/gpubroker/internal/testpg"
	"github.com/gpubroker/gpubroker/store"
)

var backends = []struct {
	name string
	dsn  func(t *testing.T) string
}{
	{"sqlite", func(t *testing.T) string { return filepath.Join(t.TempDir(), "broker.db") }},
	{"postgres", func(t *testing.T) string { return testpg.DSN(t) }},
}

func openBroker(t *testing.T, dsn string) *store.Broker {
	t.Helper()
	st, err := store.Open(context.Background(), dsn, nil)
	if err != nil {
		t.Fatalf("opening store: %v", err)
	}
	t.Cleanup(func() { _ = st.Close() })
	b, err := st.Broker(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// replica is one in-process broker replica: an elector and a scheduler on
// its own database connection, as a separate process would have.
type replica struct {
	name    string
	elector *Elector
	cancel  context.CancelFunc
	done    chan struct{}
}

type execLog struct {
	mu   sync.Mutex
	runs map[time.Time][]string // slot -> replicas that executed it
}

func (l *execLog) add(slot time.Time, who string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.runs[slot] = append(l.runs[slot], who)
}

func startReplica(t *testing.T, dsn, name string, ttl time.Duration, log *execLog) *replica {
	b := openBroker(t, dsn)
	lg := slog.New(slog.NewTextHandler(testWriter{t}, nil))
	el := &Elector{Store: b, Name: LeaseName, Holder: name, TTL: ttl, Renew: ttl / 5, Now: time.Now, Log: lg}
	sched := &Scheduler{Elector: el, Store: b, LeaseName: LeaseName, Now: time.Now, Log: lg,
		Metrics: httpapi.NewMetrics(nil), Grace: time.Second,
		Jobs: []Job{{Name: "tick", Schedule: "@every 200ms", Run: func(ctx context.Context) error {
			slot, _ := JobSlot(ctx)
			log.add(slot, name)
			return nil
		}}}}
	ctx, cancel := context.WithCancel(context.Background())
	r := &replica{name: name, elector: el, cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(r.done)
		var wg sync.WaitGroup
		wg.Add(2)
		go func() { defer wg.Done(); _ = el.Run(ctx) }()
		go func() { defer wg.Done(); _ = sched.Run(ctx) }()
		wg.Wait()
	}()
	t.Cleanup(func() { cancel(); <-r.done })
	return r
}

func (r *replica) leading() bool { _, _, ok := r.elector.Leading(); return ok }

func waitFor(t *testing.T, limit time.Duration, what string, cond func() bool) time.Duration {
	t.Helper()
	start := time.Now()
	for time.Since(start) < limit {
		if cond() {
			return time.Since(start)
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("%s did not happen within %s", what, limit)
	return 0
}

// TestFailover runs two replicas on one database, kills the leader without
// releasing its lease (a crash), and checks that the other leads within the
// lease time and that no scheduled slot ran twice.
func TestFailover(t *testing.T) {
	for _, be := range backends {
		t.Run(be.name, func(t *testing.T) {
			dsn := be.dsn(t)
			const ttl = 1500 * time.Millisecond
			log := &execLog{runs: map[time.Time][]string{}}
			a := startReplica(t, dsn, "replica-a", ttl, log)
			waitFor(t, 3*time.Second, "replica-a leading", a.leading)
			b := startReplica(t, dsn, "replica-b", ttl, log)
			time.Sleep(1200 * time.Millisecond)
			if b.leading() {
				t.Fatal("both replicas lead")
			}
			// Crash the leader: stop it without releasing the lease.
			a.cancel()
			<-a.done
			took := waitFor(t, 2*ttl, "replica-b taking over", b.leading)
			t.Logf("takeover after %s (lease %s)", took, ttl)
			if took > ttl+ttl/5+300*time.Millisecond {
				t.Errorf("takeover took %s; want within the lease time %s plus one renew interval", took, ttl)
			}
			time.Sleep(800 * time.Millisecond)
			b.cancel()
			<-b.done

			log.mu.Lock()
			defer log.mu.Unlock()
			by := map[string]int{}
			for slot, who := range log.runs {
				if len(who) != 1 {
					t.Errorf("slot %s ran %d times: %v", slot.Format(time.StampMilli), len(who), who)
				}
				by[who[0]]++
			}
			if by["replica-a"] == 0 || by["replica-b"] == 0 {
				t.Errorf("runs by replica %v: both should have run jobs (a before, b after the crash)", by)
			}
			runs, err := openBroker(t, dsn).ListJobRuns(context.Background(), "tick")
			if err != nil {
				t.Fatal(err)
			}
			if len(runs) != len(log.runs) {
				t.Errorf("%d runs recorded in the database, %d executed", len(runs), len(log.runs))
			}
			var epochs []int64
			for _, r := range runs {
				if len(epochs) == 0 || epochs[len(epochs)-1] != r.Epoch {
					epochs = append(epochs, r.Epoch)
				}
			}
			if len(epochs) != 2 || epochs[1] <= epochs[0] {
				t.Errorf("run epochs %v: want one term per replica, increasing", epochs)
			}
		})
	}
}

// TestCleanHandover checks that a replica stopping cleanly releases the lease
// so the other takes over at once rather than after the TTL.
func TestCleanHandover(t *testing.T) {
	dsn := filepath.Join(t.TempDir(), "b.db")
	log := &execLog{runs: map[time.Time][]string{}}
	const ttl = 5 * time.Second
	a := startReplica(t, dsn, "a", ttl, log)
	a.elector.Release = true
	waitFor(t, 3*time.Second, "a leading", a.leading)
	b := startReplica(t, dsn, "b", ttl, log)
	a.cancel()
	<-a.done
	if took := waitFor(t, ttl, "b taking over", b.leading); took > ttl/2 {
		t.Errorf("handover took %s; a released lease should be taken on b's next try (%s)", took, ttl/5)
	}
}

// TestClaimFencing checks the database-side guarantees directly: a stale
// epoch cannot claim, and a slot is claimed once.
func TestClaimFencing(t *testing.T) {
	for _, be := range backends {
		t.Run(be.name, func(t *testing.T) {
			b := openBroker(t, be.dsn(t))
			ctx := context.Background()
			now := time.Now()
			l1, ok, err := b.AcquireLease(ctx, "L", "x", time.Second, now)
			if err != nil || !ok {
				t.Fatalf("x acquiring: %v %v", ok, err)
			}
			if _, ok, _ := b.AcquireLease(ctx, "L", "y", time.Second, now.Add(500*time.Millisecond)); ok {
				t.Fatal("y took a live lease")
			}
			l2, ok, err := b.AcquireLease(ctx, "L", "y", time.Second, now.Add(1500*time.Millisecond))
			if err != nil || !ok || l2.Epoch != l1.Epoch+1 {
				t.Fatalf("y taking the expired lease: ok=%v epoch %d after %d, err %v", ok, l2.Epoch, l1.Epoch, err)
			}
			slot := now.Truncate(time.Second)
			if _, ok, _ := b.ClaimJobRun(ctx, "L", "j", slot, "x", l1.Epoch, now.Add(1600*time.Millisecond)); ok {
				t.Fatal("the old leader claimed a run with a stale epoch")
			}
			if _, ok, err := b.ClaimJobRun(ctx, "L", "j", slot, "y", l2.Epoch, now.Add(1600*time.Millisecond)); !ok || err != nil {
				t.Fatalf("the leader could not claim: %v", err)
			}
			if _, ok, _ := b.ClaimJobRun(ctx, "L", "j", slot, "y", l2.Epoch, now.Add(1700*time.Millisecond)); ok {
				t.Fatal("the same slot was claimed twice")
			}
		})
	}
}

// TestSchedulerNoOverlap runs a job slower than its schedule: runs never
// overlap and the slots in between are skipped.
func TestSchedulerNoOverlap(t *testing.T) {
	b := openBroker(t, filepath.Join(t.TempDir(), "b.db"))
	lg := slog.New(slog.NewTextHandler(testWriter{t}, nil))
	el := &Elector{Store: b, Name: LeaseName, Holder: "solo", TTL: 2 * time.Second, Renew: 400 * time.Millisecond, Now: time.Now, Log: lg}
	var running, maxRunning, runs atomic.Int32
	sched := &Scheduler{Elector: el, Store: b, LeaseName: LeaseName, Now: time.Now, Log: lg, Metrics: httpapi.NewMetrics(nil),
		Grace: 2 * time.Second, Jobs: []Job{{Name: "slow", Schedule: "@every 100ms", Run: func(ctx context.Context) error {
			n := running.Add(1)
			defer running.Add(-1)
			for {
				m := maxRunning.Load()
				if n <= m || maxRunning.CompareAndSwap(m, n) {
					break
				}
			}
			runs.Add(1)
			time.Sleep(350 * time.Millisecond)
			return nil
		}}}}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = el.Run(ctx) }()
	waitFor(t, 2*time.Second, "leading", func() bool { _, _, ok := el.Leading(); return ok })
	sdone := make(chan struct{})
	go func() { defer close(sdone); _ = sched.Run(ctx) }()
	time.Sleep(2 * time.Second)
	cancel()
	<-sdone
	<-done
	if maxRunning.Load() != 1 {
		t.Errorf("%d runs overlapped", maxRunning.Load())
	}
	// 20 slots pass; back-to-back runs would be at most 6.
	if n := runs.Load(); n < 2 || n > 6 {
		t.Errorf("%d runs in 2 s of a 350 ms job on a 100 ms schedule; want 2-6 (slots skipped, not queued)", n)
	}
}

func TestBadSchedule(t *testing.T) {
	s := &Scheduler{Jobs: []Job{{Name: "x", Schedule: "every minute"}}}
	if err := s.Validate(); err == nil {
		t.Fatal("a malformed schedule was accepted")
	}
}

type testWriter struct{ t *testing.T }

func (w testWriter) Write(b []byte) (int, error) { w.t.Log(string(b)); return len(b), nil }
