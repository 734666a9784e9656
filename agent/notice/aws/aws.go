// Package aws watches the EC2 instance metadata service (IMDSv2) for spot
// interruption notices, rebalance recommendations and scheduled maintenance
// events.
//
// IMDSv2 needs a session token: PUT /latest/api/token with a TTL header, then
// the token on every GET. The watcher refreshes the token before it expires
// and fetches a new one whenever IMDS answers 401 (token expired early, or the
// instance was stopped and started).
package aws

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/gpubroker/gpubroker/agent/notice"
)

// DefaultEndpoint is the link-local IMDS address.
const DefaultEndpoint = "http://169.254.169.254"

// Paths polled on IMDS.
const (
	TokenPath          = "/latest/api/token"
	InstanceActionPath = "/latest/meta-data/spot/instance-action"
	RebalancePath      = "/latest/meta-data/events/recommendations/rebalance"
	MaintenancePath    = "/latest/meta-data/events/maintenance/scheduled"
)

// Header names of IMDSv2.
const (
	TokenHeader    = "X-aws-ec2-metadata-token"
	TokenTTLHeader = "X-aws-ec2-metadata-token-ttl-seconds"
)

// ErrUnauthorized is returned when IMDS rejects the session token (401).
var ErrUnauthorized = errors.New("imds: token rejected (401)")

// Options configure a Watcher. Zero fields take the documented defaults.
type Options struct {
	// Endpoint is the IMDS base URL (default DefaultEndpoint).
	Endpoint string
	// Client sends the requests (default: a client with a 2s timeout).
	Client *http.Client
	// Interval between polls of the spot instance-action (default 500ms: the
	// notice gives 2 minutes, and a short interval keeps the p99 from the
	// notice to the first drain action under 1s).
	Interval time.Duration
	// SlowInterval between polls of rebalance and maintenance (default 5s).
	SlowInterval time.Duration
	// TokenTTL asked for each session token (default 6h; IMDS allows 1s..6h).
	TokenTTL time.Duration
	// Now is the clock (default time.Now).
	Now func() time.Time
	// Backoff after errors (default 200ms..5s).
	Backoff notice.Backoff
	// Logger (default slog.Default()).
	Logger *slog.Logger
}

// Watcher polls IMDSv2. It implements notice.Watcher.
type Watcher struct {
	o Options

	mu       sync.Mutex // guards the token: the sources poll concurrently
	token    string
	tokenExp time.Time
}

var _ notice.Watcher = (*Watcher)(nil)

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
		o.Interval = 500 * time.Millisecond
	}
	if o.SlowInterval <= 0 {
		o.SlowInterval = 5 * time.Second
	}
	if o.TokenTTL <= 0 {
		o.TokenTTL = 6 * time.Hour
	}
	o.TokenTTL = min(max(o.TokenTTL, time.Second), 6*time.Hour)
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

// Watch implements notice.Watcher.
func (w *Watcher) Watch(ctx context.Context) (<-chan notice.Notice, error) {
	ch := make(chan notice.Notice, 4)
	go func() {
		defer close(ch)
		w.loop(ctx, ch)
	}()
	return ch, nil
}

// source is one IMDS path polled on its own schedule with its own
// back-off, so a failing or slow source never delays another: the spot
// instance-action poll keeps its 500 ms cadence while the maintenance
// endpoint is down.
type source struct {
	path     string
	interval time.Duration
	parse    func(body []byte, now time.Time) ([]notice.Notice, error)
}

func (w *Watcher) sources() []source {
	return []source{
		{InstanceActionPath, w.o.Interval, func(b []byte, now time.Time) ([]notice.Notice, error) {
			n, err := ParseInstanceAction(b, now)
			return []notice.Notice{n}, err
		}},
		{RebalancePath, w.o.SlowInterval, func(b []byte, now time.Time) ([]notice.Notice, error) {
			n, err := ParseRebalance(b, now)
			return []notice.Notice{n}, err
		}},
		{MaintenancePath, w.o.SlowInterval, ParseMaintenance},
	}
}

