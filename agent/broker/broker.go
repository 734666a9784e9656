// Package broker is the agent's client for the broker's agent API
// (/api/v1/agents, documented in docs/agent.md): register for a per-agent
// token, send heartbeats with GPU telemetry, and report benchmarks,
// preemption notices and drain results.
//
// Reports never wait on the broker: a Reporter sends them in order from its
// own goroutine and keeps those the broker cannot take now in a small local
// Spool, delivering them when it is back.
package broker

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/gpubroker/gpubroker/apiv1"
)

// Errors callers act on.
var (
	// ErrUnavailable: the broker could not take the request now (network
	// error, 5xx, 429); retry later.
	ErrUnavailable = errors.New("broker unavailable")
	// ErrRejected: the broker refused the request for good (4xx); retrying
	// the same request will not help.
	ErrRejected = errors.New("broker rejected request")
	// ErrNoToken: no bootstrap token to register with.
	ErrNoToken = errors.New("no bootstrap token")
	// ErrRegister: registration failed (it wraps the reason). Reports are
	// kept: the fault is the agent's identity, not the report.
	ErrRegister = errors.New("registration failed")
)

// Report kinds, which select the endpoint.
const (
	KindNotice    = "notice"
	KindDrain     = "drain"
	KindBenchmark = "benchmark"
	KindProgress  = "progress"
)

// Report is one message for the broker. ID is sent as Idempotency-Key so a
// report delivered twice (sent, answer lost, re-sent from the spool) counts
// once.
type Report struct {
	Kind string          `json:"kind"`
	ID   string          `json:"id"`
	Body json.RawMessage `json:"body"`
}

// NewReport encodes body as a report.
func NewReport(kind, id string, body any) (Report, error) {
	b, err := json.Marshal(body)
	if err != nil {
		return Report{}, fmt.Errorf("encoding %s report: %w", kind, err)
	}
	return Report{Kind: kind, ID: id, Body: b}, nil
}

// Client talks to one broker. It is safe for concurrent use.
type Client struct {
	// BaseURL of the broker, e.g. https://broker.example:8443.
	BaseURL string
	// HTTP sends requests (default: 10s timeout).
	HTTP *http.Client
	// TokenFile holds the bootstrap token used to register.
	TokenFile string
	// StateFile keeps the agent ID and per-agent token across restarts
	// (0600); empty keeps them in memory.
	StateFile string
	// Register is sent on (re-)registration; set it before first use
	// (SetRegistration afterwards).
	Register apiv1.RegisterRequest

	mu       sync.Mutex
	agentID  string
	token    string
	interval time.Duration
}

type state struct {
	Broker  string `json:"broker"`
	AgentID string `json:"agent_id"`
	Token   string `json:"token"`
}

func (c *Client) httpClient() *http.Client {
	if c.HTTP != nil {
		return c.HTTP
	}
	return &http.Client{Timeout: 10 * time.Second}
}

// SetRegistration changes what the next registration sends.
func (c *Client) SetRegistration(f func(*apiv1.RegisterRequest)) {
	c.mu.Lock()
	f(&c.Register)
	c.mu.Unlock()
}

// api returns the typed client for token.
func (c *Client) api(token string) *apiv1.Client {
	return &apiv1.Client{BaseURL: c.BaseURL, Token: token, HTTP: c.httpClient()}
}

// classify turns an apiv1 error into the agent's sentinels: ErrUnavailable
// (retry later), errUnauthorized (register again) or ErrRejected (this
// request will never be taken). The *apiv1.Error stays in the chain.
func classify(err error) error {
	if err == nil {
		return nil
	}
	if apiv1.StatusOf(err) == http.StatusUnauthorized {
		return fmt.Errorf("%w: %w", errUnauthorized, err)
	}
	if apiv1.IsTemporary(err) {
		return fmt.Errorf("%w: %w", ErrUnavailable, err)
	}
	return fmt.Errorf("%w: %w", ErrRejected, err)
}

// AgentID returns the registered ID ("" before registration).
func (c *Client) AgentID() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.agentID
}

// ensureRegistered loads saved credentials or registers.
func (c *Client) ensureRegistered(ctx context.Context) (id, token string, err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.token != "" {
		return c.agentID, c.token, nil
	}
	if c.StateFile != "" {
		if b, err := os.ReadFile(c.StateFile); err == nil {
			var s state
			if json.Unmarshal(b, &s) == nil && s.Token != "" && s.AgentID != "" && s.Broker == c.BaseURL {
				c.agentID, c.token = s.AgentID, s.Token
				return c.agentID, c.token, nil
			}
		}
	}
	if err := c.registerLocked(ctx); err != nil {
		return "", "", fmt.Errorf("%w: %w", ErrRegister, err)
	}
	return c.agentID, c.token, nil
}

