package dashboard

import (
	"encoding/json"
	"math"
	"net/http"
	"path"
	"time"

	"github.com/gpubroker/gpubroker/pricing"
	"github.com/gpubroker/gpubroker/store"
)

// HeartbeatInterval is how often agents are told to send heartbeats.
const HeartbeatInterval = 10 * time.Second

func pathMatchCheck(pattern string) (bool, error) { return path.Match(pattern, "") }

type registerBody struct {
	InstanceID   string `json:"instance_id"`
	Cloud        string `json:"cloud"`
	Region       string `json:"region"`
	Zone         string `json:"zone"`
	InstanceType string `json:"instance_type"`
	GPU          string `json:"gpu"`
	GPUCount     int    `json:"gpu_count"`
	Capacity     string `json:"capacity"`
	Workload     string `json:"workload"`
}

type registerResponse struct {
	AgentID string `json:"agent_id"`
	// Token is shown once; the broker keeps only its hash.
	Token                string               `json:"token"`
	HeartbeatIntervalSec int                  `json:"heartbeat_interval_s"`
	Instance             store.InstanceRecord `json:"instance"`
}

func (b *registerBody) validate() error {
	if !instanceIDRE.MatchString(b.InstanceID) {
		return badf("instance_id %q is not valid; send the cloud's instance id (1-255 letters, digits, '.', '_', ':', '/', '@', '-')", b.InstanceID)
	}
	c, err := pricing.ParseCloud(b.Cloud)
	if err != nil {
		return badf("cloud: %v", err)
	}
	b.Cloud = string(c)
	for _, f := range []struct{ name, v string }{{"region", b.Region}, {"zone", b.Zone}, {"instance_type", b.InstanceType}} {
		if err := checkLabel(f.name, f.v); err != nil {
			return err
		}
	}
	if b.Region == "" {
		return badf("region is missing")
	}
	if b.InstanceType == "" {
		return badf("instance_type is missing")
	}
	if b.GPU != "" {
		m, ok := pricing.ParseGPUModel(b.GPU)
		if !ok {
			return badf("gpu %q is not a known GPU model", b.GPU)
		}
		b.GPU = string(m)
	}
	if b.GPUCount < 0 || b.GPUCount > 64 {
		return badf("gpu_count %d must be between 0 and 64", b.GPUCount)
	}
	switch b.Capacity {
	case "", string(pricing.OnDemand), string(pricing.Spot):
	default:
		return badf("capacity %q is not valid; use on-demand or spot", b.Capacity)
	}
	if b.Workload != "" {
		return checkName("workload", b.Workload)
	}
	return nil
}

func (s *Server) registerAgent(w http.ResponseWriter, r *http.Request) {
	var b registerBody
	if err := decodeJSON(w, r, agentBodyLimit, &b); err != nil {
		s.fail(w, r, err)
		return
	}
	if err := b.validate(); err != nil {
		s.fail(w, r, err)
		return
	}
	token, hash, err := NewToken()
	if err != nil {
		s.fail(w, r, err)
		return
	}
	inst, err := s.store.RegisterAgent(r.Context(), store.InstanceRecord{ID: b.InstanceID, Cloud: b.Cloud, Region: b.Region,
		Zone: b.Zone, InstanceType: b.InstanceType, GPU: b.GPU, GPUCount: b.GPUCount, Capacity: b.Capacity,
		Workload: b.Workload}, hash, s.now().UTC())
	if err != nil {
		s.fail(w, r, err)
		return
	}
	s.tokens.dropSubject(inst.ID)
	s.tokens.put(hash, principal{kind: store.TokenAgent, subject: inst.ID}, s.now())
	s.metrics.EventRecorded("registered")
	s.log.InfoContext(r.Context(), "agent registered", "instance", b.InstanceID, "cloud", b.Cloud, "region", b.Region)
	writeJSON(w, http.StatusCreated, registerResponse{AgentID: inst.ID, Token: token,
		HeartbeatIntervalSec: int(HeartbeatInterval / time.Second), Instance: inst})
}

