// Package azure watches Azure Scheduled Events (IMDS
// /metadata/scheduledevents) for Preempt, Terminate, Reboot, Redeploy and
// Freeze events that affect this VM, and acknowledges an event (POST
// StartRequests) once the agent has drained, so the platform may proceed
// without waiting out NotBefore.
package azure

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/gpubroker/gpubroker/agent/notice"
)

// DefaultEndpoint is the link-local IMDS address.
const DefaultEndpoint = "http://169.254.169.254"

// APIVersion is pinned: the document format is versioned and 2020-07-01 is
// the newest version whose format this package parses.
const APIVersion = "2020-07-01"

// Paths on IMDS.
const (
	EventsPath = "/metadata/scheduledevents"
	// NamePath gives this VM's resource name, the name Scheduled Events use
	// in Resources.
	NamePath = "/metadata/instance/compute/name"
)

// Options configure a Watcher.
type Options struct {
	// Endpoint is the IMDS base URL (default DefaultEndpoint).
	Endpoint string
	// Client sends the requests (default: a client with a 2s timeout).
	Client *http.Client
	// Interval between polls (default 1s, as Azure recommends).
	Interval time.Duration
	// VMName is this VM's resource name; read from IMDS when empty.
	VMName string
	// Now is the clock (default time.Now).
	Now func() time.Time
	// Backoff after errors (default 200ms..5s).
	Backoff notice.Backoff
	// Logger (default slog.Default()).
	Logger *slog.Logger
}

// Watcher implements notice.Watcher and notice.Acker for Azure.
type Watcher struct{ o Options }

var (
	_ notice.Watcher = (*Watcher)(nil)
	_ notice.Acker   = (*Watcher)(nil)
)

