// Package dashboard is gpubroker's HTTP face: the versioned JSON API under
// /api/v1 for users, tools and in-VM agents, bearer-token auth, /metrics,
// /healthz and /readyz. It holds no business rules: it validates input,
// calls the store, the catalog and the planner, and encodes the answers.
package httpapi

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"strconv"
	"time"

	"github.com/gpubroker/gpubroker/pricing"
	"github.com/gpubroker/gpubroker/store"
)

// Store is the persistence the API needs; *store.Broker implements it.
type Store interface {
	CreateWorkload(ctx context.Context, w store.WorkloadRecord, now time.Time) (store.WorkloadRecord, error)
	UpdateWorkload(ctx context.Context, w store.WorkloadRecord, now time.Time) (store.WorkloadRecord, error)
	GetWorkload(ctx context.Context, name string) (store.WorkloadRecord, error)
	ListWorkloads(ctx context.Context) ([]store.WorkloadRecord, error)
	DeleteWorkload(ctx context.Context, name string) error
	RegisterAgent(ctx context.Context, inst store.InstanceRecord, tokenHash string, now time.Time) (store.InstanceRecord, error)
	Heartbeats(ctx context.Context, ups []store.HeartbeatUpdate) ([]error, error)
	GetInstance(ctx context.Context, id string) (store.InstanceRecord, error)
	ListInstances(ctx context.Context, workload, state string) ([]store.InstanceRecord, error)
	CountInstances(ctx context.Context, activeSince time.Time) (total, active int64, err error)
	RecordReport(ctx context.Context, r store.Report) (store.EventRecord, bool, error)
	ListEvents(ctx context.Context, f store.EventFilter) ([]store.EventRecord, error)
	ListBenchmarks(ctx context.Context, instanceType string) ([]store.BenchmarkRecord, error)
	LookupToken(ctx context.Context, hash string) (store.TokenRecord, error)
	AddToken(ctx context.Context, t store.TokenRecord) error
}

var _ Store = (*store.Broker)(nil)

// Planner computes plans; the daemon implements it with the policy parser
// and the optimizer. Errors wrapping ErrInvalidInput are the caller's fault
// (400, message shown); ErrNoPolicy means nothing is loaded (404).
type Planner interface {
	// Plan parses the policy file data (name is used in error positions)
	// and plans it against the current catalog.
	Plan(ctx context.Context, name string, data []byte) (any, error)
	// Current returns the latest plan of the loaded policy.
	Current(ctx context.Context) (any, error)
	// Budgets returns the loaded policy's budgets with their spending.
	Budgets(ctx context.Context) (any, error)
}

// Sentinel errors a Planner returns.
var (
	ErrInvalidInput = errors.New("invalid input")
	// ErrInfeasible: the policy is valid but cannot be placed (422).
	ErrInfeasible = errors.New("infeasible")
	ErrNoPolicy   = errors.New("no policy loaded")
)

// Config wires a Server.
type Config struct {
	Store Store
	// Catalog returns the current price catalog (never nil).
	Catalog func() *pricing.Catalog
	// Planner may be nil: plan and budget routes then answer 503.
	Planner Planner
	Logger  *slog.Logger
	Now     func() time.Time
	Metrics *Metrics
	// Ready reports whether the daemon can serve (store reachable, catalog
	// loaded); nil means always ready.
	Ready func(ctx context.Context) error
	// Fleet serves the fleet routes; nil answers them with 503.
	Fleet Fleet
	// MaxBodyBytes bounds request bodies (default 1 MiB; agent reports are
	// bounded at 64 KiB regardless).
	MaxBodyBytes int64
}

// Server is the HTTP API.
type Server struct {
	store    Store
	catalog  func() *pricing.Catalog
	planner  Planner
	fleet    Fleet
	log      *slog.Logger
	now      func() time.Time
	metrics  *Metrics
	ready    func(ctx context.Context) error
	maxBody  int64
	mux      *http.ServeMux
	patterns []string
	beats    *heartbeatBatcher
	tokens   tokenCache
	handlers http.Handler
}

const agentBodyLimit = 64 << 10

// New builds a Server.
func New(cfg Config) *Server {
	s := &Server{store: cfg.Store, catalog: cfg.Catalog, planner: cfg.Planner, fleet: cfg.Fleet, log: cfg.Logger, now: cfg.Now,
		metrics: cfg.Metrics, ready: cfg.Ready, maxBody: cfg.MaxBodyBytes, mux: http.NewServeMux()}
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	if s.now == nil {
		s.now = time.Now
	}
	if s.metrics == nil {
		s.metrics = NewMetrics(nil)
	}
	if s.maxBody <= 0 {
		s.maxBody = 1 << 20
	}
	s.beats = newHeartbeatBatcher(cfg.Store)
	s.routes()
	s.handlers = http.HandlerFunc(s.serve)
	return s
}

// Routes lists the route patterns served (besides /metrics), so tests can
// check that each one is covered.
func (s *Server) Routes() []string { return append([]string(nil), s.patterns...) }

// Handler returns the root handler.
func (s *Server) Handler() http.Handler { return s.handlers }

