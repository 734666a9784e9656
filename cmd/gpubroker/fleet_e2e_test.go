//go:build !agentonly && linux

package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gpubroker/gpubroker/apiv1"
	"github.com/gpubroker/gpubroker/fleet"
	"github.com/gpubroker/gpubroker/internal/shareddata"
	"github.com/gpubroker/gpubroker/internal/testpg"
	"github.com/gpubroker/gpubroker/providers/fake"
	"github.com/gpubroker/gpubroker/store"
)

// e2ePolicy: a batch job and an inference service on T4s in us-east-1,
// spot preferred (on-demand is the fallback when spot pools are blocked).
const e2ePolicy = `clouds: [aws]
workloads:
  - name: embed
    kind: batch
    gpu: {models: [T4], count: 3}
    work: {gpu_hours: 30, reference_gpu: T4}
    checkpoint_interval: 10m
    restart_overhead: 5m
    spot: only
    placement: {regions: [us-east-1]}
  - name: chat
    kind: inference
    gpu: {models: [T4], count: 1}
    replicas: {min: 2, max: 6}
    spot: prefer
    placement: {regions: [us-east-1]}
`

func freePort(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

func needE2E(t *testing.T) {
	t.Helper()
	why := ""
	if os.Geteuid() != 0 {
		why = "needs root"
	} else if _, err := exec.LookPath("unshare"); err != nil {
		why = "needs unshare (util-linux)"
	} else if out, err := exec.Command("unshare", "--uts", "true").CombinedOutput(); err != nil {
		why = "unshare --uts fails: " + strings.TrimSpace(string(out))
	}
	if why == "" {
		return
	}
	// Each fake instance's agent runs in its own UTS namespace so that its
	// host name, which the agent registers as its instance id, is the fake
	// cloud's instance id.
	if os.Getenv("CI") == "true" {
		t.Fatalf("fleet end-to-end test %s; CI must run it", why)
	}
	t.Skipf("fleet end-to-end test %s", why)
}

// TestFleetEndToEnd runs `gpubroker serve` (SQLite, then PostgreSQL) with
// the fake cloud in-process and real `gpubroker agent` processes started by
// each instance's user data, watching the fake metadata service. A real
// 16-node spot availability trace is replayed 3600× fast as a preemption
// storm; then the weather clears and every slot must be running again, no
// slot may ever have had two live instances, and every launch, notice and
// replacement must be in the events.
func TestFleetEndToEnd(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end test; skipped with -short")
	}
	needE2E(t)
	traces := shareddata.Dir(t, "spot-traces", "availability", "16-node", "aws-08-27-2023")
	t.Run("sqlite", func(t *testing.T) { runE2E(t, filepath.Join(t.TempDir(), "broker.db"), traces) })
	t.Run("postgres", func(t *testing.T) { runE2E(t, testpg.DSN(t), traces) })
}

type e2e struct {
	t      *testing.T
	broker string
	meta   string
	token  string
}