// New returns a watcher with defaults filled in.
func New(o Options) *Watcher {
	if o.Endpoint == "" {
		o.Endpoint = DefaultEndpoint
	}
	o.Endpoint = strings.TrimRight(o.Endpoint, "/")
	if o.Client == nil {
		o.Client = &http.Client{Timeout: 2 * time.Second}
	}
	if o.Interval <= 0 {
		o.Interval = time.Second
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

// Document is the Scheduled Events response.
type Document struct {
	DocumentIncarnation int     `json:"DocumentIncarnation"`
	Events              []Event `json:"Events"`
}

// Event is one scheduled event.
type Event struct {
	EventID           string   `json:"EventId"`
	EventStatus       string   `json:"EventStatus"`
	EventType         string   `json:"EventType"`
	ResourceType      string   `json:"ResourceType"`
	Resources         []string `json:"Resources"`
	NotBefore         string   `json:"NotBefore"`
	Description       string   `json:"Description,omitempty"`
	EventSource       string   `json:"EventSource,omitempty"`
	DurationInSeconds int      `json:"DurationInSeconds"`
}

// ParseDocument parses a Scheduled Events body.
func ParseDocument(body []byte) (Document, error) {
	var d Document
	if err := json.Unmarshal(body, &d); err != nil {
		return Document{}, fmt.Errorf("parsing scheduled events: %w", err)
	}
	return d, nil
}

// Notices returns the notices in d that affect vmName. Events of unknown
// types are skipped. A malformed event (no EventId, an unreadable
// NotBefore) is left out and reported in the error, but never hides the
// valid events beside it: a Preempt must be drained even when the
// document also holds garbage.
func Notices(d Document, vmName string, now time.Time) ([]notice.Notice, error) {
	var out []notice.Notice
	var errs []error
	for _, e := range d.Events {
		if e.EventID == "" {
			errs = append(errs, errors.New("parsing scheduled events: event without EventId"))
			continue
		}
		if vmName != "" && !slices.ContainsFunc(e.Resources, func(r string) bool { return strings.EqualFold(r, vmName) }) {
			continue
		}
		var kind notice.Kind
		switch e.EventType {
		case "Preempt":
			kind = notice.KindPreempt
		case "Terminate":
			kind = notice.KindTerminate
		case "Reboot":
			kind = notice.KindReboot
		case "Redeploy":
			kind = notice.KindRedeploy
		case "Freeze":
			kind = notice.KindMaintenance
		default:
			continue
		}
		deadline := now // "Started", or no NotBefore: the platform acts now
		if e.NotBefore != "" {
			t, err := time.Parse(time.RFC1123, e.NotBefore)
			if err != nil {
				errs = append(errs, fmt.Errorf("parsing scheduled event %s NotBefore %q: %w", e.EventID, e.NotBefore, err))
				continue
			}
			deadline = t
		}
		raw, _ := json.Marshal(e)
		out = append(out, notice.Notice{
			Kind: kind, ID: "azure/" + e.EventID, Cloud: notice.Azure, Deadline: deadline,
			Observed: now, Detail: e.EventType, Raw: raw,
		})
	}
	return out, errors.Join(errs...)
}

// Watch implements notice.Watcher.
func (w *Watcher) Watch(ctx context.Context) (<-chan notice.Notice, error) {
	ch := make(chan notice.Notice, 4)
	go func() {
		defer close(ch)
		w.loop(ctx, ch)
	}()
	return ch, nil
}

func (w *Watcher) loop(ctx context.Context, ch chan<- notice.Notice) {
	log := w.o.Logger.With("cloud", notice.Azure)
	seen := notice.NewSeen(0)
	bo := w.o.Backoff
	name := w.o.VMName
	lastInc, badInc := -1, -1
	failing := false
	for {
		err := func() error {
			if name == "" {
				n, err := w.vmName(ctx)
				if err != nil {
					return err
				}
				name = n
				log.Info("watching scheduled events", "vm", name)
			}
			body, err := w.do(ctx, http.MethodGet, EventsPath, nil)
			if err != nil {
				return err
			}
			d, err := ParseDocument(body)
			if err != nil {
				return err
			}
			if d.DocumentIncarnation == lastInc {
				return nil // nothing changed since the last poll
			}
			ns, perr := Notices(d, name, w.o.Now())
			if perr != nil && d.DocumentIncarnation != badInc {
				// Said once per document: the valid events still go out.
				log.Warn("scheduled events document has malformed events; acting on the others", "err", perr)
				badInc = d.DocumentIncarnation
			}
			for _, n := range ns {
				if seen.Add(n.ID) && !notice.Emit(ctx, ch, n) {
					return ctx.Err()
				}
			}
			lastInc = d.DocumentIncarnation
			return nil
		}()
		wait := w.o.Interval
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			if !failing {
				log.Warn("scheduled events poll failed; retrying with backoff", "err", err)
			}
			failing = true
			wait = max(wait, bo.Next())
		} else {
			if failing {
				log.Info("scheduled events reachable again")
			}
			failing = false
			bo.Reset()
		}
		if !notice.Sleep(ctx, wait) {
			return
		}
	}
}

func (w *Watcher) vmName(ctx context.Context) (string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet,
		w.o.Endpoint+NamePath+"?api-version=2021-02-01&format=text", nil)
	if err != nil {
		return "", fmt.Errorf("building VM name request: %w", err)
	}
	body, err := w.send(req)
	if err != nil {
		return "", fmt.Errorf("reading VM name: %w", err)
	}
	name := strings.TrimSpace(string(body))
	if name == "" {
		return "", errors.New("reading VM name: empty")
	}
	return name, nil
}

// Ack approves the event behind n (POST StartRequests) so the platform may
// start it now. Acknowledging an event that is already gone is not an error.
func (w *Watcher) Ack(ctx context.Context, n notice.Notice) error {
	id, ok := strings.CutPrefix(n.ID, "azure/")
	if !ok || n.Cloud != notice.Azure {
		return fmt.Errorf("ack: %q is not an Azure scheduled event", n.ID)
	}
	body, _ := json.Marshal(map[string]any{"StartRequests": []map[string]string{{"EventId": id}}})
	_, err := w.do(ctx, http.MethodPost, EventsPath, body)
	if err != nil {
		return fmt.Errorf("ack %s: %w", id, err)
	}
	return nil
}

func (w *Watcher) do(ctx context.Context, method, path string, body []byte) ([]byte, error) {
	var r io.Reader
	if body != nil {
		r = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, w.o.Endpoint+path+"?api-version="+APIVersion, r)
	if err != nil {
		return nil, fmt.Errorf("building %s %s: %w", method, path, err)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	return w.send(req)
}

func (w *Watcher) send(req *http.Request) ([]byte, error) {
	req.Header.Set("Metadata", "true")
	resp, err := w.o.Client.Do(req)
	if err != nil {
		return nil, fmt.Errorf("%s %s: %w", req.Method, req.URL.Path, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w", req.URL.Path, err)
	}
	if resp.StatusCode/100 != 2 {
		return nil, fmt.Errorf("%s %s: status %d", req.Method, req.URL.Path, resp.StatusCode)
	}
	return b, nil
}