func (s *Server) routes() {
	s.handle("GET /healthz", public, s.healthz)
	s.handle("GET /readyz", public, s.readyz)
	s.mux.Handle("GET /metrics", s.metrics.Handler())

	s.handle("GET /api/v1/offers", adminOnly, s.listOffers)
	s.handle("GET /api/v1/plan", adminOnly, s.currentPlan)
	s.handle("POST /api/v1/plan", adminOnly, s.postPlan)
	s.handle("GET /api/v1/budgets", adminOnly, s.budgets)
	s.handle("GET /api/v1/workloads", adminOnly, s.listWorkloads)
	s.handle("POST /api/v1/workloads", adminOnly, s.createWorkload)
	s.handle("GET /api/v1/workloads/{name}", adminOnly, s.getWorkload)
	s.handle("PUT /api/v1/workloads/{name}", adminOnly, s.putWorkload)
	s.handle("DELETE /api/v1/workloads/{name}", adminOnly, s.deleteWorkload)
	s.handle("GET /api/v1/instances", adminOnly, s.listInstances)
	s.handle("GET /api/v1/instances/{id}", adminOnly, s.getInstance)
	s.handle("GET /api/v1/events", adminOnly, s.listEvents)
	s.handle("GET /api/v1/benchmarks", adminOnly, s.listBenchmarks)

	s.handle("POST /api/v1/tokens", adminOnly, s.createToken)

	s.handle("POST /api/v1/agents/register", bootstrap, s.registerAgent)
	s.handle("POST /api/v1/agents/{id}/heartbeat", agentOwner, s.heartbeat)
	s.handle("POST /api/v1/agents/{id}/benchmarks", agentOwner, s.benchmark)
	s.handle("POST /api/v1/agents/{id}/notices", agentOwner, s.notice)
	s.handle("POST /api/v1/agents/{id}/drains", agentOwner, s.drain)
	s.fleetRoutes()
}

// handle registers h for pattern behind auth and the latency histogram.
func (s *Server) handle(pattern string, a access, h http.HandlerFunc) {
	s.patterns = append(s.patterns, pattern)
	s.mux.Handle(pattern, s.metrics.instrument(pattern, s.authorize(a, h)))
}

// serve answers unknown paths and wrong methods with JSON errors instead of
// the mux's plain text.
func (s *Server) serve(w http.ResponseWriter, r *http.Request) {
	if _, pattern := s.mux.Handler(r); pattern != "" {
		s.mux.ServeHTTP(w, r)
		return
	}
	rec := &headerRecorder{h: make(http.Header)}
	s.mux.ServeHTTP(rec, r)
	if allow := rec.h.Get("Allow"); allow != "" {
		w.Header().Set("Allow", allow)
		writeError(w, http.StatusMethodNotAllowed, codeMethod, r.Method+" is not allowed on "+r.URL.Path+"; allowed: "+allow)
		return
	}
	if rec.code == http.StatusMovedPermanently || rec.code == http.StatusTemporaryRedirect || rec.code == http.StatusPermanentRedirect {
		s.mux.ServeHTTP(w, r)
		return
	}
	writeError(w, http.StatusNotFound, codeNotFound, "no route "+r.Method+" "+r.URL.Path+"; see docs/api.md")
}

type headerRecorder struct {
	h    http.Header
	code int
}

func (r *headerRecorder) Header() http.Header         { return r.h }
func (r *headerRecorder) Write(b []byte) (int, error) { return len(b), nil }
func (r *headerRecorder) WriteHeader(code int)        { r.code = code }

// fail maps an error from the store or planner to a response.
func (s *Server) fail(w http.ResponseWriter, r *http.Request, err error) {
	var br *badRequest
	var mbe *http.MaxBytesError
	switch {
	case errors.As(err, &mbe):
		writeError(w, http.StatusRequestEntityTooLarge, codeTooLarge,
			"request body is larger than "+strconv.FormatInt(mbe.Limit, 10)+" bytes")
	case errors.As(err, &br):
		writeError(w, http.StatusBadRequest, codeBadRequest, br.msg)
	case errors.Is(err, ErrInvalidInput):
		writeError(w, http.StatusBadRequest, codeBadRequest, err.Error())
	case errors.Is(err, ErrInfeasible):
		writeError(w, http.StatusUnprocessableEntity, codeInfeasible, err.Error())
	case errors.Is(err, store.ErrNotFound), errors.Is(err, ErrNoPolicy):
		writeError(w, http.StatusNotFound, codeNotFound, err.Error())
	case errors.Is(err, store.ErrConflict):
		writeError(w, http.StatusConflict, codeConflict, err.Error())
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		writeError(w, http.StatusServiceUnavailable, codeUnavailable, "request cancelled or timed out")
	default:
		// Internal details stay in the log; the client gets a generic text.
		s.log.ErrorContext(r.Context(), "request failed", "method", r.Method, "path", r.URL.Path, "err", err)
		writeError(w, http.StatusInternalServerError, codeInternal, "internal error; see the broker's log")
	}
}

func (s *Server) healthz(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
}

func (s *Server) readyz(w http.ResponseWriter, r *http.Request) {
	if s.ready != nil {
		if err := s.ready(r.Context()); err != nil {
			writeError(w, http.StatusServiceUnavailable, codeUnavailable, "not ready: "+err.Error())
			return
		}
	}
	writeJSON(w, http.StatusOK, map[string]string{"status": "ready"})
}

// rawJSONObject checks that m is absent or a JSON object.
func rawJSONObject(field string, m json.RawMessage) error {
	if len(m) == 0 || string(m) == "null" {
		return nil
	}
	var v map[string]any
	if err := json.Unmarshal(m, &v); err != nil {
		return badf("%s must be a JSON object", field)
	}
	return nil
}