// loop runs one poller per source; they share the session token and the
// de-duplication.
func (w *Watcher) loop(ctx context.Context, ch chan<- notice.Notice) {
	seen := notice.NewSeen(0)
	var seenMu sync.Mutex
	emit := func(n notice.Notice) bool {
		seenMu.Lock()
		fresh := seen.Add(n.ID)
		seenMu.Unlock()
		return !fresh || notice.Emit(ctx, ch, n)
	}
	var wg sync.WaitGroup
	for _, src := range w.sources() {
		wg.Go(func() { w.poll(ctx, src, emit) })
	}
	wg.Wait()
}

func (w *Watcher) poll(ctx context.Context, src source, emit func(notice.Notice) bool) {
	log := w.o.Logger.With("cloud", notice.AWS, "path", src.path)
	bo := w.o.Backoff // this source's own back-off
	failing := false
	for {
		body, err := w.get(ctx, src.path)
		if err == nil && body != nil {
			var ns []notice.Notice
			if ns, err = src.parse(body, w.o.Now()); err == nil {
				for _, n := range ns {
					if !emit(n) {
						return
					}
				}
			}
		}
		wait := src.interval
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			wait = max(wait, bo.Next())
			if !failing {
				log.Warn("imds poll failed; retrying with backoff", "err", err)
			}
			failing = true
		} else {
			if failing {
				log.Info("imds reachable again")
			}
			failing = false
			bo.Reset()
		}
		if !notice.Sleep(ctx, wait) {
			return
		}
	}
}

// get fetches path with a valid token. It returns nil, nil on 404 (no
// notice) and re-fetches the token once on 401.
func (w *Watcher) get(ctx context.Context, path string) ([]byte, error) {
	for attempt := 0; ; attempt++ {
		tok, err := w.ensureToken(ctx)
		if err != nil {
			return nil, err
		}
		body, err := w.doGet(ctx, path, tok)
		if errors.Is(err, ErrUnauthorized) && attempt == 0 {
			w.mu.Lock()
			if w.token == tok {
				w.token = "" // stale: fetch a new one and retry once
			}
			w.mu.Unlock()
			continue
		}
		return body, err
	}
}

func (w *Watcher) doGet(ctx context.Context, path, tok string) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, w.o.Endpoint+path, nil)
	if err != nil {
		return nil, fmt.Errorf("building request for %s: %w", path, err)
	}
	req.Header.Set(TokenHeader, tok)
	resp, err := w.o.Client.Do(req)
	if err != nil {
		return nil, fmt.Errorf("GET %s: %w", path, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w", path, err)
	}
	switch resp.StatusCode {
	case http.StatusOK:
		return body, nil
	case http.StatusNotFound:
		return nil, nil
	case http.StatusUnauthorized:
		return nil, ErrUnauthorized
	default:
		return nil, fmt.Errorf("GET %s: status %d", path, resp.StatusCode)
	}
}

// ensureToken returns the current token, fetching a new one when none is
// held or the held one expires within a tenth of its TTL (at most a minute),
// so a poll never goes out with a token about to lapse.
func (w *Watcher) ensureToken(ctx context.Context) (string, error) {
	// One token fetch at a time; the others wait for its result.
	w.mu.Lock()
	defer w.mu.Unlock()
	margin := min(w.o.TokenTTL/10, time.Minute)
	if w.token != "" && w.o.Now().Before(w.tokenExp.Add(-margin)) {
		return w.token, nil
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPut, w.o.Endpoint+TokenPath, nil)
	if err != nil {
		return "", fmt.Errorf("building token request: %w", err)
	}
	ttl := int(w.o.TokenTTL / time.Second)
	req.Header.Set(TokenTTLHeader, strconv.Itoa(ttl))
	issued := w.o.Now()
	resp, err := w.o.Client.Do(req)
	if err != nil {
		return "", fmt.Errorf("PUT %s: %w", TokenPath, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 4096))
	if err != nil {
		return "", fmt.Errorf("reading token: %w", err)
	}
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("PUT %s: status %d", TokenPath, resp.StatusCode)
	}
	tok := strings.TrimSpace(string(body))
	if tok == "" {
		return "", fmt.Errorf("PUT %s: empty token", TokenPath)
	}
	// IMDS echoes the TTL it granted; trust it over what was asked.
	if s := resp.Header.Get(TokenTTLHeader); s != "" {
		if n, err := strconv.Atoi(s); err == nil && n > 0 {
			ttl = n
		}
	}
	w.token, w.tokenExp = tok, issued.Add(time.Duration(ttl)*time.Second)
	return tok, nil
}

