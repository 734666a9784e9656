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
	"strings"
	"time"

	"github.com/gpubroker/gpubroker/apiv1"
	"github.com/gpubroker/gpubroker/broker/identity"
	"github.com/gpubroker/gpubroker/fleet/instance"
	"github.com/gpubroker/gpubroker/optimizer"
	"github.com/gpubroker/gpubroker/policy"
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
	RegisterAgentAs(ctx context.Context, inst store.InstanceRecord, tokenHash string, now time.Time, by store.TokenRecord) (store.InstanceRecord, error)
	Heartbeats(ctx context.Context, ups []store.HeartbeatUpdate) ([]error, error)
	GetInstance(ctx context.Context, id string) (store.InstanceRecord, error)
	ListInstances(ctx context.Context, workload, state string) ([]store.InstanceRecord, error)
	CountInstances(ctx context.Context, activeSince time.Time) (total, active int64, err error)
	RecordReport(ctx context.Context, r store.Report) (store.EventRecord, bool, error)
	ListEvents(ctx context.Context, f store.EventFilter) ([]store.EventRecord, error)
	ListBenchmarks(ctx context.Context, instanceType string) ([]store.BenchmarkRecord, error)
	LookupToken(ctx context.Context, hash string) (store.TokenRecord, error)
	AddToken(ctx context.Context, t store.TokenRecord) error
	ListTokens(ctx context.Context, kind, subject string) ([]store.TokenRecord, error)
	RevokedTokensSince(ctx context.Context, afterID int64) ([]string, int64, error)
	RevokeToken(ctx context.Context, id string) (store.TokenRecord, error)
	RecordProgress(ctx context.Context, p store.ProgressRecord, now time.Time) (bool, error)
}

var _ Store = (*store.Broker)(nil)

// Planner computes plans; the daemon implements it with the policy parser
// and the optimizer. Errors wrapping policy.ErrInvalid are the caller's
// fault (400, message shown), optimizer.ErrInfeasible a valid policy that
// cannot be placed (422), policy.ErrNoPolicy nothing loaded (404).
type Planner interface {
	// Plan parses the policy file data (name is used in error positions)
	// and plans it against the current catalog.
	Plan(ctx context.Context, name string, data []byte) (apiv1.Plan, error)
	// Current returns the latest plan of the loaded policy.
	Current(ctx context.Context) (apiv1.Plan, error)
	// Budgets returns the loaded policy's budgets with their spending.
	Budgets(ctx context.Context) (apiv1.Budgets, error)
}

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
	// Identity verifies signed instance identity documents sent at
	// registration (nil: they are ignored). A verified identity must name
	// the registering instance, and lets a bootstrap token re-register an
	// instance that already exists (it proves to be that instance).
	Identity *identity.Verifier
	// RequireIdentity refuses bootstrap registrations without a verified
	// identity (for clouds Identity has keys for).
	RequireIdentity bool
	// Fleet serves the fleet routes; nil answers them with 503.
	Fleet Fleet
	// TokenCacheTTL is how long a verified token is trusted without
	// asking the store (default DefaultTokenCacheTTL); it bounds a revoked
	// token's life here should the revocation log be unreadable.
	TokenCacheTTL time.Duration
	// RevocationPoll is how often this replica reads the store's token
	// revocation log and drops revoked tokens from its cache (default
	// DefaultRevocationPoll): a token revoked on any replica stops working
	// here within it.
	RevocationPoll time.Duration
	// MaxBodyBytes bounds request bodies (default 1 MiB; agent reports are
	// bounded at 64 KiB regardless).
	MaxBodyBytes int64
	// CheckWorkload, when set, checks a workload before it is stored (the
	// broker checks that the planner can read its spec); errors wrapping
	// ErrInvalidInput are a 400, store.ErrConflict a 409.
	CheckWorkload func(store.WorkloadRecord) error
	// Spend answers GET /api/v1/spend from the ledger; nil answers 503.
	Spend func(ctx context.Context, q apiv1.SpendQuery) (apiv1.Spend, error)
}