func (c *Client) registerLocked(ctx context.Context) error {
	b, err := os.ReadFile(c.TokenFile)
	if err != nil {
		return fmt.Errorf("%w: reading token file: %w", ErrNoToken, err)
	}
	boot := strings.TrimSpace(string(b))
	if boot == "" {
		return fmt.Errorf("%w: token file %s is empty", ErrNoToken, c.TokenFile)
	}
	resp, err := c.api(boot).Register(ctx, c.Register)
	if err != nil {
		return fmt.Errorf("registering: %w", classify(err))
	}
	if resp.AgentID == "" || resp.Token == "" || strings.ContainsAny(resp.AgentID, "/?#") {
		return fmt.Errorf("registering: %w: answer lacks a usable agent_id or token", ErrRejected)
	}
	c.agentID, c.token = resp.AgentID, resp.Token
	if resp.HeartbeatIntervalSeconds > 0 {
		c.interval = time.Duration(resp.HeartbeatIntervalSeconds) * time.Second
	}
	if c.StateFile != "" {
		sb, _ := json.Marshal(state{Broker: c.BaseURL, AgentID: c.agentID, Token: c.token})
		if err := writeFileAtomic(c.StateFile, sb, 0o600); err != nil {
			return fmt.Errorf("saving agent credentials: %w", err)
		}
	}
	return nil
}

// Heartbeat sends hb.
func (c *Client) Heartbeat(ctx context.Context, hb apiv1.Heartbeat) (apiv1.HeartbeatResponse, error) {
	var resp apiv1.HeartbeatResponse
	err := c.withAgent(ctx, func(api *apiv1.Client, id string) error {
		var err error
		resp, err = api.Heartbeat(ctx, id, hb)
		return err
	})
	if err == nil && resp.HeartbeatIntervalSeconds > 0 {
		c.mu.Lock()
		c.interval = time.Duration(resp.HeartbeatIntervalSeconds) * time.Second
		c.mu.Unlock()
	}
	return resp, err
}

// HeartbeatInterval is the interval the broker last asked for (0 before
// it said).
func (c *Client) HeartbeatInterval() time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.interval
}

// Send delivers one report. Its body is decoded into the apiv1 message
// of its kind before it is sent, so even a report spooled by an older
// agent goes out as a well-formed apiv1 message (or is rejected here).
func (c *Client) Send(ctx context.Context, r Report) error {
	var call func(api *apiv1.Client, id string) error
	switch r.Kind {
	case KindNotice:
		var n apiv1.NoticeReport
		if err := json.Unmarshal(r.Body, &n); err != nil {
			return fmt.Errorf("%w: notice report %s: %w", ErrRejected, r.ID, err)
		}
		call = func(api *apiv1.Client, id string) error { _, err := api.ReportNotice(ctx, id, r.ID, n); return err }
	case KindDrain:
		var d apiv1.DrainReport
		if err := json.Unmarshal(r.Body, &d); err != nil {
			return fmt.Errorf("%w: drain report %s: %w", ErrRejected, r.ID, err)
		}
		call = func(api *apiv1.Client, id string) error { _, err := api.ReportDrain(ctx, id, r.ID, d); return err }
	case KindBenchmark:
		var b apiv1.BenchmarkReport
		if err := json.Unmarshal(r.Body, &b); err != nil {
			return fmt.Errorf("%w: benchmark report %s: %w", ErrRejected, r.ID, err)
		}
		call = func(api *apiv1.Client, id string) error { _, err := api.ReportBenchmark(ctx, id, r.ID, b); return err }
	case KindProgress:
		var p apiv1.ProgressReport
		if err := json.Unmarshal(r.Body, &p); err != nil {
			return fmt.Errorf("%w: progress report %s: %w", ErrRejected, r.ID, err)
		}
		call = func(api *apiv1.Client, id string) error { _, err := api.ReportProgress(ctx, id, p); return err }
	default:
		return fmt.Errorf("%w: unknown report kind %q", ErrRejected, r.Kind)
	}
	return c.withAgent(ctx, call)
}

// withAgent calls fn with the agent's credentials, registering first when
// needed and once more when the broker no longer knows the token (401).
func (c *Client) withAgent(ctx context.Context, fn func(api *apiv1.Client, id string) error) error {
	for attempt := 0; ; attempt++ {
		id, tok, err := c.ensureRegistered(ctx)
		if err != nil {
			return err
		}
		err = classify(fn(c.api(tok), id))
		if errors.Is(err, errUnauthorized) && attempt == 0 {
			c.mu.Lock()
			if c.token == tok {
				c.token, c.agentID = "", ""
				if c.StateFile != "" {
					_ = os.Remove(c.StateFile)
				}
			}
			c.mu.Unlock()
			continue
		}
		return err
	}
}

var errUnauthorized = fmt.Errorf("%w: 401 unauthorized", ErrRejected)

