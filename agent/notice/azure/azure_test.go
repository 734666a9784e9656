package azure_test

import (
	"context"
	"io"
	"log/slog"
	"net/http/httptest"
	"slices"
	"testing"
	"time"

	"github.com/gpubroker/gpubroker/agent/internal/fakecloud"
	"github.com/gpubroker/gpubroker/agent/notice"
	"github.com/gpubroker/gpubroker/agent/notice/azure"
)

func start(t *testing.T, fake *fakecloud.Azure, vmName string) (*azure.Watcher, <-chan notice.Notice) {
	t.Helper()
	srv := httptest.NewServer(fake)
	t.Cleanup(srv.Close)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	w := azure.New(azure.Options{
		Endpoint: srv.URL, Client: srv.Client(), Interval: 10 * time.Millisecond, VMName: vmName,
		Logger:  slog.New(slog.NewTextHandler(io.Discard, nil)),
		Backoff: notice.Backoff{Min: 5 * time.Millisecond, Max: 20 * time.Millisecond},
	})
	ch, err := w.Watch(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return w, ch
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

func TestEventsForThisVMOnly(t *testing.T) {
	fake := fakecloud.NewAzure("vm0")
	_, ch := start(t, fake, "") // name read from IMDS
	none(t, ch, 50*time.Millisecond)
	nb := time.Date(2026, 4, 11, 22, 26, 58, 0, time.UTC)
	fake.AddEvent("other-vm-event", "Preempt", []string{"vm1"}, nb)
	none(t, ch, 50*time.Millisecond)
	for _, tc := range []struct {
		typ  string
		kind notice.Kind
	}{
		{"Preempt", notice.KindPreempt},
		{"Terminate", notice.KindTerminate},
		{"Reboot", notice.KindReboot},
		{"Redeploy", notice.KindRedeploy},
		{"Freeze", notice.KindMaintenance},
	} {
		fake.AddEvent("ev-"+tc.typ, tc.typ, []string{"vm1", "VM0"}, nb)
		n := next(t, ch)
		if n.Kind != tc.kind || n.ID != "azure/ev-"+tc.typ || !n.Deadline.Equal(nb) || n.Detail != tc.typ {
			t.Errorf("%s: got %+v", tc.typ, n)
		}
	}
	none(t, ch, 50*time.Millisecond)
}

func TestIncarnationChangeWithOldEventsDoesNotRepeat(t *testing.T) {
	fake := fakecloud.NewAzure("vm0")
	w, ch := start(t, fake, "vm0")
	fake.AddEvent("A", "Preempt", []string{"vm0"}, time.Now().Add(30*time.Second))
	a := next(t, ch)
	// A new event bumps DocumentIncarnation; A is still listed and must not
	// come back.
	fake.AddEvent("B", "Freeze", []string{"vm0"}, time.Now().Add(30*time.Second))
	if b := next(t, ch); b.ID != "azure/B" {
		t.Fatalf("got %+v, want B", b)
	}
	if err := w.Ack(context.Background(), a); err != nil {
		t.Fatal(err)
	}
	if got := fake.AckedIDs(); !slices.Equal(got, []string{"A"}) {
		t.Fatalf("acked %v, want [A]", got)
	}
	none(t, ch, 80*time.Millisecond) // the ack bumped the incarnation again
}

func TestSurvivesOutage(t *testing.T) {
	fake := fakecloud.NewAzure("vm0")
	fake.SetDown(true) // even the VM name lookup fails at first
	_, ch := start(t, fake, "")
	none(t, ch, 100*time.Millisecond)
	fake.AddEvent("A", "Preempt", []string{"vm0"}, time.Time{})
	fake.SetDown(false)
	n := next(t, ch)
	if n.Kind != notice.KindPreempt || n.Deadline.IsZero() {
		t.Fatalf("got %+v (no NotBefore means now)", n)
	}
	fake.SetDown(true)
	time.Sleep(40 * time.Millisecond)
	fake.SetDown(false)
	none(t, ch, 80*time.Millisecond)
}

func TestAckRejectsForeignNotice(t *testing.T) {
	w := azure.New(azure.Options{Endpoint: "http://127.0.0.1:1"})
	if err := w.Ack(context.Background(), notice.Notice{ID: "aws/x", Cloud: notice.AWS}); err == nil {
		t.Fatal("want an error for a non-Azure notice")
	}
}

func TestParseErrors(t *testing.T) {
	for _, body := range []string{`{`, `{"DocumentIncarnation":"x"}`, `{"Events":[{"EventType":"Preempt"}]}`,
		`{"Events":[{"EventId":"a","EventType":"Preempt","NotBefore":"tomorrow"}]}`} {
		d, err := azure.ParseDocument([]byte(body))
		if err == nil {
			_, err = azure.Notices(d, "", time.Now())
		}
		if err == nil {
			t.Errorf("%s: want an error", body)
		}
	}
}

func FuzzParse(f *testing.F) {
	f.Add([]byte(`{"DocumentIncarnation":2,"Events":[{"EventId":"C706","EventStatus":"Scheduled","EventType":"Preempt","ResourceType":"VirtualMachine","Resources":["vm0"],"NotBefore":"Mon, 11 Apr 2026 22:26:58 GMT","EventSource":"Platform","DurationInSeconds":-1}]}`))
	f.Add([]byte(`{"DocumentIncarnation":1,"Events":[]}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		d, err := azure.ParseDocument(b)
		if err != nil {
			return
		}
		ns, err := azure.Notices(d, "vm0", time.Now())
		if err != nil {
			return
		}
		for _, n := range ns {
			if n.ID == "azure/" || n.Cloud != notice.Azure || n.Deadline.IsZero() {
				t.Fatalf("bad notice %+v from %q", n, b)
			}
		}
	})
}

// TestMalformedEventDoesNotHideAValidOne: a document with a broken event
// (bad NotBefore, missing EventId) still yields the valid Preempt beside
// it, both from Notices and from the running watcher.
func TestMalformedEventDoesNotHideAValidOne(t *testing.T) {
	body := `{"DocumentIncarnation":3,"Events":[` +
		`{"EventId":"bad","EventType":"Reboot","Resources":["vm0"],"NotBefore":"tomorrow"},` +
		`{"EventType":"Terminate","Resources":["vm0"]},` +
		`{"EventId":"good","EventType":"Preempt","Resources":["vm0"],"NotBefore":"Mon, 11 Apr 2026 22:26:58 GMT"}]}`
	d, err := azure.ParseDocument([]byte(body))
	if err != nil {
		t.Fatal(err)
	}
	ns, err := azure.Notices(d, "vm0", time.Now())
	if err == nil || len(ns) != 1 || ns[0].ID != "azure/good" || ns[0].Kind != notice.KindPreempt {
		t.Fatalf("notices %+v, err %v; want the Preempt and an error naming the others", ns, err)
	}
	fake := fakecloud.NewAzure("vm0")
	_, ch := start(t, fake, "vm0")
	fake.AddEvent("bad", "Reboot", []string{"vm0"}, time.Time{})
	fake.AddEvent("good", "Preempt", []string{"vm0"}, time.Now().Add(time.Minute))
	fake.SetNotBefore("bad", "not a date")
	seen := map[string]bool{}
	for range 2 {
		seen[next(t, ch).ID] = true
		if seen["azure/good"] {
			return
		}
	}
	t.Fatalf("the valid Preempt was not delivered: %v", seen)
}
