package gcp_test

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/gpubroker/gpubroker/agent/internal/fakecloud"
	"github.com/gpubroker/gpubroker/agent/notice"
	"github.com/gpubroker/gpubroker/agent/notice/gcp"
)

func start(t *testing.T, fake *fakecloud.GCP) <-chan notice.Notice {
	t.Helper()
	srv := httptest.NewServer(fake)
	t.Cleanup(srv.Close)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	w := gcp.New(gcp.Options{
		Endpoint: srv.URL, Client: srv.Client(), Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
		Backoff: notice.Backoff{Min: 5 * time.Millisecond, Max: 20 * time.Millisecond},
	})
	ch, err := w.Watch(ctx)
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

func TestPreemptedViaHangingGET(t *testing.T) {
	fake := fakecloud.NewGCP()
	ch := start(t, fake)
	none(t, ch, 100*time.Millisecond)
	if h := fake.HangCount(); h < 2 {
		t.Fatalf("%d hanging GETs; want the watcher waiting on both keys with last_etag", h)
	}
	before := time.Now()
	fake.Set("instance/preempted", "TRUE")
	n := next(t, ch)
	if lat := time.Since(before); lat > 500*time.Millisecond {
		t.Errorf("notice took %v: the hanging GET should answer on change", lat)
	}
	if n.Kind != notice.KindPreempt || n.ID != "gcp/preempted" || n.Deadline.Sub(n.Observed) != gcp.PreemptWarning {
		t.Fatalf("got %+v", n)
	}
}

func TestMaintenanceEvents(t *testing.T) {
	fake := fakecloud.NewGCP()
	ch := start(t, fake)
	none(t, ch, 50*time.Millisecond)
	fake.Set("instance/maintenance-event", "MIGRATE_ON_HOST_MAINTENANCE")
	m := next(t, ch)
	if m.Kind != notice.KindMaintenance || !m.Deadline.IsZero() {
		t.Fatalf("migrate: %+v", m)
	}
	fake.Set("instance/maintenance-event", "NONE")
	none(t, ch, 50*time.Millisecond)
	fake.Set("instance/maintenance-event", "TERMINATE_ON_HOST_MAINTENANCE")
	m = next(t, ch)
	if m.Kind != notice.KindTerminate || m.Deadline.Sub(m.Observed) != gcp.MaintenanceWarning {
		t.Fatalf("terminate: %+v", m)
	}
}

func TestSurvivesOutageNoRepeat(t *testing.T) {
	fake := fakecloud.NewGCP()
	fake.SetDown(true)
	ch := start(t, fake)
	none(t, ch, 100*time.Millisecond)
	fake.SetDown(false)
	fake.Set("instance/preempted", "TRUE")
	next(t, ch)
	// The server flaps; after reconnecting the watcher reads TRUE again
	// with no ETag to compare: it must not report a second preemption.
	fake.SetDown(true)
	time.Sleep(50 * time.Millisecond)
	fake.SetDown(false)
	none(t, ch, 300*time.Millisecond)
}

func TestRejectsNonGoogleResponder(t *testing.T) {
	// A server that answers TRUE without Metadata-Flavor is not the metadata
	// server (a proxy, a captive portal): no notice.
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("TRUE")) }))
	defer srv.Close()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ch, _ := gcp.New(gcp.Options{Endpoint: srv.URL, Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
		Backoff: notice.Backoff{Min: time.Millisecond, Max: 5 * time.Millisecond}}).Watch(ctx)
	none(t, ch, 100*time.Millisecond)
}

func TestParse(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		key, value string
		ok         bool
		kind       notice.Kind
	}{
		{gcp.PreemptedKey, "TRUE", true, notice.KindPreempt},
		{gcp.PreemptedKey, "FALSE", false, ""},
		{gcp.PreemptedKey, "", false, ""},
		{gcp.MaintenanceKey, "NONE", false, ""},
		{gcp.MaintenanceKey, "TERMINATE_ON_HOST_MAINTENANCE", true, notice.KindTerminate},
		{gcp.MaintenanceKey, "MIGRATE_ON_HOST_MAINTENANCE", true, notice.KindMaintenance},
		{gcp.MaintenanceKey, "SOMETHING_NEW", false, ""},
		{"instance/other", "TRUE", false, ""},
	} {
		n, ok := gcp.Parse(tc.key, tc.value, "e1", now)
		if ok != tc.ok || n.Kind != tc.kind {
			t.Errorf("Parse(%s, %q) = %+v, %v; want kind %q ok %v", tc.key, tc.value, n, ok, tc.kind, tc.ok)
		}
	}
}

func FuzzParse(f *testing.F) {
	f.Add("TRUE", "abc")
	f.Add("TERMINATE_ON_HOST_MAINTENANCE", "")
	f.Fuzz(func(t *testing.T, value, etag string) {
		for _, key := range []string{gcp.PreemptedKey, gcp.MaintenanceKey} {
			if n, ok := gcp.Parse(key, value, etag, time.Now()); ok && (n.ID == "" || n.Cloud != notice.GCP) {
				t.Fatalf("bad notice %+v", n)
			}
		}
	})
}

// TestHangingGETReArmedAtOnce: after a hanging GET times out with no
// change, the next one goes out at once, so a preemption arriving right
// after the timeout is seen within milliseconds, not after a pause.
func TestHangingGETReArmedAtOnce(t *testing.T) {
	fake := fakecloud.NewGCP()
	srv := httptest.NewServer(fake)
	t.Cleanup(srv.Close)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	ch, err := gcp.New(gcp.Options{Endpoint: srv.URL, Client: srv.Client(), Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
		HangTimeout: time.Second}).Watch(ctx)
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(1250 * time.Millisecond) // the first hangs (1 s) have timed out unchanged
	at := time.Now()
	fake.Set("instance/preempted", "TRUE")
	n := next(t, ch)
	if took := time.Since(at); n.Kind != notice.KindPreempt || took > 300*time.Millisecond {
		t.Fatalf("%s seen after %s; want preempt within 300ms of the change", n.Kind, took)
	}
}
