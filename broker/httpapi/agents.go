package httpapi

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"path"
	"time"

	"github.com/gpubroker/gpubroker/apiv1"
	"github.com/gpubroker/gpubroker/fleet/instance"
	"github.com/gpubroker/gpubroker/pricing"
	"github.com/gpubroker/gpubroker/store"
)

// HeartbeatInterval is how often agents are told to send heartbeats.
const HeartbeatInterval = 10 * time.Second

func pathMatchCheck(pattern string) (bool, error) { return path.Match(pattern, "") }

// checkGPUs checks the telemetry figures the broker uses. Unknown
// telemetry fields were already ignored by apiv1.GPUStat, so a newer
// agent's telemetry never breaks an older broker.
func checkGPUs(gs []apiv1.GPUStat) error {
	if len(gs) > 64 {
		return badf("gpus has %d entries; at most 64", len(gs))
	}
	for i, g := range gs {
		if g.Index < 0 || g.Index > 63 {
			return badf("gpus[%d].index %d is outside 0..63", i, g.Index)
		}
		if g.UtilGPUPct != nil && *g.UtilGPUPct > 100 {
			return badf("gpus[%d].util_gpu_pct is %d; it must be between 0 and 100", i, *g.UtilGPUPct)
		}
		if g.TempC != nil && *g.TempC > 200 {
			return badf("gpus[%d].temperature_c is %d; it must be between 0 and 200", i, *g.TempC)
		}
		if g.MemoryTotalMiB > 1<<24 || g.MemoryUsedMiB > 1<<24 {
			return badf("gpus[%d] memory figures must be at most %d MiB", i, 1<<24)
		}
		if g.PowerW != nil {
			if err := finite(fmt.Sprintf("gpus[%d].power_w", i), *g.PowerW, 0, 1e5); err != nil {
				return err
			}
		}
	}
	return nil
}

// checkVersion accepts any version string a Go build produces: "v1.2.3",
// "v0.0.0-20261202101010-abcdef012345+dirty", "(devel)".
func checkVersion(v string) error {
	if len(v) > 128 {
		return badf("agent_version is %d bytes; at most 128", len(v))
	}
	for i := 0; i < len(v); i++ {
		if v[i] <= ' ' || v[i] > '~' {
			return badf("agent_version %q has a character that is not printable ASCII at byte %d", v, i)
		}
	}
	return nil
}