// GPUTelemetry is one GPU's figures in a heartbeat.
type GPUTelemetry struct {
	Index          int     `json:"index"`
	Utilization    float64 `json:"utilization"`
	MemoryUsedMiB  float64 `json:"memory_used_mib"`
	MemoryTotalMiB float64 `json:"memory_total_mib"`
	TemperatureC   float64 `json:"temperature_c"`
	PowerW         float64 `json:"power_w"`
}

type heartbeatBody struct {
	SentAt time.Time `json:"sent_at"`
	Load1  float64   `json:"load1"`
	// Utilization is the mean GPU utilisation (0..1); computed from GPUs
	// when absent.
	Utilization *float64       `json:"gpu_utilization"`
	GPUs        []GPUTelemetry `json:"gpus"`
}

func (b *heartbeatBody) validate() error {
	if err := finite("load1", b.Load1, 0, 1e4); err != nil {
		return err
	}
	if len(b.GPUs) > 64 {
		return badf("gpus has %d entries; at most 64", len(b.GPUs))
	}
	sum := 0.0
	for i, g := range b.GPUs {
		for _, f := range []struct {
			name   string
			v, max float64
		}{{"utilization", g.Utilization, 1}, {"memory_used_mib", g.MemoryUsedMiB, 1 << 24},
			{"memory_total_mib", g.MemoryTotalMiB, 1 << 24}, {"temperature_c", g.TemperatureC, 200}, {"power_w", g.PowerW, 1e5}} {
			if math.IsNaN(f.v) || f.v < 0 || f.v > f.max {
				return badf("gpus[%d].%s is %v; it must be between 0 and %v", i, f.name, f.v, f.max)
			}
		}
		sum += g.Utilization
	}
	if b.Utilization != nil {
		return finite("gpu_utilization", *b.Utilization, 0, 1)
	}
	u := 0.0
	if len(b.GPUs) > 0 {
		u = sum / float64(len(b.GPUs))
	}
	b.Utilization = &u
	return nil
}

func (s *Server) heartbeat(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	var b heartbeatBody
	if err := decodeJSON(w, r, agentBodyLimit, &b); err != nil {
		s.fail(w, r, err)
		return
	}
	if err := b.validate(); err != nil {
		s.fail(w, r, err)
		return
	}
	var tele json.RawMessage
	if len(b.GPUs) > 0 {
		var err error
		if tele, err = json.Marshal(b.GPUs); err != nil {
			s.fail(w, r, err)
			return
		}
	}
	// The broker's clock, not the agent's, dates the heartbeat: VM clocks
	// drift and staleness is judged here.
	err := s.beats.record(r.Context(), store.HeartbeatUpdate{Instance: id, At: s.now().UTC(), Load1: b.Load1,
		Utilization: *b.Utilization, Telemetry: tele})
	if err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"status": "ok", "heartbeat_interval_s": int(HeartbeatInterval / time.Second)})
}

type benchmarkBody struct {
	GPU            string  `json:"gpu"`
	InstanceType   string  `json:"instance_type"`
	TFLOPS         float64 `json:"tflops"`
	MemBandwidthGB float64 `json:"mem_bandwidth_gbps"`
}

func (s *Server) benchmark(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	var b benchmarkBody
	if err := decodeJSON(w, r, agentBodyLimit, &b); err != nil {
		s.fail(w, r, err)
		return
	}
	m, ok := pricing.ParseGPUModel(b.GPU)
	if !ok {
		s.fail(w, r, badf("gpu %q is not a known GPU model", b.GPU))
		return
	}
	if err := finite("tflops", b.TFLOPS, 0.001, 1e5); err != nil {
		s.fail(w, r, err)
		return
	}
	if err := finite("mem_bandwidth_gbps", b.MemBandwidthGB, 0, 1e6); err != nil {
		s.fail(w, r, err)
		return
	}
	if err := checkLabel("instance_type", b.InstanceType); err != nil {
		s.fail(w, r, err)
		return
	}
	inst, err := s.store.GetInstance(r.Context(), id)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	if b.InstanceType == "" {
		b.InstanceType = inst.InstanceType
	}
	rec, err := s.store.AddBenchmark(r.Context(), store.BenchmarkRecord{Instance: id, InstanceType: b.InstanceType,
		GPU: string(m), TFLOPS: b.TFLOPS, MemBandwidthGB: b.MemBandwidthGB, At: s.now().UTC()})
	if err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusCreated, rec)
}

