package fleet

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/gpubroker/gpubroker/providers"
)

// Metrics are the fleet's Prometheus metrics.
type Metrics struct {
	instances      *prometheus.GaugeVec
	slots          *prometheus.GaugeVec
	launches       *prometheus.CounterVec
	launchFailures *prometheus.CounterVec
	timeToRunning  prometheus.Histogram
	passSeconds    prometheus.Histogram
}

// NewMetrics registers the fleet's metrics on reg.
func NewMetrics(reg prometheus.Registerer) (*Metrics, error) {
	m := &Metrics{
		instances: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "gpubroker_fleet_instances",
			Help: "Broker-tagged instances in the clouds' listings at the last reconcile pass, by cloud, state and capacity type.",
		}, []string{"cloud", "state", "capacity"}),
		slots: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "gpubroker_fleet_slots",
			Help: "Fleet slots by state at the last reconcile pass.",
		}, []string{"state"}),
		launches: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "gpubroker_fleet_launches_total",
			Help: "Instances launched, by cloud and capacity type.",
		}, []string{"cloud", "capacity"}),
		launchFailures: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "gpubroker_fleet_launch_failures_total",
			Help: "Failed launch calls by cloud and reason (capacity, quota, throttled, unauthorized, bad_config, timeout, unknown).",
		}, []string{"cloud", "reason"}),
		timeToRunning: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "gpubroker_fleet_time_to_running_seconds",
			Help:    "Time from launch to the agent's registration.",
			Buckets: []float64{15, 30, 45, 60, 90, 120, 180, 300, 600, 900},
		}),
		passSeconds: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "gpubroker_fleet_reconcile_seconds",
			Help:    "Duration of reconcile passes.",
			Buckets: []float64{.01, .05, .1, .25, .5, 1, 2.5, 5, 10, 30},
		}),
	}
	for _, c := range []prometheus.Collector{m.instances, m.slots, m.launches, m.launchFailures, m.timeToRunning, m.passSeconds} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	return m, nil
}

func (m *Metrics) observe(p *passState) {
	m.instances.Reset()
	for _, in := range p.cloud {
		if in.State == providers.StateTerminated {
			continue
		}
		m.instances.WithLabelValues(string(in.Cloud), string(in.State), string(in.Capacity)).Inc()
	}
	for _, s := range States {
		m.slots.WithLabelValues(string(s)).Set(float64(p.rep.ByState[s]))
	}
	m.passSeconds.Observe(p.r.Now().Sub(p.now).Seconds())
}