func validateRegister(b *apiv1.RegisterRequest) error {
	if b.InstanceID == "" {
		// Without an instance id (no metadata service), the host name is the
		// stable identity, so a re-registration maps to the same instance.
		b.InstanceID = b.Hostname
	}
	if b.InstanceID == "" {
		return badf("instance_id and hostname are both empty; send at least one")
	}
	if !instanceIDRE.MatchString(b.InstanceID) {
		return badf("instance_id %q is not valid; send the cloud's instance id (1-255 letters, digits, '.', '_', ':', '@', '-')", b.InstanceID)
	}
	if len(b.Hostname) > 255 {
		return badf("hostname is longer than 255 bytes")
	}
	if err := checkVersion(b.AgentVersion); err != nil {
		return err
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
	if err := checkGPUs(b.GPUs); err != nil {
		return err
	}
	gs := b.GPUs
	if b.GPU == "" && len(gs) > 0 {
		m, ok := pricing.ParseGPUModel(gs[0].Model)
		if !ok {
			m, ok = pricing.ModelFromDeviceName(gs[0].Name, gs[0].MemoryTotalMiB)
		}
		if ok {
			b.GPU = string(m)
		}
		if b.GPUCount == 0 {
			b.GPUCount = len(gs)
		}
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
	var b apiv1.RegisterRequest
	if err := decodeJSON(w, r, agentBodyLimit, &b); err != nil {
		s.fail(w, r, err)
		return
	}
	if err := validateRegister(&b); err != nil {
		s.fail(w, r, err)
		return
	}
	token, hash, err := NewToken()
	if err != nil {
		s.fail(w, r, err)
		return
	}
	by := principalFrom(r.Context())
	if by.kind == store.TokenRegistration && by.subject != "" && b.InstanceID != by.subject {
		s.fail(w, r, fmt.Errorf("%w: this registration token is bound to instance %q, not %q", store.ErrTakeover, by.subject, b.InstanceID))
		return
	}
	byRec := by.record()
	verified, err := s.verifyIdentity(r, &b)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	if by.kind == store.TokenBootstrap {
		switch {
		case verified:
			byRec.Kind = store.RegisterVerified
		case s.requireIdentity && s.identity.Enabled(b.Cloud):
			s.fail(w, r, fmt.Errorf("%w: this broker requires a signed instance identity with bootstrap tokens; send identity or use a registration token", errIdentity))
			return
		}
	}
	inst, err := s.store.RegisterAgentAs(r.Context(), store.InstanceRecord{ID: b.InstanceID, Hostname: b.Hostname,
		AgentVersion: b.AgentVersion, Cloud: b.Cloud, Region: b.Region, Zone: b.Zone, InstanceType: b.InstanceType,
		GPU: b.GPU, GPUCount: b.GPUCount, Capacity: b.Capacity, Workload: b.Workload}, hash, s.now().UTC(), byRec)
	if by.kind == store.TokenRegistration {
		s.tokens.drop(by.hash) // used (or spent) either way
	}
	if err != nil {
		s.fail(w, r, err)
		return
	}
	s.tokens.dropSubject(inst.ID)
	s.tokens.put(hash, principal{kind: store.TokenAgent, subject: inst.ID}, s.now())
	s.metrics.EventRecorded(string(instance.EventRegistered))
	s.log.InfoContext(r.Context(), "agent registered", "instance", inst.ID, "cloud", b.Cloud, "version", b.AgentVersion, "with", byRec.Kind)
	writeJSON(w, http.StatusCreated, apiv1.RegisterResponse{AgentID: inst.ID, Token: token,
		HeartbeatIntervalSeconds: int(HeartbeatInterval / time.Second), Instance: apiInstance(inst)})
}

func validateHeartbeat(b *apiv1.Heartbeat) error {
	if err := finite("load1", b.Load1, 0, 1e4); err != nil {
		return err
	}
	if b.SpoolDepth < 0 {
		return badf("spool_depth %d must not be negative", b.SpoolDepth)
	}
	if len(b.GPUError) > 1024 {
		return badf("gpu_error is %d bytes; at most 1024", len(b.GPUError))
	}
	if err := checkGPUs(b.GPUs); err != nil {
		return err
	}
	gs := b.GPUs
	if b.Utilization != nil {
		return finite("gpu_utilization", *b.Utilization, 0, 1)
	}
	sum, n := 0.0, 0
	for _, g := range gs {
		if g.UtilGPUPct != nil {
			sum += float64(*g.UtilGPUPct) / 100
			n++
		}
	}
	u := 0.0
	if n > 0 {
		u = sum / float64(n)
	}
	b.Utilization = &u
	return nil
}

func (s *Server) heartbeat(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	var b apiv1.Heartbeat
	if err := decodeJSON(w, r, agentBodyLimit, &b); err != nil {
		s.fail(w, r, err)
		return
	}
	if err := validateHeartbeat(&b); err != nil {
		s.fail(w, r, err)
		return
	}
	var tele json.RawMessage
	if len(b.GPUs) > 0 {
		tele, _ = json.Marshal(b.GPUs)
	}
	// The broker's clock, not the agent's, dates the heartbeat: VM clocks
	// drift and staleness is judged here.
	err := s.beats.record(r.Context(), store.HeartbeatUpdate{Instance: id, At: s.now().UTC(), Load1: b.Load1,
		Utilization: *b.Utilization, Telemetry: tele})
	if err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, apiv1.HeartbeatResponse{HeartbeatIntervalSeconds: int(HeartbeatInterval / time.Second)})
}

// idemKey reads the Idempotency-Key header. Keys are scoped by endpoint
// (the agent uses a notice's id for both its notice and its drain report),
// so the stored key is "endpoint:key".
func idemKey(r *http.Request) (string, error) {
	k := r.Header.Get("Idempotency-Key")
	if len(k) > 200 {
		return "", badf("Idempotency-Key is %d bytes; at most 200", len(k))
	}
	return k, nil
}

func scoped(endpoint, key string) string {
	if key == "" {
		return ""
	}
	return endpoint + ":" + key
}

// readReport reads what every agent report shares: the instance id from the
// path, the Idempotency-Key header and the size-limited JSON body. On a bad
// request it has already answered, and ok is false.
func (s *Server) readReport(w http.ResponseWriter, r *http.Request, body any) (id, key string, ok bool) {
	key, err := idemKey(r)
	if err != nil {
		s.fail(w, r, err)
		return "", "", false
	}
	if err := decodeJSON(w, r, agentBodyLimit, body); err != nil {
		s.fail(w, r, err)
		return "", "", false
	}
	return r.PathValue("id"), key, true
}

func (s *Server) benchmark(w http.ResponseWriter, r *http.Request) {
	var b apiv1.BenchmarkReport
	id, key, ok := s.readReport(w, r, &b)
	if !ok {
		return
	}
	if len(b.GPUs) == 0 || len(b.GPUs) > 64 {
		s.fail(w, r, badf("gpus must hold 1 to 64 results, not %d", len(b.GPUs)))
		return
	}
	if err := checkLabel("instance_type", b.InstanceType); err != nil {
		s.fail(w, r, err)
		return
	}
	now := s.now().UTC()
	var recs []store.BenchmarkRecord
	for i, g := range b.GPUs {
		m, ok := pricing.ParseGPUModel(g.Model)
		if !ok {
			m, ok = pricing.ModelFromDeviceName(g.Name, 0)
		}
		if !ok {
			s.fail(w, r, badf("gpus[%d]: model %q / name %q is not a known GPU model", i, g.Model, g.Name))
			return
		}
		if err := finite(fmt.Sprintf("gpus[%d].tflops", i), g.TFLOPS, 0.001, 1e5); err != nil {
			s.fail(w, r, err)
			return
		}
		if err := finite(fmt.Sprintf("gpus[%d].bandwidth_gbs", i), g.BandwidthGBs, 0, 1e6); err != nil {
			s.fail(w, r, err)
			return
		}
		recs = append(recs, store.BenchmarkRecord{Instance: id, InstanceType: b.InstanceType, GPU: string(m),
			TFLOPS: g.TFLOPS, MemBandwidthGB: g.BandwidthGBs, At: now})
	}
	data, _ := json.Marshal(b)
	s.report(w, r, store.Report{Event: store.EventRecord{At: now, Kind: string(instance.EventBenchmark), Instance: id,
		Message: fmt.Sprintf("benchmark of %d GPU(s): %.1f TFLOPS on GPU %d", len(recs), b.GPUs[0].TFLOPS, b.GPUs[0].Index),
		Data:    data, IdempotencyKey: scoped("benchmarks", key)}, Benchmarks: recs})
}

func (s *Server) report(w http.ResponseWriter, r *http.Request, rep store.Report) {
	ev, dup, err := s.store.RecordReport(r.Context(), rep)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	if !dup {
		s.metrics.EventRecorded(ev.Kind)
		s.log.InfoContext(r.Context(), "agent report", "kind", ev.Kind, "instance", ev.Instance)
	}
	writeJSON(w, http.StatusAccepted, apiv1.Accepted{Status: "accepted", Duplicate: dup, Event: apiEvent(ev)})
}

func (s *Server) notice(w http.ResponseWriter, r *http.Request) {
	var b apiv1.NoticeReport
	id, key, ok := s.readReport(w, r, &b)
	if !ok {
		return
	}
	kind, err := instance.ParseNoticeKind(b.Kind)
	if err != nil {
		s.fail(w, r, badf("%v", err))
		return
	}
	if len(b.ID) > 255 || len(b.Detail) > 4096 || len(b.Action) > 64 {
		s.fail(w, r, badf("id (255), detail (4096) or action (64 bytes) is too long"))
		return
	}
	if key == "" {
		key = b.ID
	}
	data, _ := json.Marshal(b)
	ch := instance.OnNotice(kind)
	rep := store.Report{Event: store.EventRecord{At: s.now().UTC(), Kind: string(ch.Event), Instance: id,
		Message: b.Kind + orPrefix(" at ", fmtTime(b.Deadline)) + orPrefix(": ", b.Detail), Data: data, IdempotencyKey: scoped("notices", key)},
		Next: nextState(ch)}
	if ch.SetsPreemptAt {
		rep.PreemptAt = b.Deadline.UTC()
	}
	s.report(w, r, rep)
}

// errIdentity: the registration's instance identity was refused (403).
var errIdentity = errors.New("instance identity refused")

// verifyIdentity checks the registration's signed identity when the
// broker has keys for its cloud. It reports whether it verified; a
// document that does not verify, or names another instance, is refused.
// What the signed document says overrides the body's placement fields.
func (s *Server) verifyIdentity(r *http.Request, b *apiv1.RegisterRequest) (bool, error) {
	id := b.Identity
	if id == nil {
		return false, nil
	}
	if len(id.Document) > 8192 || len(id.Signature) > 4096 || len(id.Cloud) > 16 {
		return false, badf("identity is too large (document 8192, signature 4096 bytes at most)")
	}
	if !s.identity.Enabled(id.Cloud) {
		return false, nil // nothing to check against: the token alone decides
	}
	v, err := s.identity.Verify(r.Context(), *id)
	if err != nil {
		s.log.WarnContext(r.Context(), "registration with an identity that does not verify", "instance", b.InstanceID, "err", err)
		return false, fmt.Errorf("%w: %v", errIdentity, err)
	}
	if v.InstanceID != b.InstanceID {
		return false, fmt.Errorf("%w: the signed identity is instance %q, not %q", errIdentity, v.InstanceID, b.InstanceID)
	}
	b.Region, b.Zone, b.InstanceType = v.Region, v.Zone, v.InstanceType
	return true, nil
}

// nextState applies the domain's transition rules to the instance's
// state as stored, inside the report's transaction.
func nextState(ch instance.Change) func(string) string {
	return func(cur string) string { return string(instance.Next(instance.State(cur), ch)) }
}

func fmtTime(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return t.UTC().Format(time.RFC3339)
}

func (s *Server) drain(w http.ResponseWriter, r *http.Request) {
	var b apiv1.DrainReport
	id, key, ok := s.readReport(w, r, &b)
	if !ok {
		return
	}
	if len(b.Steps) > 64 {
		s.fail(w, r, badf("steps has %d entries; at most 64", len(b.Steps)))
		return
	}
	if len(b.Error) > 4096 {
		s.fail(w, r, badf("error is %d bytes; at most 4096", len(b.Error)))
		return
	}
	for i, st := range b.Steps {
		switch st.Status {
		case apiv1.StepOK, apiv1.StepFailed, apiv1.StepTimedOut, apiv1.StepSkipped:
		default:
			s.fail(w, r, badf("steps[%d].status %q is not valid; use ok, failed, timed_out or skipped", i, st.Status))
			return
		}
	}
	if key == "" {
		key = b.Info.NoticeID
	}
	data, _ := json.Marshal(b)
	ch := instance.OnDrain(b.OK)
	msg := "drain completed"
	if !b.OK {
		msg = "drain failed"
	}
	failed := 0
	for _, st := range b.Steps {
		if st.Status != "ok" && st.Status != "skipped" {
			failed++
		}
	}
	msg += fmt.Sprintf(" (%d step(s), %d not ok)", len(b.Steps), failed) + orPrefix(": ", b.Error)
	s.report(w, r, store.Report{Event: store.EventRecord{At: s.now().UTC(), Kind: string(ch.Event), Instance: id, Message: msg,
		Data: data, IdempotencyKey: scoped("drains", key)}, Next: nextState(ch), DrainState: ch.DrainState})
}

func orPrefix(p, s string) string {
	if s == "" {
		return ""
	}
	return p + s
}