type preemptionBody struct {
	// Source is the notice's origin, e.g. "aws-spot-itn", "gcp-preempted",
	// "azure-scheduled-events".
	Source string `json:"source"`
	// Action is what the cloud will do: terminate, stop or hibernate.
	Action string `json:"action"`
	// Deadline is when the instance goes away.
	Deadline time.Time `json:"deadline"`
	Detail   string    `json:"detail"`
}

func (s *Server) preemption(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	var b preemptionBody
	if err := decodeJSON(w, r, agentBodyLimit, &b); err != nil {
		s.fail(w, r, err)
		return
	}
	if b.Source == "" {
		s.fail(w, r, badf("source is missing; name the notice's origin, e.g. aws-spot-itn"))
		return
	}
	if err := checkLabel("source", b.Source); err != nil {
		s.fail(w, r, err)
		return
	}
	switch b.Action {
	case "", "terminate", "stop", "hibernate":
	default:
		s.fail(w, r, badf("action %q is not valid; use terminate, stop or hibernate", b.Action))
		return
	}
	if b.Deadline.IsZero() {
		s.fail(w, r, badf("deadline is missing; send when the instance goes away (RFC 3339)"))
		return
	}
	if len(b.Detail) > 4096 {
		s.fail(w, r, badf("detail is %d bytes; at most 4096", len(b.Detail)))
		return
	}
	data, _ := json.Marshal(b)
	ev, err := s.store.RecordPreemption(r.Context(), store.EventRecord{At: s.now().UTC(), Kind: "preemption_notice",
		Instance: id, Message: b.Source + ": " + orDefault(b.Action, "terminate") + " at " + b.Deadline.UTC().Format(time.RFC3339),
		Data: data}, b.Deadline.UTC())
	if err != nil {
		s.fail(w, r, err)
		return
	}
	s.metrics.EventRecorded(ev.Kind)
	s.log.InfoContext(r.Context(), "preemption notice", "instance", id, "source", b.Source, "deadline", b.Deadline)
	writeJSON(w, http.StatusCreated, ev)
}

func orDefault(s, d string) string {
	if s == "" {
		return d
	}
	return s
}

type drainBody struct {
	State   string `json:"state"`
	Message string `json:"message"`
}

func (s *Server) drain(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	var b drainBody
	if err := decodeJSON(w, r, agentBodyLimit, &b); err != nil {
		s.fail(w, r, err)
		return
	}
	switch b.State {
	case "started", "completed", "failed":
	case "":
		s.fail(w, r, badf("state is missing; use started, completed or failed"))
		return
	default:
		s.fail(w, r, badf("state %q is not valid; use started, completed or failed", b.State))
		return
	}
	if len(b.Message) > 4096 {
		s.fail(w, r, badf("message is %d bytes; at most 4096", len(b.Message)))
		return
	}
	kind := "drain"
	if b.State == "completed" {
		kind = "drained"
	}
	ev, err := s.store.RecordDrain(r.Context(), store.EventRecord{At: s.now().UTC(), Kind: kind, Instance: id,
		Message: "drain " + b.State + orPrefix(": ", b.Message)}, b.State)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	s.metrics.EventRecorded(ev.Kind)
	writeJSON(w, http.StatusCreated, ev)
}

func orPrefix(p, s string) string {
	if s == "" {
		return ""
	}
	return p + s
}
