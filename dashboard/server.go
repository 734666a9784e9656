// Package dashboard is gpubroker's web UI, served by `gpubroker serve` at /
// and /ui/: overview, prices, plan, fleet, events and budgets pages rendered
// on the server with html/template, charts drawn as SVG on the server, and
// assets embedded in the binary, so it works offline and without
// JavaScript. Users log in with an admin token (checked exactly as the JSON
// API checks it) and get a server-side session; every state-changing form
// carries a CSRF token, and a strict Content-Security-Policy forbids inline
// script and style.
//
// The dashboard holds no state of the broker: it reads everything through
// the small interfaces in sources.go, which the broker implements over the
// store, the catalog and the planner.
package dashboard

import (
	"bytes"
	"context"
	"embed"
	"errors"
	"fmt"
	"html/template"
	"io/fs"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"time"
)

//go:embed templates/*.html
var templateFS embed.FS

//go:embed static
var staticFS embed.FS

// Config wires a Server. Nil sources take their No* value (an empty state
// on the page); Auth is required.
type Config struct {
	Auth       TokenVerifier
	Offers     Offers
	History    PriceHistory
	Plan       CurrentPlan
	Planner    PolicyPlanner
	Agents     Agents
	Benchmarks Benchmarks
	Events     Events
	Budgets    Budgets
	Fleet      FleetInstances
	Spend      Spend

	Logger *slog.Logger
	Now    func() time.Time
	// Secure marks cookies Secure and sends HSTS; set it when serving TLS.
	Secure bool
	// SessionIdle and SessionMax bound a session: it ends after SessionIdle
	// without a request (default 30m) or SessionMax after login (default 12h).
	SessionIdle time.Duration
	SessionMax  time.Duration
	// StaleAfter marks offers observed longer ago than this (default 7 days,
	// as `gpubroker prices --stale-after`).
	StaleAfter time.Duration
	// ActiveWithin is how recent an agent's heartbeat must be for it to
	// count as running (default 5m).
	ActiveWithin time.Duration
	// RefreshSeconds is the pages' auto-refresh period (default 60; 0 takes
	// the default, negative turns it off).
	RefreshSeconds int
}

// Server is the web dashboard.
type Server struct {
	cfg      Config
	log      *slog.Logger
	now      func() time.Time
	secure   bool
	sessions sessions
	pages    map[string]*template.Template
	mux      *http.ServeMux
	static   http.Handler
}

// New builds a Server. It fails only when the embedded templates do not
// parse (a build defect).
func New(cfg Config) (*Server, error) {
	if cfg.Auth == nil {
		return nil, errors.New("dashboard: Config.Auth is required")
	}
	if cfg.Offers == nil {
		return nil, errors.New("dashboard: Config.Offers is required")
	}
	if cfg.Plan == nil {
		cfg.Plan = NoPlan{}
	}
	if cfg.Budgets == nil {
		cfg.Budgets = NoPlan{}
	}
	if cfg.Fleet == nil {
		cfg.Fleet = NoFleet{}
	}
	if cfg.Spend == nil {
		cfg.Spend = NoSpend{}
	}
	if cfg.Planner == nil {
		cfg.Planner = SolvePolicy{Offers: cfg.Offers, Now: cfg.Now}
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.SessionIdle <= 0 {
		cfg.SessionIdle = 30 * time.Minute
	}
	if cfg.SessionMax <= 0 {
		cfg.SessionMax = 12 * time.Hour
	}
	if cfg.StaleAfter <= 0 {
		cfg.StaleAfter = 7 * 24 * time.Hour
	}
	if cfg.ActiveWithin <= 0 {
		cfg.ActiveWithin = 5 * time.Minute
	}
	if cfg.RefreshSeconds == 0 {
		cfg.RefreshSeconds = 60
	}
	s := &Server{cfg: cfg, log: cfg.Logger, now: cfg.Now, secure: cfg.Secure, mux: http.NewServeMux(),
		sessions: sessions{idle: cfg.SessionIdle, max: cfg.SessionMax}}
	if err := s.parseTemplates(); err != nil {
		return nil, err
	}
	sub, err := fs.Sub(staticFS, "static")
	if err != nil {
		return nil, err
	}
	s.static = http.StripPrefix("/ui/static/", http.FileServerFS(sub))
	s.routes()
	return s, nil
}

// pageNames are the templates, each rendered inside layout.html.
var pageNames = []string{"login", "overview", "prices", "history", "plan", "fleet", "events", "budgets", "error"}

func (s *Server) parseTemplates() error {
	s.pages = make(map[string]*template.Template, len(pageNames))
	for _, name := range pageNames {
		t, err := template.New("layout.html").Funcs(funcs).ParseFS(templateFS, "templates/layout.html", "templates/"+name+".html")
		if err != nil {
			return fmt.Errorf("dashboard: parsing template %s: %w", name, err)
		}
		s.pages[name] = t
	}
	return nil
}

func (s *Server) routes() {
	s.mux.HandleFunc("GET /{$}", s.auth(s.overview))
	s.mux.HandleFunc("GET /ui/{$}", func(w http.ResponseWriter, r *http.Request) { http.Redirect(w, r, "/", http.StatusSeeOther) })
	s.mux.HandleFunc("GET /ui/login", s.loginForm)
	s.mux.HandleFunc("POST /ui/login", s.login)
	s.mux.HandleFunc("POST /ui/logout", s.auth(s.logout))
	s.mux.HandleFunc("GET /ui/prices", s.auth(s.prices))
	s.mux.HandleFunc("GET /ui/prices/history", s.auth(s.history))
	s.mux.HandleFunc("GET /ui/plan", s.auth(s.plan))
	s.mux.HandleFunc("POST /ui/plan", s.auth(s.planPolicy))
	s.mux.HandleFunc("GET /ui/fleet", s.auth(s.fleet))
	s.mux.HandleFunc("GET /ui/events", s.auth(s.events))
	s.mux.HandleFunc("GET /ui/budgets", s.auth(s.budgets))
	s.mux.HandleFunc("GET /ui/static/", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Cache-Control", "public, max-age=3600")
		s.static.ServeHTTP(w, r)
	})
}