// Server is the HTTP API.
type Server struct {
	store           Store
	catalog         func() *pricing.Catalog
	planner         Planner
	fleet           Fleet
	log             *slog.Logger
	now             func() time.Time
	metrics         *Metrics
	ready           func(ctx context.Context) error
	maxBody         int64
	mux             *http.ServeMux
	patterns        []string
	beats           *heartbeatBatcher
	tokens          tokenCache
	handlers        http.Handler
	checkWL         func(store.WorkloadRecord) error
	identity        *identity.Verifier
	requireIdentity bool
	spendFn         func(ctx context.Context, q apiv1.SpendQuery) (apiv1.Spend, error)
}

const agentBodyLimit = 64 << 10

// New builds a Server.
func New(cfg Config) *Server {
	s := &Server{store: cfg.Store, catalog: cfg.Catalog, planner: cfg.Planner, fleet: cfg.Fleet, log: cfg.Logger, now: cfg.Now,
		metrics: cfg.Metrics, ready: cfg.Ready, maxBody: cfg.MaxBodyBytes, mux: http.NewServeMux(), checkWL: cfg.CheckWorkload,
		spendFn: cfg.Spend}
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
	s.identity, s.requireIdentity = cfg.Identity, cfg.RequireIdentity
	s.tokens.ttl = cfg.TokenCacheTTL
	if s.tokens.ttl <= 0 {
		s.tokens.ttl = DefaultTokenCacheTTL
	}
	s.tokens.poll = cfg.RevocationPoll
	if s.tokens.poll <= 0 {
		s.tokens.poll = DefaultRevocationPoll
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

	s.handle("GET /api/v1/offers", adminOnly, s.listOffers, "gpu", "cloud", "region", "capacity", "min_gpus", "max_gpus",
		"min_gpu_memory_gib", "max_price", "limit")
	s.handle("GET /api/v1/plan", adminOnly, s.currentPlan)
	s.handle("POST /api/v1/plan", adminOnly, s.postPlan, "name")
	s.handle("GET /api/v1/budgets", adminOnly, s.budgets)
	s.handle("GET /api/v1/spend", adminOnly, s.spend, "since", "until", "by")
	s.handle("GET /api/v1/workloads", adminOnly, s.listWorkloads)
	s.handle("POST /api/v1/workloads", adminOnly, s.createWorkload)
	s.handle("GET /api/v1/workloads/{name}", adminOnly, s.getWorkload)
	s.handle("PUT /api/v1/workloads/{name}", adminOnly, s.putWorkload)
	s.handle("DELETE /api/v1/workloads/{name}", adminOnly, s.deleteWorkload)
	s.handle("GET /api/v1/instances", adminOnly, s.listInstances, "workload", "state")
	s.handle("GET /api/v1/instances/{id}", adminOnly, s.getInstance)
	s.handle("GET /api/v1/events", adminOnly, s.listEvents, "kind", "instance", "workload", "since", "after_id", "limit")
	s.handle("GET /api/v1/benchmarks", adminOnly, s.listBenchmarks, "instance_type")

	s.handle("GET /api/v1/tokens", adminOnly, s.listTokens, "kind", "subject")
	s.handle("POST /api/v1/tokens", adminOnly, s.createToken)
	s.handle("DELETE /api/v1/tokens/{id}", adminOnly, s.revokeToken)

	s.handle("POST /api/v1/agents/register", bootstrap, s.registerAgent)
	s.handle("POST /api/v1/agents/{id}/heartbeat", agentOwner, s.heartbeat)
	s.handle("POST /api/v1/agents/{id}/benchmarks", agentOwner, s.benchmark)
	s.handle("POST /api/v1/agents/{id}/notices", agentOwner, s.notice)
	s.handle("POST /api/v1/agents/{id}/drains", agentOwner, s.drain)
	s.handle("POST /api/v1/agents/{id}/progress", agentOwner, s.progress)
	s.fleetRoutes()
}

// handle registers h for pattern behind the input checks, auth and the
// latency histogram. query lists the query parameters the route takes; any
// other is a 400, as is a path, query value or Idempotency-Key that is not
// valid text (checkRequest). The checks run before auth, so garbage is
// refused without a database round trip.
func (s *Server) handle(pattern string, a access, h http.HandlerFunc, query ...string) {
	s.patterns = append(s.patterns, pattern)
	authed := s.authorize(a, h)
	s.mux.Handle(pattern, s.metrics.instrument(pattern, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if err := checkRequest(r, query); err != nil {
			s.fail(w, r, err)
			return
		}
		authed.ServeHTTP(w, r)
	})))
}

