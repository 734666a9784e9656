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
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"
)

// API paths.
const (
	PathRegister = "/api/v1/agents/register"
	// Per-agent paths are PathAgents + "/" + id + one of the suffixes.
	PathAgents     = "/api/v1/agents"
	SuffixBeat     = "/heartbeat"
	SuffixNotice   = "/notices"
	SuffixDrain    = "/drains"
	SuffixBenchRes = "/benchmarks"
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
)

// Report kinds, which select the endpoint.
const (
	KindNotice    = "notice"
	KindDrain     = "drain"
	KindBenchmark = "benchmark"
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

// RegisterRequest is the body of POST /api/v1/agents/register.
type RegisterRequest struct {
	Hostname     string          `json:"hostname"`
	Cloud        string          `json:"cloud"`
	InstanceID   string          `json:"instance_id,omitempty"`
	AgentVersion string          `json:"agent_version"`
	GPUs         json.RawMessage `json:"gpus,omitempty"`
}

// RegisterResponse is the broker's answer to a registration.
type RegisterResponse struct {
	AgentID                  string `json:"agent_id"`
	Token                    string `json:"token"`
	HeartbeatIntervalSeconds int    `json:"heartbeat_interval_seconds,omitempty"`
}

// Heartbeat is the body of POST /api/v1/agents/{id}/heartbeat.
type Heartbeat struct {
	Time       time.Time       `json:"time"`
	Cloud      string          `json:"cloud"`
	GPUs       json.RawMessage `json:"gpus"` // []gpu.Stat; null when no GPU/driver
	GPUError   string          `json:"gpu_error,omitempty"`
	SpoolDepth int             `json:"spool_depth"`
	Draining   bool            `json:"draining"`
}

// HeartbeatResponse is the broker's answer to a heartbeat.
type HeartbeatResponse struct {
	// BenchmarkRequested asks the agent to run the GPU benchmark now.
	BenchmarkRequested bool `json:"benchmark_requested"`
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
	// (SetCloud afterwards).
	Register RegisterRequest

	mu      sync.Mutex
	agentID string
	token   string
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

// SetCloud records the cloud for the next registration.
func (c *Client) SetCloud(cloud string) {
	c.mu.Lock()
	c.Register.Cloud = cloud
	c.mu.Unlock()
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
		return "", "", err
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
	var resp RegisterResponse
	if err := c.post(ctx, PathRegister, boot, "", c.Register, &resp); err != nil {
		return fmt.Errorf("registering: %w", err)
	}
	if resp.AgentID == "" || resp.Token == "" || strings.ContainsAny(resp.AgentID, "/?#") {
		return fmt.Errorf("registering: %w: answer lacks a usable agent_id or token", ErrRejected)
	}
	c.agentID, c.token = resp.AgentID, resp.Token
	if c.StateFile != "" {
		sb, _ := json.Marshal(state{Broker: c.BaseURL, AgentID: c.agentID, Token: c.token})
		if err := writeFileAtomic(c.StateFile, sb, 0o600); err != nil {
			return fmt.Errorf("saving agent credentials: %w", err)
		}
	}
	return nil
}

// Heartbeat sends hb.
func (c *Client) Heartbeat(ctx context.Context, hb Heartbeat) (HeartbeatResponse, error) {
	var resp HeartbeatResponse
	err := c.agentPost(ctx, SuffixBeat, "", hb, &resp)
	return resp, err
}

// Send delivers one report.
func (c *Client) Send(ctx context.Context, r Report) error {
	var suffix string
	switch r.Kind {
	case KindNotice:
		suffix = SuffixNotice
	case KindDrain:
		suffix = SuffixDrain
	case KindBenchmark:
		suffix = SuffixBenchRes
	default:
		return fmt.Errorf("%w: unknown report kind %q", ErrRejected, r.Kind)
	}
	return c.agentPost(ctx, suffix, r.ID, r.Body, nil)
}

// agentPost posts to a per-agent endpoint, registering first when needed
// and once more when the broker no longer knows the token (401).
func (c *Client) agentPost(ctx context.Context, suffix, idemKey string, body, out any) error {
	for attempt := 0; ; attempt++ {
		id, tok, err := c.ensureRegistered(ctx)
		if err != nil {
			return err
		}
		err = c.post(ctx, PathAgents+"/"+id+suffix, tok, idemKey, body, out)
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

func (c *Client) post(ctx context.Context, path, token, idemKey string, body, out any) error {
	var b []byte
	if raw, ok := body.(json.RawMessage); ok {
		b = raw
	} else {
		var err error
		if b, err = json.Marshal(body); err != nil {
			return fmt.Errorf("encoding request: %w", err)
		}
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, strings.TrimRight(c.BaseURL, "/")+path, bytes.NewReader(b))
	if err != nil {
		return fmt.Errorf("%w: building request: %w", ErrRejected, err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+token)
	if idemKey != "" {
		req.Header.Set("Idempotency-Key", idemKey)
	}
	resp, err := c.httpClient().Do(req)
	if err != nil {
		// The error text carries the URL but never the token.
		return fmt.Errorf("%w: POST %s: %w", ErrUnavailable, path, err)
	}
	defer resp.Body.Close()
	rb, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return fmt.Errorf("%w: reading answer to %s: %w", ErrUnavailable, path, err)
	}
	switch {
	case resp.StatusCode == http.StatusUnauthorized:
		return errUnauthorized
	case resp.StatusCode == http.StatusTooManyRequests || resp.StatusCode >= 500:
		return fmt.Errorf("%w: POST %s: status %d", ErrUnavailable, path, resp.StatusCode)
	case resp.StatusCode/100 != 2:
		return fmt.Errorf("%w: POST %s: status %d: %s", ErrRejected, path, resp.StatusCode, brokerMessage(rb))
	}
	if out != nil && len(bytes.TrimSpace(rb)) > 0 {
		if err := json.Unmarshal(rb, out); err != nil {
			return fmt.Errorf("%w: decoding answer to %s: %w", ErrRejected, path, err)
		}
	}
	return nil
}

// brokerMessage extracts the message of an error answer: the broker's
// {"error":{"code","message"}} or a plain {"error":"..."} from a proxy.
func brokerMessage(b []byte) string {
	// The broker answers {"error":{"code":"...","message":"..."}} (docs/api.md).
	var e struct {
		Error struct {
			Code    string `json:"code"`
			Message string `json:"message"`
		} `json:"error"`
	}
	if json.Unmarshal(b, &e) == nil && e.Error.Message != "" {
		if e.Error.Code != "" {
			return e.Error.Code + ": " + e.Error.Message
		}
		return e.Error.Message
	}
	var plain struct {
		Error string `json:"error"`
	}
	if json.Unmarshal(b, &plain) == nil && plain.Error != "" {
		return plain.Error
	}
	if len(b) > 200 {
		b = b[:200]
	}
	return strings.TrimSpace(string(b))
}

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
	r.Logger.Warn("broker unreachable; report spooled", "kind", rep.Kind, "id", rep.ID, "spooled", r.Spool.Len())
}

// trySend sends rep and reports whether it must be kept for later.
func (r *Reporter) trySend(ctx context.Context, rep Report) (keep bool) {
	// A send already started is not cut short by Run stopping: SendTimeout
	// bounds it, and its answer decides whether the report is spooled.
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), r.SendTimeout)
	defer cancel()
	err := r.Client.Send(sctx, rep)
	switch {
	case err == nil:
		r.Logger.Info("reported to broker", "kind", rep.Kind, "id", rep.ID)
		return false
	case errors.Is(err, ErrUnavailable) || errors.Is(err, ErrNoToken) || errors.Is(err, errUnauthorized):
		r.Logger.Debug("broker delivery failed", "kind", rep.Kind, "err", err)
		return true
	default:
		r.Logger.Error("broker rejected report; dropping it", "kind", rep.Kind, "id", rep.ID, "err", err)
		return false
	}
}

func (r *Reporter) flush(ctx context.Context) {
	before := r.Spool.Len()
	if before == 0 {
		return
	}
	r.Spool.Drain(func(rep Report) bool { return r.trySend(ctx, rep) })
	if after := r.Spool.Len(); after < before {
		r.Logger.Info("delivered spooled reports", "delivered", before-after, "left", after)
	}
}