// Handler returns the dashboard's handler for / and /ui/....
func (s *Server) Handler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.securityHeaders(w)
		if _, pattern := s.mux.Handler(r); pattern == "" {
			s.renderError(w, r, http.StatusNotFound, "There is no page at "+r.URL.Path+".")
			return
		}
		s.mux.ServeHTTP(w, r)
	})
}

// IsDashboardPath reports whether the dashboard serves a path: / and
// everything under /ui/. The broker sends every other path to the API.
func IsDashboardPath(p string) bool { return p == "/" || p == "/ui" || strings.HasPrefix(p, "/ui/") }

// Route returns a handler that sends dashboard paths to dash and the rest
// (the JSON API, /metrics, /healthz, /readyz) to api.
func Route(api http.Handler, dash *Server) http.Handler {
	d := dash.Handler()
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if IsDashboardPath(r.URL.Path) {
			d.ServeHTTP(w, r)
			return
		}
		api.ServeHTTP(w, r)
	})
}

// request is what a page handler knows about the logged-in user.
type request struct {
	id   string
	sess session
}

// auth sends requests without a live session to the login page and checks
// the CSRF token of every POST.
func (s *Server) auth(next func(http.ResponseWriter, *http.Request, request)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		id, sess, ok := s.sessionOf(r)
		if !ok {
			if r.Method != http.MethodGet {
				s.renderError(w, r, http.StatusUnauthorized, "Your session has ended; log in again.")
				return
			}
			next := r.URL.RequestURI()
			http.Redirect(w, r, "/ui/login?next="+url.QueryEscape(next), http.StatusSeeOther)
			return
		}
		if r.Method == http.MethodPost {
			r.Body = http.MaxBytesReader(w, r.Body, maxPolicyUpload)
			if !sameToken(csrfField(r), sess.csrf) {
				s.renderError(w, r, http.StatusForbidden, "The form's security token is missing or out of date; reload the page and try again.")
				return
			}
		}
		w.Header().Set("Cache-Control", "no-store")
		next(w, r, request{id: id, sess: sess})
	}
}

// csrfField reads the form's CSRF token (multipart or urlencoded).
func csrfField(r *http.Request) string {
	if strings.HasPrefix(r.Header.Get("Content-Type"), "multipart/form-data") {
		// The plan form is multipart; its body is parsed by the handler
		// with a size bound first.
		if r.MultipartForm == nil {
			if err := r.ParseMultipartForm(maxPolicyUpload); err != nil {
				return ""
			}
		}
		if v := r.MultipartForm.Value["csrf"]; len(v) > 0 {
			return v[0]
		}
		return ""
	}
	return r.PostFormValue("csrf")
}

// page is what every template gets.
type page struct {
	Title    string
	Nav      string
	User     string
	CSRF     string
	Refresh  int
	Now      time.Time
	Data     any
	Messages []string
}

func (s *Server) render(w http.ResponseWriter, r *http.Request, status int, name string, p page) {
	t := s.pages[name]
	if p.Now.IsZero() {
		p.Now = s.now()
	}
	var buf bytes.Buffer
	if err := t.Execute(&buf, p); err != nil {
		s.log.ErrorContext(r.Context(), "rendering dashboard page", "page", name, "err", err)
		http.Error(w, "internal error rendering the page; see the broker's log", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(status)
	_, _ = w.Write(buf.Bytes())
}

func (s *Server) renderError(w http.ResponseWriter, r *http.Request, status int, msg string) {
	s.render(w, r, status, "error", page{Title: http.StatusText(status), Data: msg})
}

// pageFor fills the common fields of a logged-in page.
func (s *Server) pageFor(rq request, title, nav string, data any) page {
	refresh := s.cfg.RefreshSeconds
	if refresh < 0 {
		refresh = 0
	}
	return page{Title: title, Nav: nav, User: rq.sess.subject, CSRF: rq.sess.csrf, Refresh: refresh, Data: data}
}

// internal logs err and shows a generic message; details stay in the log.
func (s *Server) internal(w http.ResponseWriter, r *http.Request, what string, err error) {
	if errors.Is(err, context.Canceled) {
		return
	}
	s.log.ErrorContext(r.Context(), "dashboard: "+what, "err", err)
	s.renderError(w, r, http.StatusInternalServerError, "Could not read "+what+"; see the broker's log.")
}