func writeFileAtomic(path string, b []byte, mode os.FileMode) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return err
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), ".tmp-*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if err := tmp.Chmod(mode); err != nil {
		tmp.Close()
		return err
	}
	if _, err := tmp.Write(b); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), path)
}

// Reporter delivers reports in order from one goroutine, spooling what the
// broker cannot take and retrying every RetryEvery.
type Reporter struct {
	Client     *Client
	Spool      *Spool
	Logger     *slog.Logger
	RetryEvery time.Duration // default 5s
	// SendTimeout bounds each delivery attempt (default 5s), so a broker
	// that accepts connections but never answers cannot stall the queue.
	SendTimeout time.Duration

	once  sync.Once
	queue chan Report
}

func (r *Reporter) init() {
	r.once.Do(func() {
		r.queue = make(chan Report, 64)
		if r.Logger == nil {
			r.Logger = slog.Default()
		}
		if r.RetryEvery <= 0 {
			r.RetryEvery = 5 * time.Second
		}
		if r.SendTimeout <= 0 {
			r.SendTimeout = 5 * time.Second
		}
	})
}

// Enqueue hands a report to the reporter without blocking. When the queue
// is full the report goes straight to the spool.
func (r *Reporter) Enqueue(rep Report) {
	r.init()
	select {
	case r.queue <- rep:
	default:
		if err := r.Spool.Put(rep); err != nil {
			r.Logger.Error("report lost: queue full and spool failed", "kind", rep.Kind, "id", rep.ID, "err", err)
		}
	}
}

// Run delivers reports until ctx is done. Then it tries once more to
// deliver what is still queued and spools the rest.
func (r *Reporter) Run(ctx context.Context) {
	r.init()
	t := time.NewTicker(r.RetryEvery)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			// Last chance: deliver what is queued within one SendTimeout,
			// spool the rest for the next start.
			final, cancel := context.WithTimeout(context.WithoutCancel(ctx), r.SendTimeout)
			defer cancel()
			for {
				select {
				case rep := <-r.queue:
					if final.Err() != nil || r.Spool.Len() > 0 || r.trySend(final, rep) {
						if err := r.Spool.Put(rep); err != nil {
							r.Logger.Error("report lost: spool failed", "kind", rep.Kind, "id", rep.ID, "err", err)
						}
					}
				default:
					return
				}
			}
		case rep := <-r.queue:
			r.handle(ctx, rep)
		case <-t.C:
			r.flush(ctx)
		}
	}
}

func (r *Reporter) handle(ctx context.Context, rep Report) {
	if r.Spool.Len() > 0 {
		r.flush(ctx)
	}
	if r.Spool.Len() == 0 && !r.trySend(ctx, rep) {
		return
	}
	if err := r.Spool.Put(rep); err != nil {
		r.Logger.Error("report lost: spool failed", "kind", rep.Kind, "id", rep.ID, "err", err)
		return
	}
	r.Logger.Warn("report not delivered yet (broker unreachable or agent not registered); kept for retry", "kind", rep.Kind, "id", rep.ID, "waiting", r.Spool.Len())
}

// trySend sends rep and reports whether it must be kept for later, and
// whether the broker refused it for good (dropped).
func (r *Reporter) trySend(ctx context.Context, rep Report) (keep bool) {
	keep, _ = r.send(ctx, rep)
	return keep
}

func (r *Reporter) send(ctx context.Context, rep Report) (keep, dropped bool) {
	// A send already started is not cut short by Run stopping: SendTimeout
	// bounds it, and its answer decides whether the report is spooled.
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), r.SendTimeout)
	defer cancel()
	err := r.Client.Send(sctx, rep)
	switch {
	case err == nil:
		r.Logger.Info("reported to broker", "kind", rep.Kind, "id", rep.ID)
		return false, false
	case errors.Is(err, ErrUnavailable) || errors.Is(err, ErrNoToken) || errors.Is(err, ErrRegister) || errors.Is(err, errUnauthorized):
		// Nothing is wrong with the report itself: keep it, in order.
		r.Logger.Debug("broker delivery failed; report kept", "kind", rep.Kind, "id", rep.ID, "err", err)
		return true, false
	default:
		// The broker refused this one report (4xx): it would be refused
		// forever, so it is dropped, loudly, and the others go on.
		r.Logger.Error("broker rejected report; dropping it", "kind", rep.Kind, "id", rep.ID, "err", err)
		return false, true
	}
}

func (r *Reporter) flush(ctx context.Context) {
	if r.Spool.Len() == 0 {
		return
	}
	delivered, dropped := 0, 0
	r.Spool.Drain(func(rep Report) bool {
		keep, drop := r.send(ctx, rep)
		switch {
		case drop:
			dropped++
		case !keep:
			delivered++
		}
		return keep
	})
	if delivered > 0 || dropped > 0 {
		r.Logger.Info("spooled reports sent", "delivered", delivered, "rejected", dropped, "left", r.Spool.Len())
	}
}
