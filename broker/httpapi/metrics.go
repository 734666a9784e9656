package httpapi

import (
	"net/http"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// Metrics are the broker's Prometheus metrics, on a registry of their own
// (no global state).
type Metrics struct {
	reg       *prometheus.Registry
	latency   *prometheus.HistogramVec
	events    *prometheus.CounterVec
	planCost  prometheus.Gauge
	jobRuns   *prometheus.CounterVec
	jobSecs   *prometheus.HistogramVec
	isLeader  prometheus.Gauge
	refreshOK prometheus.Gauge
}

// Gauges are values read at scrape time.
type Gauges struct {
	// CatalogAge returns the age of the newest catalog data.
	CatalogAge func() time.Duration
	// Agents returns the number of agents that sent a heartbeat recently.
	Agents func() float64
}

// NewMetrics registers the metrics on a new registry. g may be nil.
func NewMetrics(g *Gauges) *Metrics {
	reg := prometheus.NewRegistry()
	m := &Metrics{
		reg: reg,
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "gpubroker_http_request_duration_seconds",
			Help:    "HTTP request latency by route pattern and status code.",
			Buckets: []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5},
		}, []string{"route", "code"}),
		events: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "gpubroker_events_total",
			Help: "Events recorded by this replica, by kind.",
		}, []string{"kind"}),
		planCost: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "gpubroker_plan_cost_usd",
			Help: "Expected cost of the latest plan of the loaded policy, USD over the policy horizon.",
		}),
		jobRuns: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "gpubroker_job_runs_total",
			Help: "Background job runs on this replica, by job and result (ok, error, skipped).",
		}, []string{"job", "result"}),
		jobSecs: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "gpubroker_job_duration_seconds",
			Help: "Background job duration by job.",
		}, []string{"job"}),
		isLeader: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "gpubroker_leader",
			Help: "1 while this replica holds the leader lease and runs background jobs.",
		}),
		refreshOK: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "gpubroker_catalog_last_refresh_success_timestamp_seconds",
			Help: "Unix time of the last successful catalog refresh (0 = never; the snapshot is in use).",
		}),
	}
	reg.MustRegister(m.latency, m.events, m.planCost, m.jobRuns, m.jobSecs, m.isLeader, m.refreshOK,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	if g != nil && g.CatalogAge != nil {
		reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "gpubroker_catalog_staleness_seconds",
			Help: "Age of the newest price data in the catalog.",
		}, func() float64 { return g.CatalogAge().Seconds() }))
	}
	if g != nil && g.Agents != nil {
		reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "gpubroker_agents",
			Help: "Agents that sent a heartbeat in the last 5 minutes.",
		}, g.Agents))
	}
	return m
}

// Handler serves the registry in the Prometheus exposition format.
func (m *Metrics) Handler() http.Handler {
	return promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{Registry: m.reg})
}

// Registry is the registry, for tests and extra collectors.
func (m *Metrics) Registry() *prometheus.Registry { return m.reg }

// SetPlanCost records the latest plan's expected cost.
func (m *Metrics) SetPlanCost(usd float64) { m.planCost.Set(usd) }

// SetLeader records whether this replica leads.
func (m *Metrics) SetLeader(leader bool) {
	if leader {
		m.isLeader.Set(1)
	} else {
		m.isLeader.Set(0)
	}
}

// RefreshSucceeded records a successful catalog refresh at t.
func (m *Metrics) RefreshSucceeded(t time.Time) { m.refreshOK.Set(float64(t.Unix())) }

// JobRan records one background job run.
func (m *Metrics) JobRan(job, result string, d time.Duration) {
	m.jobRuns.WithLabelValues(job, result).Inc()
	if result != "skipped" {
		m.jobSecs.WithLabelValues(job).Observe(d.Seconds())
	}
}

// EventRecorded counts an event.
func (m *Metrics) EventRecorded(kind string) { m.events.WithLabelValues(kind).Inc() }

type statusWriter struct {
	http.ResponseWriter
	code int
}

func (w *statusWriter) WriteHeader(code int) {
	if w.code == 0 {
		w.code = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(b []byte) (int, error) {
	if w.code == 0 {
		w.code = http.StatusOK
	}
	return w.ResponseWriter.Write(b)
}

func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// instrument observes h's latency under the route pattern (never the raw
// path, which would make label cardinality unbounded).
func (m *Metrics) instrument(route string, h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		sw := &statusWriter{ResponseWriter: w}
		h.ServeHTTP(sw, r)
		if sw.code == 0 {
			sw.code = http.StatusOK
		}
		m.latency.WithLabelValues(route, strconv.Itoa(sw.code)).Observe(time.Since(start).Seconds())
	})
}

// Registerer is the registry the broker's metrics live on, for other
// parts of the broker (the fleet) to add theirs.
func (m *Metrics) Registerer() prometheus.Registerer { return m.reg }