func runE2E(t *testing.T, dsn, traces string) {
	dir := t.TempDir()
	brokerAddr, metaAddr := freePort(t), freePort(t)
	e := &e2e{t: t, broker: "http://" + brokerAddr, meta: "http://" + metaAddr}
	userData := `#!/bin/sh
mkdir -p "$GPUBROKER_FAKE_INSTANCE_DIR/state"
printf '%s' '{{.Token}}' > "$GPUBROKER_FAKE_INSTANCE_DIR/token"
exec unshare --uts sh -c 'hostname "$GPUBROKER_FAKE_INSTANCE_ID" && exec ` + os.Args[0] + ` agent --cloud aws --metadata-url "$GPUBROKER_FAKE_METADATA_URL" --broker {{.BrokerURL}} --token-file "$GPUBROKER_FAKE_INSTANCE_DIR/token" --state-dir "$GPUBROKER_FAKE_INSTANCE_DIR/state" --poll-interval 200ms'
`
	cfg := fmt.Sprintf(`fleet:
  mode: apply
  interval: 500ms
  broker_url: %s
  boot_timeout: 90s
  unavailable_backoff: 5s
  max_instances: 60
  launches_per_minute: 600
  clouds:
    fake:
      pretend: aws
      traces: %s
      seed: 11
      spot_scale: 1
      time_scale: 3600
      launch_latency: 300ms
      notice_lead: 3s
      metadata_listen: %s
      run_user_data: true
      user_data: |
%s`, e.broker, traces, metaAddr, indent(userData, "        "))
	writeE2EFile(t, filepath.Join(dir, "serve.yaml"), cfg)
	writeE2EFile(t, filepath.Join(dir, "policy.yaml"), e2ePolicy)

	cmd, token := startServe(t, dir, "--config", filepath.Join(dir, "serve.yaml"), "-f", filepath.Join(dir, "policy.yaml"),
		"--db", dsn, "--listen", brokerAddr, "--no-refresh-on-start", "--lease-ttl", "5s")
	e.token = token
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		done := make(chan struct{})
		go func() { _ = cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(20 * time.Second):
			_ = cmd.Process.Kill()
			<-done
		}
		killLeftovers(t, dir)
		if t.Failed() {
			t.Logf("serve log (tail):\n%s", tail(serveLogTail(dir, 1<<20), 60))
		}
	})

	// 1. The fleet fills.
	slots := e.waitAllRunning(90 * time.Second)
	t.Logf("%d slots running", len(slots))
	if len(slots) < 5 {
		t.Fatalf("only %d slots", len(slots))
	}
	// 2. The storm: the trace replays (an hour of it per second) until it
	// has preempted at least 2 instances; duplicates are checked all along.
	// (How many it preempts depends on where the fleet sits: a batch job's
	// instances that a preemption left behind follow the job to its new
	// pool, which the trace may leave alone for the rest of the window.)
	var notices []fake.Notice
	stormEnd := time.Now().Add(90 * time.Second)
	for len(notices) < 2 {
		if time.Now().After(stormEnd) {
			t.Fatalf("the replayed trace caused only %d notices in 90s; no storm", len(notices))
		}
		e.checkNoDuplicates()
		time.Sleep(200 * time.Millisecond)
		e.getJSON(e.meta+"/_fake/notices", &notices)
	}
	// Let the replacements of the storm run into it a little longer.
	for end := time.Now().Add(5 * time.Second); time.Now().Before(end); time.Sleep(200 * time.Millisecond) {
		e.checkNoDuplicates()
	}
	e.post(e.meta+"/_fake/calm", "")
	e.getJSON(e.meta+"/_fake/notices", &notices)
	t.Logf("preemption notices during the storm: %d", len(notices))
	// 3. Every slot is refilled, with no duplicate on the way.
	deadline := time.Now().Add(120 * time.Second)
	for {
		e.checkNoDuplicates()
		st := e.status()
		if allRunning(st) && len(st.Slots) == len(slots) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("slots not refilled: %+v", st.ByState)
		}
		time.Sleep(300 * time.Millisecond)
	}
	e.checkEvents(notices)
	checkShortfallStored(t, dsn, "chat")
}