// instanceAction is the body of spot/instance-action.
type instanceAction struct {
	Action string `json:"action"`
	Time   string `json:"time"`
}

// ParseInstanceAction parses a spot instance-action body such as
// {"action":"terminate","time":"2026-04-24T17:11:44Z"}.
func ParseInstanceAction(body []byte, now time.Time) (notice.Notice, error) {
	var a instanceAction
	if err := json.Unmarshal(body, &a); err != nil {
		return notice.Notice{}, fmt.Errorf("parsing instance-action: %w", err)
	}
	var kind notice.Kind
	switch a.Action {
	case "terminate":
		kind = notice.KindPreempt
	case "stop":
		kind = notice.KindStop
	case "hibernate":
		kind = notice.KindHibernate
	default:
		return notice.Notice{}, fmt.Errorf("parsing instance-action: unknown action %q (want terminate, stop or hibernate)", a.Action)
	}
	t, err := time.Parse(time.RFC3339, a.Time)
	if err != nil {
		return notice.Notice{}, fmt.Errorf("parsing instance-action time %q: %w", a.Time, err)
	}
	return notice.Notice{
		Kind: kind, ID: "aws/instance-action/" + a.Action + "/" + t.UTC().Format(time.RFC3339),
		Cloud: notice.AWS, Deadline: t, Observed: now, Detail: a.Action, Raw: notice.RawJSON(body),
	}, nil
}

// ParseRebalance parses a rebalance recommendation body
// {"noticeTime":"2026-04-24T17:11:44Z"}. Rebalance has no deadline.
func ParseRebalance(body []byte, now time.Time) (notice.Notice, error) {
	var r struct {
		NoticeTime string `json:"noticeTime"`
	}
	if err := json.Unmarshal(body, &r); err != nil {
		return notice.Notice{}, fmt.Errorf("parsing rebalance recommendation: %w", err)
	}
	t, err := time.Parse(time.RFC3339, r.NoticeTime)
	if err != nil {
		return notice.Notice{}, fmt.Errorf("parsing rebalance noticeTime %q: %w", r.NoticeTime, err)
	}
	return notice.Notice{
		Kind: notice.KindRebalance, ID: "aws/rebalance/" + t.UTC().Format(time.RFC3339),
		Cloud: notice.AWS, Observed: now, Detail: "rebalance-recommendation", Raw: notice.RawJSON(body),
	}, nil
}

// maintenanceEvent is one element of events/maintenance/scheduled.
type maintenanceEvent struct {
	Code        string `json:"Code"`
	Description string `json:"Description"`
	EventID     string `json:"EventId"`
	NotAfter    string `json:"NotAfter"`
	NotBefore   string `json:"NotBefore"`
	State       string `json:"State"`
}

// maintenanceTime is the layout IMDS uses for maintenance times
// ("21 Jan 2019 09:00:43 GMT").
const maintenanceTime = "2 Jan 2006 15:04:05 MST"

// ParseMaintenance parses the scheduled-maintenance array. Events already
// completed or cancelled are skipped.
func ParseMaintenance(body []byte, now time.Time) ([]notice.Notice, error) {
	var evs []maintenanceEvent
	if err := json.Unmarshal(body, &evs); err != nil {
		return nil, fmt.Errorf("parsing scheduled maintenance: %w", err)
	}
	var out []notice.Notice
	for i, e := range evs {
		if e.State == "completed" || e.State == "canceled" || e.State == "cancelled" {
			continue
		}
		if e.EventID == "" {
			return nil, fmt.Errorf("parsing scheduled maintenance: event %d has no EventId", i)
		}
		var deadline time.Time
		if e.NotBefore != "" {
			t, err := time.Parse(maintenanceTime, e.NotBefore)
			if err != nil {
				return nil, fmt.Errorf("parsing scheduled maintenance %s NotBefore %q: %w", e.EventID, e.NotBefore, err)
			}
			deadline = t
		}
		raw, _ := json.Marshal(e)
		out = append(out, notice.Notice{
			Kind: notice.KindMaintenance, ID: "aws/maintenance/" + e.EventID, Cloud: notice.AWS,
			Deadline: deadline, Observed: now, Detail: e.Code, Raw: raw,
		})
	}
	return out, nil
}