// serve answers unknown paths and wrong methods with JSON errors instead of
// the mux's plain text.
func (s *Server) serve(w http.ResponseWriter, r *http.Request) {
	// The path is echoed in 404 and 405 messages: refuse garbage first.
	if err := checkText("the request path", r.URL.Path, false); err != nil {
		s.fail(w, r, err)
		return
	}
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
	case errors.Is(err, policy.ErrInvalid), errors.Is(err, instance.ErrUnknown):
		writeError(w, http.StatusBadRequest, codeBadRequest, err.Error())
	case errors.Is(err, optimizer.ErrInfeasible):
		writeError(w, http.StatusUnprocessableEntity, codeInfeasible, err.Error())
	case errors.Is(err, store.ErrKeyReused):
		writeError(w, http.StatusUnprocessableEntity, codeKeyReused,
			"this Idempotency-Key was already used for a different report; send a new key for a new report, or the same body to repeat one")
	case errors.Is(err, store.ErrInvalidText):
		writeError(w, http.StatusBadRequest, codeBadRequest, "a value is not valid UTF-8 or holds a NUL byte; send valid UTF-8 without control characters")
	case errors.Is(err, store.ErrNotFound), errors.Is(err, policy.ErrNoPolicy):
		writeError(w, http.StatusNotFound, codeNotFound, err.Error())
	case errors.Is(err, errIdentity):
		writeError(w, http.StatusForbidden, codeForbidden, errText(err, errIdentity))
	case errors.Is(err, store.ErrTakeover):
		writeError(w, http.StatusForbidden, codeForbidden, errText(err, store.ErrTakeover)+
			"; re-registering an existing instance needs a registration token bound to it (gpubroker token create --kind registration --instance ID) or an admin token")
	case errors.Is(err, store.ErrTokenSpent):
		w.Header().Set("WWW-Authenticate", `Bearer realm="gpubroker", error="invalid_token"`)
		writeError(w, http.StatusUnauthorized, codeUnauthorized, store.ErrTokenSpent.Error())
	case errors.Is(err, store.ErrLastAdmin):
		writeError(w, http.StatusConflict, codeConflict, store.ErrLastAdmin.Error()+"; create another admin token first")
	case errors.Is(err, store.ErrConflict):
		writeError(w, http.StatusConflict, codeConflict, err.Error())
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		writeError(w, http.StatusServiceUnavailable, codeUnavailable, "request cancelled or timed out")
	case store.IsUnavailable(err):
		// The detail names the database's host and user: log only.
		s.log.WarnContext(r.Context(), "database unavailable", "method", r.Method, "path", r.URL.Path, "err", err)
		w.Header().Set("Retry-After", "5")
		writeError(w, http.StatusServiceUnavailable, codeUnavailable, "the database is unavailable; retry later")
	default:
		// Internal details stay in the log; the client gets a generic text.
		s.log.ErrorContext(r.Context(), "request failed", "method", r.Method, "path", r.URL.Path, "err", err)
		writeError(w, http.StatusInternalServerError, codeInternal, "internal error; see the broker's log")
	}
}

func (s *Server) healthz(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusOK, apiv1.Status{Status: "ok"})
}

func (s *Server) readyz(w http.ResponseWriter, r *http.Request) {
	if s.ready != nil {
		if err := s.ready(r.Context()); err != nil {
			// The error may name the database's host and user; /readyz is
			// unauthenticated, so the detail goes to the log only.
			s.log.WarnContext(r.Context(), "not ready", "err", err)
			msg := "not ready; see the broker's log"
			if store.IsUnavailable(err) || errors.Is(err, context.DeadlineExceeded) {
				msg = "not ready: the database does not answer"
			}
			writeError(w, http.StatusServiceUnavailable, codeUnavailable, msg)
			return
		}
	}
	writeJSON(w, http.StatusOK, apiv1.Status{Status: "ready"})
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

// errText is the part of err's message from the sentinel on: the store's
// wrapping context ("registering agent for ...") stays out of answers.
func errText(err, sentinel error) string {
	msg := err.Error()
	if i := strings.Index(msg, sentinel.Error()); i >= 0 {
		return msg[i:]
	}
	return sentinel.Error()
}
