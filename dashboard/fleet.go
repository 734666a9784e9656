package dashboard

import (
	"encoding/json"
	"errors"
	"net/http"
	"net/url"
	"sort"
	"strconv"
	"time"

	"github.com/gpubroker/gpubroker/pricing"
)

// gpuTelemetry is what the dashboard shows of an agent's per-GPU
// telemetry; unknown fields are ignored and missing ones shown as blank.
type gpuTelemetry struct {
	Index          int      `json:"index"`
	Name           string   `json:"name"`
	Model          string   `json:"model"`
	UtilGPUPct     *float64 `json:"util_gpu_pct"`
	MemoryUsedMiB  *float64 `json:"memory_used_mib"`
	MemoryTotalMiB *float64 `json:"memory_total_mib"`
	TempC          *float64 `json:"temperature_c"`
	PowerW         *float64 `json:"power_w"`
}

type agentRow struct {
	Agent
	Active       bool
	HeartbeatAgo string
	Age          string
	GPUs         []gpuTelemetry
}

type fleetInstanceRow struct {
	FleetInstance
	Age string
}

type benchRow struct {
	InstanceType, GPU       string
	Runs                    int
	TFLOPS, BandwidthGB     float64
	SpecTFLOPS, SpecBW      float64
	TFLOPSPct, BandwidthPct float64
	Last                    time.Time
}

type fleetData struct {
	Workload   string
	FleetNote  string
	Fleet      []fleetInstanceRow
	Slots      []SlotSummary
	FleetTotal int
	Agents     []agentRow
	AgentTotal int
	AgentNote  string
	From, To   int
	Prev, Next string
	Bench      []benchRow
	BenchNote  string
}

func (s *Server) fleet(w http.ResponseWriter, r *http.Request, rq request) {
	ctx := r.Context()
	now := s.now()
	q := r.URL.Query()
	workload := q.Get("workload")
	pg, _ := strconv.Atoi(q.Get("page"))
	pg = clampPage(pg)
	d := fleetData{Workload: workload}
	off := (pg - 1) * pageSize

	fp, err := s.cfg.Fleet.FleetInstances(ctx, FleetQuery{Workload: workload, Offset: off, Limit: pageSize})
	switch {
	case errors.Is(err, ErrNoSource):
		d.FleetNote = "The autoscaler has not recorded any instances yet. Instances and slots appear here once it places workloads; until then, the agents below are what runs."
	case err != nil:
		s.internal(w, r, "the fleet state", err)
		return
	default:
		d.Slots, d.FleetTotal = fp.Slots, fp.Total
		for _, in := range fp.Instances {
			d.Fleet = append(d.Fleet, fleetInstanceRow{FleetInstance: in, Age: ago(now, in.LaunchedAt)})
		}
		if fp.Total == 0 {
			d.FleetNote = "The autoscaler runs no instances now."
		}
	}

	total := 0
	if s.cfg.Agents == nil {
		d.AgentNote = "This broker does not track agents."
	} else {
		agents, n, err := s.cfg.Agents.Agents(ctx, workload, off, pageSize)
		if err != nil {
			s.internal(w, r, "the agents", err)
			return
		}
		total = n
		d.AgentTotal = n
		for _, a := range agents {
			row := agentRow{Agent: a, Active: now.Sub(a.LastHeartbeat) <= s.cfg.ActiveWithin,
				HeartbeatAgo: ago(now, a.LastHeartbeat), Age: ago(now, a.RegisteredAt)}
			// Telemetry is agent-supplied: parse leniently, show what parses.
			_ = json.Unmarshal(a.Telemetry, &row.GPUs)
			if len(row.GPUs) > 16 {
				row.GPUs = row.GPUs[:16]
			}
			d.Agents = append(d.Agents, row)
		}
		if n == 0 {
			d.AgentNote = "No agent has registered yet. Install `gpubroker agent` in your GPU VMs (docs/agent.md)."
		}
	}
	total = max(total, d.FleetTotal)
	d.From, d.To = min(off, total), min(off+pageSize, total)
	link := func(p int) string {
		v := url.Values{}
		if workload != "" {
			v.Set("workload", workload)
		}
		v.Set("page", strconv.Itoa(p))
		return "/ui/fleet?" + v.Encode()
	}
	if pg > 1 {
		d.Prev = link(pg - 1)
	}
	if off+pageSize < total {
		d.Next = link(pg + 1)
	}

	if s.cfg.Benchmarks == nil {
		d.BenchNote = "This broker does not record benchmarks."
	} else {
		bs, err := s.cfg.Benchmarks.Benchmarks(ctx)
		if err != nil {
			s.internal(w, r, "the benchmarks", err)
			return
		}
		d.Bench = benchRows(bs)
		if len(d.Bench) == 0 {
			d.BenchNote = "No agent has reported a benchmark yet."
		}
	}
	s.render(w, r, http.StatusOK, "fleet", s.pageFor(rq, "Fleet", "fleet", d))
}

// benchRows averages the results per instance type and GPU and sets them
// against the GPU's spec sheet.
func benchRows(bs []Benchmark) []benchRow {
	idx := map[[2]string]*benchRow{}
	var keys [][2]string
	for _, b := range bs {
		k := [2]string{b.InstanceType, b.GPU}
		row, ok := idx[k]
		if !ok {
			row = &benchRow{InstanceType: b.InstanceType, GPU: b.GPU}
			idx[k] = row
			keys = append(keys, k)
		}
		row.Runs++
		row.TFLOPS += b.TFLOPS
		row.BandwidthGB += b.MemBandwidthGB
		if b.At.After(row.Last) {
			row.Last = b.At
		}
	}
	out := make([]benchRow, 0, len(keys))
	for _, k := range keys {
		row := idx[k]
		row.TFLOPS /= float64(row.Runs)
		row.BandwidthGB /= float64(row.Runs)
		if spec, ok := pricing.Spec(pricing.GPUModel(row.GPU)); ok {
			row.SpecTFLOPS, row.SpecBW = spec.TensorTFLOPS, spec.MemoryBandwidthGBs
			if spec.TensorTFLOPS > 0 {
				row.TFLOPSPct = 100 * row.TFLOPS / spec.TensorTFLOPS
			}
			if spec.MemoryBandwidthGBs > 0 {
				row.BandwidthPct = 100 * row.BandwidthGB / spec.MemoryBandwidthGBs
			}
		}
		out = append(out, *row)
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].GPU != out[j].GPU {
			return out[i].GPU < out[j].GPU
		}
		return out[i].InstanceType < out[j].InstanceType
	})
	return out
}
