// Package gcp watches the Compute Engine metadata server for preemption
// (instance/preempted) and host maintenance (instance/maintenance-event).
//
// It does not poll: each key is read once, then with
// ?wait_for_change=true&last_etag=E, a hanging GET the server answers only
// when the value changes (or its timeout_sec passes). A notice is seen
// within one round trip of the change.
package gcp

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/gpubroker/gpubroker/agent/notice"
)

// DefaultEndpoint is the metadata server.
const DefaultEndpoint = "http://metadata.google.internal"

// Keys watched, relative to /computeMetadata/v1/.
const (
	PreemptedKey   = "instance/preempted"
	MaintenanceKey = "instance/maintenance-event"
)

// Warnings GCP gives: 30s for Spot/preemptible VMs; 60s before a
// TERMINATE_ON_HOST_MAINTENANCE for GPU VMs.
const (
	PreemptWarning     = 30 * time.Second
	MaintenanceWarning = 60 * time.Second
)

// Options configure a Watcher.
type Options struct {
	// Endpoint is the metadata base URL (default DefaultEndpoint).
	Endpoint string
	// Client sends the requests. It must not have a timeout shorter than
	// HangTimeout; the default has none and relies on contexts.
	Client *http.Client
	// HangTimeout is the timeout_sec sent with each hanging GET (default 60s).
	HangTimeout time.Duration
	// Now is the clock (default time.Now).
	Now func() time.Time
	// Backoff after errors (default 200ms..5s).
	Backoff notice.Backoff
	// Logger (default slog.Default()).
	Logger *slog.Logger
}

// Watcher implements notice.Watcher for GCP.
type Watcher struct{ o Options }

var _ notice.Watcher = (*Watcher)(nil)

// New returns a watcher with defaults filled in.
func New(o Options) *Watcher {
	if o.Endpoint == "" {
		o.Endpoint = DefaultEndpoint
	}
	o.Endpoint = strings.TrimRight(o.Endpoint, "/")
	if o.Client == nil {
		o.Client = &http.Client{}
	}
	if o.HangTimeout <= 0 {
		o.HangTimeout = 60 * time.Second
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Backoff.Max == 0 {
		o.Backoff.Max = 5 * time.Second
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	return &Watcher{o: o}
}

// Watch implements notice.Watcher: one hanging GET loop per key.
func (w *Watcher) Watch(ctx context.Context) (<-chan notice.Notice, error) {
	ch := make(chan notice.Notice, 4)
	done := make(chan struct{}, 2)
	for _, key := range []string{PreemptedKey, MaintenanceKey} {
		go func() {
			defer func() { done <- struct{}{} }()
			w.loop(ctx, key, ch)
		}()
	}
	go func() {
		<-done
		<-done
		close(ch)
	}()
	return ch, nil
}

func (w *Watcher) loop(ctx context.Context, key string, ch chan<- notice.Notice) {
	log := w.o.Logger.With("cloud", notice.GCP, "key", key)
	seen := notice.NewSeen(0)
	bo := w.o.Backoff
	etag := ""
	failing := false
	for ctx.Err() == nil {
		asked := time.Now()
		hanging := etag != ""
		value, newTag, err := w.get(ctx, key, etag)
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			if !failing {
				log.Warn("metadata read failed; retrying with backoff", "err", err)
			}
			failing = true
			if !notice.Sleep(ctx, bo.Next()) {
				return
			}
			continue
		}
		if failing {
			log.Info("metadata server reachable again")
		}
		failing = false
		bo.Reset()
		sameTag := newTag != "" && newTag == etag
		etag = newTag
		if n, ok := Parse(key, value, newTag, w.o.Now()); ok && seen.Add(n.ID) {
			if !notice.Emit(ctx, ch, n) {
				return
			}
		}
		// An unchanged answer after the hang ran its course (timeout_sec
		// elapsed) is the normal idle cycle: re-arm at once, or a notice
		// arriving in the gap would wait. Only an answer without an ETag,
		// or an unchanged one that came back early (a server that does not
		// hang), is paced so a misbehaving server cannot make it spin.
		early := time.Since(asked) < w.o.HangTimeout/2
		if newTag == "" || (sameTag && (!hanging || early)) {
			if !notice.Sleep(ctx, time.Second) {
				return
			}
		}
	}
}

// get reads key; with etag set it hangs until the value differs from etag.
func (w *Watcher) get(ctx context.Context, key, etag string) (value, newTag string, err error) {
	q := url.Values{}
	timeout := 5 * time.Second
	if etag != "" {
		q.Set("wait_for_change", "true")
		q.Set("last_etag", etag)
		q.Set("timeout_sec", strconv.Itoa(int(w.o.HangTimeout/time.Second)))
		timeout = w.o.HangTimeout + 10*time.Second
	}
	u := w.o.Endpoint + "/computeMetadata/v1/" + key
	if len(q) > 0 {
		u += "?" + q.Encode()
	}
	rctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(rctx, http.MethodGet, u, nil)
	if err != nil {
		return "", "", fmt.Errorf("building request for %s: %w", key, err)
	}
	req.Header.Set("Metadata-Flavor", "Google")
	resp, err := w.o.Client.Do(req)
	if err != nil {
		return "", "", fmt.Errorf("GET %s: %w", key, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	if err != nil {
		return "", "", fmt.Errorf("reading %s: %w", key, err)
	}
	if resp.StatusCode != http.StatusOK {
		return "", "", fmt.Errorf("GET %s: status %d", key, resp.StatusCode)
	}
	// A proxy or captive portal answering in place of the metadata server
	// would not set this header.
	if resp.Header.Get("Metadata-Flavor") != "Google" {
		return "", "", fmt.Errorf("GET %s: response lacks Metadata-Flavor: Google", key)
	}
	return strings.TrimSpace(string(body)), resp.Header.Get("ETag"), nil
}

// Parse turns a metadata value into a notice; ok is false for the quiet
// values (FALSE, NONE) and for values it does not know.
func Parse(key, value, etag string, now time.Time) (n notice.Notice, ok bool) {
	base := notice.Notice{Cloud: notice.GCP, Observed: now, Detail: value, Raw: notice.RawJSON([]byte(value))}
	switch key {
	case PreemptedKey:
		if !strings.EqualFold(value, "TRUE") {
			return notice.Notice{}, false
		}
		// A VM is preempted once in its life: one ID, whatever the ETag.
		base.Kind, base.ID, base.Deadline = notice.KindPreempt, "gcp/preempted", now.Add(PreemptWarning)
		return base, true
	case MaintenanceKey:
		switch {
		case value == "" || strings.EqualFold(value, "NONE"):
			return notice.Notice{}, false
		case strings.HasPrefix(value, "TERMINATE_ON_HOST_MAINTENANCE"):
			// The VM is stopped for the maintenance: the workload dies,
			// so this gets the full drain like a preemption.
			base.Kind, base.Deadline = notice.KindTerminate, now.Add(MaintenanceWarning)
		case strings.HasPrefix(value, "MIGRATE_ON_HOST_MAINTENANCE"):
			// Live migration: no deadline, the VM survives.
			base.Kind = notice.KindMaintenance
		default:
			return notice.Notice{}, false
		}
		base.ID = "gcp/maintenance/" + value + "/" + etag
		return base, true
	}
	return notice.Notice{}, false
}
