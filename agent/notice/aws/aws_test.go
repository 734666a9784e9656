package aws_test

import (
	"context"
	"io"
	"log/slog"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/gpubroker/gpubroker/agent/internal/fakecloud"
	"github.com/gpubroker/gpubroker/agent/notice"
	"github.com/gpubroker/gpubroker/agent/notice/aws"
)

// clock is a settable clock shared by the fake and the watcher.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *clock) Add(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

func quiet() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

func start(t *testing.T, fake *fakecloud.AWS, o aws.Options) <-chan notice.Notice {
	t.Helper()
	srv := httptest.NewServer(fake)
	t.Cleanup(srv.Close)
	o.Endpoint = srv.URL
	o.Client = srv.Client()
	o.Logger = quiet()
	if o.Interval == 0 {
		o.Interval = 10 * time.Millisecond
	}
	o.Backoff = notice.Backoff{Min: 5 * time.Millisecond, Max: 20 * time.Millisecond}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	ch, err := aws.New(o).Watch(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return ch
}

func next(t *testing.T, ch <-chan notice.Notice) notice.Notice {
	t.Helper()
	select {
	case n := <-ch:
		return n
	case <-time.After(5 * time.Second):
		t.Fatal("no notice within 5s")
	}
	return notice.Notice{}
}

func none(t *testing.T, ch <-chan notice.Notice, d time.Duration) {
	t.Helper()
	select {
	case n := <-ch:
		t.Fatalf("unexpected notice %+v", n)
	case <-time.After(d):
	}
}

func TestInstanceActionAppearsMidRun(t *testing.T) {
	for _, tc := range []struct {
		action string
		kind   notice.Kind
	}{
		{"terminate", notice.KindPreempt},
		{"stop", notice.KindStop},
		{"hibernate", notice.KindHibernate},
	} {
		t.Run(tc.action, func(t *testing.T) {
			fake := fakecloud.NewAWS()
			ch := start(t, fake, aws.Options{})
			none(t, ch, 50*time.Millisecond) // 404: no notice
			fake.SetInstanceAction(`{"action":"` + tc.action + `","time":"2026-04-24T17:11:44Z"}`)
			n := next(t, ch)
			want := time.Date(2026, 4, 24, 17, 11, 44, 0, time.UTC)
			if n.Kind != tc.kind || n.Cloud != notice.AWS || !n.Deadline.Equal(want) {
				t.Fatalf("got %+v, want kind %s deadline %v", n, tc.kind, want)
			}
			none(t, ch, 100*time.Millisecond) // still there on later polls: not repeated
		})
	}
}

func TestRebalanceAndMaintenance(t *testing.T) {
	fake := fakecloud.NewAWS()
	fake.SetRebalance(`{"noticeTime":"2026-04-24T17:00:00Z"}`)
	fake.SetMaintenance(`[{"NotBefore":"21 Jan 2027 09:00:43 GMT","Code":"system-reboot","Description":"scheduled reboot","EventId":"instance-event-0d59937288b749b32","NotAfter":"21 Jan 2027 09:17:23 GMT","State":"active"},
	 {"NotBefore":"1 Jan 2026 09:00:43 GMT","Code":"system-reboot","EventId":"instance-event-old","NotAfter":"1 Jan 2026 09:17:23 GMT","State":"completed"}]`)
	ch := start(t, fake, aws.Options{SlowInterval: 10 * time.Millisecond})
	got := map[notice.Kind]notice.Notice{}
	for range 2 {
		n := next(t, ch)
		got[n.Kind] = n
	}
	if r := got[notice.KindRebalance]; r.ID != "aws/rebalance/2026-04-24T17:00:00Z" || !r.Deadline.IsZero() {
		t.Errorf("rebalance = %+v", r)
	}
	m := got[notice.KindMaintenance]
	if m.ID != "aws/maintenance/instance-event-0d59937288b749b32" || m.Detail != "system-reboot" ||
		!m.Deadline.Equal(time.Date(2027, 1, 21, 9, 0, 43, 0, time.UTC)) {
		t.Errorf("maintenance = %+v", m)
	}
	none(t, ch, 100*time.Millisecond)
}

func TestTokenRefreshedBeforeExpiry(t *testing.T) {
	c := &clock{t: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	fake := fakecloud.NewAWS()
	fake.Now = c.Now
	ch := start(t, fake, aws.Options{Now: c.Now, TokenTTL: 100 * time.Second})
	none(t, ch, 50*time.Millisecond)
	puts, unauth, _ := fake.Stats()
	if puts != 1 || unauth != 0 {
		t.Fatalf("after start: %d token PUTs, %d 401s; want 1, 0", puts, unauth)
	}
	c.Add(95 * time.Second) // inside the 10s margin before expiry: refresh proactively
	none(t, ch, 50*time.Millisecond)
	puts, unauth, _ = fake.Stats()
	if puts != 2 || unauth != 0 {
		t.Fatalf("near expiry: %d token PUTs, %d 401s; want 2, 0", puts, unauth)
	}
}

func TestStaleTokenRefetchedOn401(t *testing.T) {
	fake := fakecloud.NewAWS()
	ch := start(t, fake, aws.Options{})
	none(t, ch, 30*time.Millisecond)
	fake.RevokeTokens() // IMDS forgot the token (stop/start): 401
	fake.SetInstanceAction(`{"action":"terminate","time":"2026-04-24T17:11:44Z"}`)
	n := next(t, ch)
	if n.Kind != notice.KindPreempt {
		t.Fatalf("got %+v", n)
	}
	puts, unauth, _ := fake.Stats()
	if puts < 2 || unauth < 1 {
		t.Fatalf("%d PUTs, %d 401s: want a re-fetch after a 401", puts, unauth)
	}
}

func TestServerShortTTLCap(t *testing.T) {
	// IMDS may grant less than asked; the watcher must follow the granted TTL.
	c := &clock{t: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	fake := fakecloud.NewAWS()
	fake.Now, fake.MaxTTL = c.Now, 10*time.Second
	ch := start(t, fake, aws.Options{Now: c.Now})
	none(t, ch, 30*time.Millisecond)
	c.Add(20 * time.Second)
	none(t, ch, 50*time.Millisecond)
	if _, unauth, _ := fake.Stats(); unauth != 0 {
		t.Fatalf("%d 401s: the watcher used a token past its granted TTL", unauth)
	}
}

func TestSurvivesOutageAndFlapping(t *testing.T) {
	fake := fakecloud.NewAWS()
	fake.SetDown(true)
	ch := start(t, fake, aws.Options{})
	none(t, ch, 100*time.Millisecond)
	fake.SetDown(false)
	fake.FailNext(3)
	fake.SetInstanceAction(`{"action":"terminate","time":"2026-04-24T17:11:44Z"}`)
	n := next(t, ch)
	// Flap again: the same notice must not come back after recovery.
	fake.SetDown(true)
	time.Sleep(50 * time.Millisecond)
	fake.SetDown(false)
	none(t, ch, 150*time.Millisecond)
	if n.Kind != notice.KindPreempt {
		t.Fatalf("got %+v", n)
	}
}

func TestMalformedBodyIsRetriedNotFatal(t *testing.T) {
	fake := fakecloud.NewAWS()
	fake.SetInstanceAction(`{"action":`)
	ch := start(t, fake, aws.Options{})
	none(t, ch, 80*time.Millisecond)
	fake.SetInstanceAction(`{"action":"terminate","time":"2026-04-24T17:11:44Z"}`)
	if n := next(t, ch); n.Kind != notice.KindPreempt {
		t.Fatalf("got %+v", n)
	}
}

func TestParseErrors(t *testing.T) {
	now := time.Now()
	for _, tc := range []struct {
		name string
		fn   func() error
	}{
		{"bad json", func() error { _, err := aws.ParseInstanceAction([]byte(`{`), now); return err }},
		{"unknown action", func() error {
			_, err := aws.ParseInstanceAction([]byte(`{"action":"explode","time":"2026-04-24T17:11:44Z"}`), now)
			return err
		}},
		{"bad time", func() error {
			_, err := aws.ParseInstanceAction([]byte(`{"action":"stop","time":"soon"}`), now)
			return err
		}},
		{"rebalance time", func() error { _, err := aws.ParseRebalance([]byte(`{"noticeTime":""}`), now); return err }},
		{"maintenance not array", func() error { _, err := aws.ParseMaintenance([]byte(`{}`), now); return err }},
		{"maintenance no id", func() error {
			_, err := aws.ParseMaintenance([]byte(`[{"State":"active"}]`), now)
			return err
		}},
		{"maintenance bad time", func() error {
			_, err := aws.ParseMaintenance([]byte(`[{"EventId":"e","NotBefore":"tomorrow"}]`), now)
			return err
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if err := tc.fn(); err == nil {
				t.Fatal("want an error")
			}
		})
	}
}

func FuzzParse(f *testing.F) {
	f.Add([]byte(`{"action":"terminate","time":"2026-04-24T17:11:44Z"}`))
	f.Add([]byte(`{"noticeTime":"2026-04-24T17:11:44Z"}`))
	f.Add([]byte(`[{"NotBefore":"21 Jan 2019 09:00:43 GMT","Code":"system-reboot","EventId":"instance-event-0d","State":"active"}]`))
	f.Add([]byte(`null`))
	f.Fuzz(func(t *testing.T, b []byte) {
		now := time.Now()
		if n, err := aws.ParseInstanceAction(b, now); err == nil && (n.ID == "" || !n.Kind.Terminal()) {
			t.Fatalf("accepted %q as %+v", b, n)
		}
		_, _ = aws.ParseRebalance(b, now)
		if ns, err := aws.ParseMaintenance(b, now); err == nil {
			for _, n := range ns {
				if n.ID == "aws/maintenance/" {
					t.Fatalf("empty ID from %q", b)
				}
			}
		}
	})
}

// TestFailingSlowSourceDoesNotDelayTheSpotPoll: with the maintenance
// endpoint failing (its back-off grown to the maximum), a spot
// instance-action is still seen within about one fast interval.
func TestFailingSlowSourceDoesNotDelayTheSpotPoll(t *testing.T) {
	fake := fakecloud.NewAWS()
	fake.FailPath(aws.MaintenancePath, true)
	fake.FailPath(aws.RebalancePath, true)
	srv := httptest.NewServer(fake)
	t.Cleanup(srv.Close)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	ch, err := aws.New(aws.Options{Endpoint: srv.URL, Client: srv.Client(), Logger: quiet(), Interval: 20 * time.Millisecond,
		SlowInterval: 20 * time.Millisecond, Backoff: notice.Backoff{Min: 2 * time.Second, Max: 5 * time.Second}}).Watch(ctx)
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(100 * time.Millisecond) // the slow sources are now backing off (1 s or more)
	at := time.Now()
	fake.SetInstanceAction(`{"action":"stop","time":"2026-12-02T12:00:00Z"}`)
	n := next(t, ch)
	if took := time.Since(at); n.Kind != notice.KindStop || took > 500*time.Millisecond {
		t.Fatalf("%s notice after %s; want stop within 500ms while the slow sources fail", n.Kind, took)
	}
}