// checkShortfallStored: the hedged service's time below target (its cold
// start at least: no replica serves before it boots) is in the store, where
// the next leader reads its error budget from (docs/fleet.md).
func checkShortfallStored(t *testing.T, dsn, workload string) {
	t.Helper()
	ctx := t.Context()
	st, err := store.Open(ctx, dsn, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	b, err := st.Broker(ctx)
	if err != nil {
		t.Fatal(err)
	}
	f, err := b.Fleet(ctx)
	if err != nil {
		t.Fatal(err)
	}
	recs, err := f.Shortfall(ctx, workload, time.Time{})
	if err != nil {
		t.Fatal(err)
	}
	secs := 0.0
	for _, r := range recs {
		secs += r.Seconds
	}
	t.Logf("%s: %d ticks below target stored, %.0f s", workload, len(recs), secs)
	if len(recs) == 0 {
		t.Fatalf("no time below target stored for %s: a new leader would start it with a whole error budget", workload)
	}
}

func (e *e2e) waitAllRunning(d time.Duration) []apiv1.FleetSlot {
	deadline := time.Now().Add(d)
	for {
		st := e.status()
		if len(st.Slots) > 0 && allRunning(st) {
			return st.Slots
		}
		if time.Now().After(deadline) {
			e.t.Fatalf("the fleet did not fill: %+v", st.ByState)
		}
		time.Sleep(300 * time.Millisecond)
	}
}

func allRunning(st apiv1.FleetStatus) bool {
	for _, s := range st.Slots {
		if fleet.State(s.State) != fleet.Running || s.Agent != "healthy" {
			return false
		}
	}
	return true
}

func (e *e2e) status() apiv1.FleetStatus {
	var st apiv1.FleetStatus
	e.getJSON(e.broker+"/api/v1/fleet", &st)
	return st
}

// checkNoDuplicates reads the fake cloud's console: no slot may have two
// live instances that are not on their way out (noticed or terminated).
func (e *e2e) checkNoDuplicates() {
	var insts []fake.ConsoleInstance
	e.getJSON(e.meta+"/_fake/instances", &insts)
	per := map[string][]string{}
	tokens := map[string]int{}
	for _, in := range insts {
		if in.Tags[fleet.TagFleet] == "" {
			continue
		}
		tokens[in.Tags[fleet.TagToken]]++
		if in.State == "terminated" || in.Noticed {
			continue
		}
		per[in.Tags[fleet.TagSlot]] = append(per[in.Tags[fleet.TagSlot]], in.ID)
	}
	for s, ids := range per {
		if len(ids) > 1 {
			e.t.Fatalf("slot %s has %d live instances: %v", s, len(ids), ids)
		}
	}
	for tok, n := range tokens {
		if n > 1 {
			e.t.Fatalf("launch token %s started %d instances", tok, n)
		}
	}
}

// checkEvents: every instance the fleet launched has its launch event,
// every slot's transitions form a valid chain, and every preempted
// instance that was running its slot was moved out (draining) with an
// event, most with the agent's own notice report.
func (e *e2e) checkEvents(notices []fake.Notice) {
	var evs []apiv1.Event
	after := int64(0)
	for {
		var page apiv1.List[apiv1.Event]
		e.getJSON(e.broker+"/api/v1/events?limit=1000&after_id="+strconv.FormatInt(after, 10), &page)
		evs = append(evs, page.Items...)
		if len(page.Items) < 1000 {
			break
		}
		after = page.Items[len(page.Items)-1].ID
	}
	launched := map[string]bool{}
	drained := map[string]bool{}
	reported := map[string]bool{}
	ran := map[string]bool{}
	last := map[string]string{}
	for _, ev := range evs {
		switch ev.Kind {
		case "notice", "preemption_notice":
			reported[ev.Instance] = true
		case "fleet.slot":
			var d struct{ Slot, From, To, Reason string }
			if err := json.Unmarshal(ev.Data, &d); err != nil {
				e.t.Fatalf("event %d data: %v", ev.ID, err)
			}
			if prev, ok := last[d.Slot]; ok && prev != d.From {
				e.t.Fatalf("slot %s: event %d moves from %s but the slot was %s", d.Slot, ev.ID, d.From, prev)
			}
			if d.From != "" && !fleet.CanMove(fleet.State(d.From), fleet.State(d.To)) {
				e.t.Fatalf("slot %s: invalid move %s → %s", d.Slot, d.From, d.To)
			}
			last[d.Slot] = d.To
			if d.To == string(fleet.Booting) && ev.Instance != "" {
				launched[ev.Instance] = true
			}
			if d.To == string(fleet.Running) {
				ran[ev.Instance] = true
			}
			if d.From == string(fleet.Running) && d.To == string(fleet.Draining) {
				drained[ev.Instance] = true
			}
		}
	}
	var insts []fake.ConsoleInstance
	e.getJSON(e.meta+"/_fake/instances", &insts)
	for _, in := range insts {
		if in.Tags[fleet.TagFleet] != "" && !launched[in.ID] {
			e.t.Errorf("instance %s (slot %s) has no launch event", in.ID, in.Tags[fleet.TagSlot])
		}
	}
	replaced, withReport := 0, 0
	for _, n := range notices {
		if !ran[n.Instance.ID] {
			continue // noticed while still booting
		}
		replaced++
		if !drained[n.Instance.ID] {
			e.t.Errorf("preempted instance %s was running its slot but has no running → draining event", n.Instance.ID)
		}
		if reported[n.Instance.ID] {
			withReport++
		}
	}
	e.t.Logf("events: %d; preempted running instances: %d, reported by their agent: %d", len(evs), replaced, withReport)
	if replaced > 0 && withReport == 0 {
		e.t.Errorf("no agent reported any of %d preemption notices", replaced)
	}
}

func (e *e2e) getJSON(url string, v any) {
	e.t.Helper()
	req, _ := http.NewRequest(http.MethodGet, url, nil)
	req.Header.Set("Authorization", "Bearer "+e.token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		e.t.Fatalf("GET %s: %v", url, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		e.t.Fatalf("GET %s: %d %s", url, resp.StatusCode, b)
	}
	if err := json.Unmarshal(b, v); err != nil {
		e.t.Fatalf("GET %s: %v: %s", url, err, b)
	}
}

func (e *e2e) post(url, body string) {
	e.t.Helper()
	resp, err := http.Post(url, "text/plain", strings.NewReader(body))
	if err != nil {
		e.t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode >= 300 {
		e.t.Fatalf("POST %s: %d", url, resp.StatusCode)
	}
}

func writeE2EFile(t *testing.T, path, s string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(s), 0o600); err != nil {
		t.Fatal(err)
	}
}

func indent(s, pre string) string {
	var b strings.Builder
	for _, l := range strings.Split(strings.TrimRight(s, "\n"), "\n") {
		b.WriteString(pre + l + "\n")
	}
	return b.String()
}

func tail(s string, n int) string {
	ls := strings.Split(s, "\n")
	if len(ls) > n {
		ls = ls[len(ls)-n:]
	}
	return strings.Join(ls, "\n")
}

// killLeftovers ends agent processes this test's broker started (their
// command line names the test's directory), should the broker have died
// without stopping them.
func killLeftovers(t *testing.T, dir string) {
	procs, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	for _, p := range procs {
		b, err := os.ReadFile(p)
		if err != nil || !strings.Contains(string(b), dir) {
			continue
		}
		pid, err := strconv.Atoi(filepath.Base(filepath.Dir(p)))
		if err == nil && pid != os.Getpid() {
			t.Logf("killing leftover process %d", pid)
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	}
}
