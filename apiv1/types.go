package apiv1

import (
	"encoding/json"
	"errors"
	"time"
)

// Status is the answer of /healthz and /readyz.
type Status struct {
	Status string `json:"status"`
}

// List is the envelope of every list answer.
type List[T any] struct {
	Items []T `json:"items"`
}

// --- offers ---

// SpotSignal is how likely an offer's spot capacity is to be reclaimed.
type SpotSignal struct {
	Bucket               string  `json:"bucket,omitempty"`
	InterruptionsPerHour float64 `json:"interruptions_per_hour"`
	PlacementScore       int     `json:"placement_score,omitempty"`
	Availability         float64 `json:"availability,omitempty"`
	// Default is true when the signal is the broker's default for the
	// cloud, not an observation.
	Default bool `json:"default"`
}

// Offer is one purchasable shape in one place (docs/pricing.md).
type Offer struct {
	Cloud         string     `json:"cloud"`
	Region        string     `json:"region"`
	Zone          string     `json:"zone,omitempty"`
	InstanceType  string     `json:"instance_type"`
	GPU           string     `json:"gpu"`
	GPUCount      int        `json:"gpu_count"`
	GPUMemoryGiB  float64    `json:"gpu_memory_gib"`
	VCPUs         float64    `json:"vcpus"`
	MemoryGiB     float64    `json:"memory_gib"`
	OnDemandPrice float64    `json:"on_demand_price"`
	SpotPrice     float64    `json:"spot_price,omitempty"`
	Spot          SpotSignal `json:"spot_signal"`
	ObservedAt    time.Time  `json:"observed_at"`
	Source        string     `json:"source"`
}

// OffersQuery selects offers (GET /api/v1/offers); zero fields do not
// filter.
type OffersQuery struct {
	GPUs     []string // canonical GPU models
	Clouds   []string
	Regions  []string // globs, e.g. "us-*"
	Capacity string   // "on-demand" or "spot"
	MinGPUs  int
	MaxGPUs  int
	// MinGPUMemoryGiB is per GPU.
	MinGPUMemoryGiB float64
	// MaxPrice is USD per instance-hour.
	MaxPrice float64
	Limit    int
}

// Offers is the answer of GET /api/v1/offers.
type Offers struct {
	GeneratedAt time.Time `json:"generated_at"`
	Source      string    `json:"source"`
	Count       int       `json:"count"`
	Offers      []Offer   `json:"offers"`
}

// --- plan and budgets (docs/plan.md) ---

// Plan is the optimizer's plan of a policy.
type Plan struct {
	GeneratedAt  time.Time   `json:"generated_at"`
	Policy       string      `json:"policy"`
	Catalog      CatalogInfo `json:"catalog"`
	HorizonHours float64     `json:"horizon_hours"`
	// Solver is the solver that produced the plan (heuristic or exact).
	Solver     string      `json:"solver"`
	Placements []Placement `json:"placements"`
	Totals     Totals      `json:"totals"`
	Bound      Bound       `json:"bound"`
	Warnings   []string    `json:"warnings"`
	// Blocked lists the workloads that could not be placed, each with the
	// constraint that blocks it and how that is known.
	Blocked   []Blocked     `json:"blocked"` // SpotPools are the spot pools the plan uses, with their capacity.
	SpotPools []SpotPoolUse `json:"spot_pools"`
}

// SpotPoolUse is one spot pool (cloud/zone/gpu) a plan puts spot GPUs in
// (docs/plan.md, "Spot pool capacity").
type SpotPoolUse struct {
	Pool           string `json:"pool"`
	CapacityGPUs   int    `json:"capacity_gpus"`
	UsedGPUs       int    `json:"used_gpus"`
	Source         string `json:"source"`
	PlacementScore int    `json:"placement_score,omitempty"`
	Constrained    bool   `json:"constrained"`
}

// LoadSummary is an inference service's load profile: replicas by hour.
type LoadSummary struct {
	Hours        int     `json:"hours"`
	MinReplicas  int     `json:"min_replicas"`
	PeakReplicas int     `json:"peak_replicas"`
	MeanReplicas float64 `json:"mean_replicas"`
	Capped       bool    `json:"capped,omitempty"`
}

// Blocked is a workload the plan could not place.
type Blocked struct {
	Pos        string `json:"pos,omitempty"`
	Workload   string `json:"workload"`
	Constraint string `json:"constraint"`
	Reason     string `json:"reason"`
	Proof      string `json:"proof"`
}

// CatalogInfo says which prices a plan used.
type CatalogInfo struct {
	Source        string    `json:"source"`
	GeneratedAt   time.Time `json:"generated_at"`
	AgeHours      float64   `json:"age_hours"`
	Offers        int       `json:"offers"`
	UndatedOffers int       `json:"undated_offers,omitempty"`
}

// Placement is where one workload runs, what it costs and why.
type Placement struct {
	Workload      string  `json:"workload"`
	Team          string  `json:"team,omitempty"`
	Kind          string  `json:"kind"`
	Cloud         string  `json:"cloud"`
	Region        string  `json:"region"`
	Zone          string  `json:"zone"`
	InstanceType  string  `json:"instance_type"`
	GPU           string  `json:"gpu"`
	Capacity      string  `json:"capacity"`
	GPUs          int     `json:"gpus"`
	Instances     int     `json:"instances"`
	MinReplicas   int     `json:"min_replicas,omitempty"`
	MaxReplicas   int     `json:"max_replicas,omitempty"`
	PricePerHour  float64 `json:"price_per_hour"`
	RelativeSpeed float64 `json:"relative_speed,omitempty"`
	// ScalingEfficiency is the multi-GPU/multi-node scaling applied.
	ScalingEfficiency    float64       `json:"scaling_efficiency,omitempty"`
	ExpectedHours        float64       `json:"expected_hours"`
	DeadlineHours        float64       `json:"deadline_hours,omitempty"`
	ExpectedPreemptions  float64       `json:"expected_preemptions"`
	InterruptionsPerHour float64       `json:"interruptions_per_hour"`
	SpotSignalDefault    bool          `json:"spot_signal_default"`
	ExpectedCost         float64       `json:"expected_cost"`
	Breakdown            CostBreakdown `json:"breakdown"`
	WorstCaseCost        float64       `json:"worst_case_cost,omitempty"`
	OnDemandBaseline     float64       `json:"on_demand_baseline"`
	Savings              float64       `json:"savings"`
	SavingsPercent       float64       `json:"savings_percent"`
	Groups               []Group       `json:"groups"`
	RunnerUp             *RunnerUp     `json:"runner_up"`
	ByGPU                []GPUChoice   `json:"by_gpu"`
	Explanation          []string      `json:"explanation"`
	// Schedule, RunsPerMonth, RunsInHorizon and CostPerRun describe a
	// recurring job's costing; Load a service's load profile; MonthlyCost
	// is what budgets are checked against.
	Schedule      string       `json:"schedule,omitempty"`
	RunsPerMonth  float64      `json:"runs_per_month,omitempty"`
	RunsInHorizon float64      `json:"runs_in_horizon,omitempty"`
	CostPerRun    float64      `json:"cost_per_run,omitempty"`
	Load          *LoadSummary `json:"load,omitempty"`
	MonthlyCost   float64      `json:"monthly_cost"`
}

// CostBreakdown splits a placement's expected cost.
type CostBreakdown struct {
	Compute        float64 `json:"compute"`
	PreemptionLoss float64 `json:"preemption_loss"`
	Restart        float64 `json:"restart"`
	Hedge          float64 `json:"hedge"`
}

// Group is a set of identical instances of one placement.
type Group struct {
	Cloud           string  `json:"cloud"`
	Region          string  `json:"region"`
	Zone            string  `json:"zone"`
	InstanceType    string  `json:"instance_type"`
	GPU             string  `json:"gpu"`
	GPUsPerInstance int     `json:"gpus_per_instance"`
	Instances       int     `json:"instances"`
	Capacity        string  `json:"capacity"`
	PricePerHour    float64 `json:"price_per_hour"`
	// Interconnect is the instance type's GPU network (efa, gpudirect-…,
	// infiniband), when it has one.
	Interconnect string `json:"interconnect,omitempty"`
	// SpotPool and PlacementScore: a spot group's pool and its best spot
	// placement score (1-10), when known.
	SpotPool       string `json:"spot_pool,omitempty"`
	PlacementScore int    `json:"placement_score,omitempty"`
}

// RunnerUp is the best option a placement beat, and why it lost.
type RunnerUp struct {
	Cloud         string  `json:"cloud"`
	Region        string  `json:"region"`
	Zone          string  `json:"zone"`
	InstanceType  string  `json:"instance_type"`
	GPU           string  `json:"gpu"`
	Capacity      string  `json:"capacity"`
	ExpectedCost  float64 `json:"expected_cost"`
	ExpectedHours float64 `json:"expected_hours"`
	Constraint    string  `json:"constraint"`
	Reason        string  `json:"reason"`
}

// GPUChoice is one GPU model's best option for a workload.
type GPUChoice struct {
	GPU          string  `json:"gpu"`
	Feasible     bool    `json:"feasible"`
	Capacity     string  `json:"capacity,omitempty"`
	Where        string  `json:"where,omitempty"`
	ExpectedCost float64 `json:"expected_cost,omitempty"`
	CostPerUnit  float64 `json:"cost_per_unit,omitempty"`
	Reason       string  `json:"reason,omitempty"`
}

// Totals sum a plan's placements.
type Totals struct {
	ExpectedCost     float64 `json:"expected_cost"`
	OnDemandBaseline float64 `json:"on_demand_baseline"`
	Savings          float64 `json:"savings"`
	SavingsPercent   float64 `json:"savings_percent"`
	GPUs             int     `json:"gpus"`
}

// Bound is how close a plan is proven to be to optimal.
type Bound struct {
	LowerBound float64 `json:"lower_bound"`
	GapPercent float64 `json:"gap_percent"`
	Method     string  `json:"method"`
}

// Budgets is the answer of GET /api/v1/budgets.
type Budgets struct {
	Policy       string         `json:"policy"`
	HorizonHours float64        `json:"horizon_hours"`
	GeneratedAt  time.Time      `json:"generated_at"`
	Budgets      []BudgetStatus `json:"budgets"`
}

// BudgetStatus is one policy budget next to the plan's spend under it.
type BudgetStatus struct {
	Name       string   `json:"name"`
	Team       string   `json:"team,omitempty"`
	Workload   string   `json:"workload,omitempty"`
	MonthlyUSD float64  `json:"monthly_usd"`
	PlannedUSD float64  `json:"planned_usd"`
	Workloads  []string `json:"workloads"`
	// Action is what happens at 100%: alert, stop-scaling or spot-only.
	Action string `json:"action,omitempty"`
	// SpentUSD is this calendar month's spend from the ledger (UTC);
	// BurnPerHourUSD the hourly price of what runs now; ForecastUSD
	// spent + burn × hours left in the month.
	SpentUSD        float64 `json:"spent_usd"`
	BurnPerHourUSD  float64 `json:"burn_per_hour_usd"`
	ForecastUSD     float64 `json:"forecast_usd"`
	ForecastPercent float64 `json:"forecast_percent"`
}

// --- spend (the ledger) ---

// SpendQuery selects the spend ledger (GET /api/v1/spend): days in
// [Since, Until) grouped By one of cloud, team, workload, day, capacity.
type SpendQuery struct {
	Since time.Time
	Until time.Time
	By    string
}

// SpendLine is one group's spend.
type SpendLine struct {
	Key      string  `json:"key"`
	Cost     float64 `json:"cost_usd"`
	OnDemand float64 `json:"on_demand_usd"`
	Savings  float64 `json:"savings_usd"`
}

// Spend is the answer of GET /api/v1/spend.
type Spend struct {
	Since    time.Time   `json:"since"`
	Until    time.Time   `json:"until"`
	By       string      `json:"by"`
	Cost     float64     `json:"cost_usd"`
	OnDemand float64     `json:"on_demand_usd"`
	Savings  float64     `json:"savings_usd"`
	Lines    []SpendLine `json:"lines"`
}

// --- workloads ---

// Workload kinds.
const (
	KindTraining  = "training"
	KindInference = "inference"
	KindBatch     = "batch"
)

// WorkloadInput is the body of POST /api/v1/workloads and
// PUT /api/v1/workloads/{name}.
type WorkloadInput struct {
	Name string `json:"name"`
	Team string `json:"team,omitempty"`
	Kind string `json:"kind"`
	// Spec is any JSON object, kept as given.
	Spec json.RawMessage `json:"spec,omitempty"`
}

// Workload is a stored workload.
type Workload struct {
	Name      string          `json:"name"`
	Team      string          `json:"team,omitempty"`
	Kind      string          `json:"kind"`
	Spec      json.RawMessage `json:"spec,omitempty"`
	CreatedAt time.Time       `json:"created_at"`
	UpdatedAt time.Time       `json:"updated_at"`
}

// --- instances, events, benchmarks ---

// Instance states (see fleet/instance for the transitions).
const (
	StateRunning    = "running"
	StatePreempting = "preempting"
	StateDraining   = "draining"
	StateDrained    = "drained"
)

// Instance is a GPU instance known to the broker, with the latest figures
// its agent reported.
type Instance struct {
	ID           string    `json:"id"`
	Hostname     string    `json:"hostname,omitempty"`
	AgentVersion string    `json:"agent_version,omitempty"`
	Cloud        string    `json:"cloud"`
	Region       string    `json:"region"`
	Zone         string    `json:"zone,omitempty"`
	InstanceType string    `json:"instance_type"`
	GPU          string    `json:"gpu,omitempty"`
	GPUCount     int       `json:"gpu_count,omitempty"`
	Capacity     string    `json:"capacity,omitempty"`
	Workload     string    `json:"workload,omitempty"`
	State        string    `json:"state"`
	RegisteredAt time.Time `json:"registered_at"`
	// LastHeartbeat is zero until the first heartbeat.
	LastHeartbeat time.Time `json:"last_heartbeat,omitzero"`
	Load1         float64   `json:"load1"`
	// Utilization is the mean GPU utilisation, 0..1.
	Utilization float64 `json:"gpu_utilization"`
	// Telemetry is the last heartbeat's GPUs.
	Telemetry  []GPUStat `json:"telemetry,omitempty"`
	DrainState string    `json:"drain_state,omitempty"`
	// PreemptAt is when a preemption notice says the instance goes.
	PreemptAt time.Time `json:"preempt_at,omitzero"`
}

// InstancesQuery selects instances; zero fields do not filter.
type InstancesQuery struct {
	Workload string
	State    string
}

// Event kinds.
const (
	EventRegistered       = "registered"
	EventLaunched         = "launched"
	EventPreemptionNotice = "preemption_notice"
	EventNotice           = "notice"
	EventDrained          = "drained"
	EventDrainFailed      = "drain_failed"
	EventTerminated       = "terminated"
	EventPriceChange      = "price_change"
	EventBudgetAlert      = "budget_alert"
	EventSlowHost         = "slow_host"
	EventBenchmark        = "benchmark"
)

// Event is one thing that happened.
type Event struct {
	ID             int64           `json:"id"`
	At             time.Time       `json:"at"`
	Kind           string          `json:"kind"`
	Instance       string          `json:"instance,omitempty"`
	Workload       string          `json:"workload,omitempty"`
	Message        string          `json:"message,omitempty"`
	Data           json.RawMessage `json:"data,omitempty"`
	IdempotencyKey string          `json:"idempotency_key,omitempty"`
}

// EventsQuery selects events; zero fields do not filter.
type EventsQuery struct {
	Kind     string
	Instance string
	Workload string
	Since    time.Time
	// AfterID pages: events with a larger id.
	AfterID int64
	// Limit is 1..1000 (default 100).
	Limit int
}

// Benchmark is one measured benchmark of an instance's GPU.
type Benchmark struct {
	ID             int64     `json:"id"`
	Instance       string    `json:"instance"`
	InstanceType   string    `json:"instance_type,omitempty"`
	GPU            string    `json:"gpu"`
	TFLOPS         float64   `json:"tflops"`
	MemBandwidthGB float64   `json:"mem_bandwidth_gbps"`
	At             time.Time `json:"at"`
}

// --- tokens ---

// Token kinds.
const (
	// TokenAdmin may call every route.
	TokenAdmin = "admin"
	// TokenBootstrap may register agents for instances the broker does not
	// know yet; it never re-registers (takes over) an existing instance.
	TokenBootstrap = "bootstrap"
	// TokenRegistration registers exactly one instance, once, before it
	// expires; the fleet controller mints one per launch.
	TokenRegistration = "registration"
	// TokenAgent is issued by registration and reports for its own
	// instance only.
	TokenAgent = "agent"
)

// TokenInput is the body of POST /api/v1/tokens.
type TokenInput struct {
	Kind string `json:"kind"`
	// Name labels admin and bootstrap tokens.
	Name string `json:"name,omitempty"`
	// InstanceID binds a registration token to one instance.
	InstanceID string `json:"instance_id,omitempty"`
	// TTLSeconds makes the token expire (registration tokens default to
	// one hour; 0 on other kinds: no expiry).
	TTLSeconds int64 `json:"ttl_seconds,omitempty"`
}

// Token describes a stored token; the secret itself is never listed.
type Token struct {
	// ID is the token's public identifier (a prefix of its hash), used to
	// revoke it.
	ID   string `json:"id"`
	Kind string `json:"kind"`
	// Subject is the name of an admin or bootstrap token, the instance of
	// an agent or registration token.
	Subject   string    `json:"subject"`
	CreatedAt time.Time `json:"created_at"`
	ExpiresAt time.Time `json:"expires_at,omitzero"`
}

// TokenCreated is the answer of POST /api/v1/tokens: the only time the
// secret is shown.
type TokenCreated struct {
	Token
	Secret string `json:"token"`
}

// TokensQuery selects tokens; zero fields do not filter.
type TokensQuery struct {
	Kind    string
	Subject string
}

// --- agents (docs/agent.md) ---

// GPUStat is one GPU's telemetry as the agent reads it from NVML. Unknown
// fields are ignored when decoding, so a newer agent's telemetry never
// breaks an older broker.
type GPUStat struct {
	Index          int      `json:"index"`
	UUID           string   `json:"uuid,omitempty"`
	Name           string   `json:"name"`
	Model          string   `json:"model,omitempty"`
	MemoryTotalMiB uint64   `json:"memory_total_mib"`
	MemoryUsedMiB  uint64   `json:"memory_used_mib"`
	UtilGPUPct     *uint32  `json:"util_gpu_pct,omitempty"`
	UtilMemPct     *uint32  `json:"util_memory_pct,omitempty"`
	TempC          *uint32  `json:"temperature_c,omitempty"`
	PowerW         *float64 `json:"power_w,omitempty"`
	PowerLimitW    *float64 `json:"power_limit_w,omitempty"`
	SMClockMHz     *uint32  `json:"sm_clock_mhz,omitempty"`
	MemClockMHz    *uint32  `json:"memory_clock_mhz,omitempty"`
	// Uncorrected ECC errors since the driver loaded / over the GPU's life.
	ECCVolatileUncorrected  *uint64 `json:"ecc_volatile_uncorrected,omitempty"`
	ECCAggregateUncorrected *uint64 `json:"ecc_aggregate_uncorrected,omitempty"`
}

// UnmarshalJSON decodes leniently, even inside a strict decoder.
// The index is required: telemetry without it cannot be matched to a GPU.
func (g *GPUStat) UnmarshalJSON(b []byte) error {
	type plain GPUStat
	var probe struct {
		Index *int `json:"index"`
	}
	if err := json.Unmarshal(b, &probe); err != nil {
		return err
	}
	if probe.Index == nil {
		return errors.New("a GPU object lacks its index")
	}
	return json.Unmarshal(b, (*plain)(g))
}

// RegisterRequest is the body of POST /api/v1/agents/register. The
// placement fields come from the cloud's metadata service.
type RegisterRequest struct {
	Hostname string `json:"hostname"`
	Cloud    string `json:"cloud"`
	// InstanceID is the cloud's instance id; the host name stands in when
	// the agent found none.
	InstanceID   string    `json:"instance_id,omitempty"`
	AgentVersion string    `json:"agent_version"`
	GPUs         []GPUStat `json:"gpus,omitempty"`
	Region       string    `json:"region,omitempty"`
	Zone         string    `json:"zone,omitempty"`
	InstanceType string    `json:"instance_type,omitempty"`
	// GPU and GPUCount default to the model and number of GPUs.
	GPU      string `json:"gpu,omitempty"`
	GPUCount int    `json:"gpu_count,omitempty"`
	// Capacity is "on-demand" or "spot".
	Capacity string `json:"capacity,omitempty"`
	Workload string `json:"workload,omitempty"`
	// Identity is the cloud's signed statement of which instance this is,
	// read from the metadata service; the broker verifies it when it is
	// configured to (docs/api.md, "Instance identity").
	Identity *InstanceIdentity `json:"identity,omitempty"`
}

// InstanceIdentity is a signed identity document from the metadata
// service. AWS: Document is /latest/dynamic/instance-identity/document and
// Signature /latest/dynamic/instance-identity/signature (base64 RSA-SHA256).
type InstanceIdentity struct {
	Cloud     string `json:"cloud"`
	Document  string `json:"document"`
	Signature string `json:"signature"`
}

// RegisterResponse is the answer to a registration.
type RegisterResponse struct {
	AgentID string `json:"agent_id"`
	// Token is the agent's own token, shown only here.
	Token                    string   `json:"token"`
	HeartbeatIntervalSeconds int      `json:"heartbeat_interval_seconds"`
	Instance                 Instance `json:"instance"`
}

// Heartbeat is the body of POST /api/v1/agents/{id}/heartbeat.
type Heartbeat struct {
	Time  time.Time `json:"time"`
	Cloud string    `json:"cloud"`
	// GPUs is null when there is no GPU or driver; GPUError says why.
	GPUs       []GPUStat `json:"gpus"`
	GPUError   string    `json:"gpu_error,omitempty"`
	SpoolDepth int       `json:"spool_depth"`
	Draining   bool      `json:"draining"`
	// Load1 is the host's one-minute load average.
	Load1 float64 `json:"load1,omitempty"`
	// Utilization is the mean GPU utilisation (0..1); the broker computes
	// it from the GPUs' util_gpu_pct when absent.
	Utilization *float64 `json:"gpu_utilization,omitempty"`
}

// ProgressReport is the body of POST /api/v1/agents/{id}/progress: how far
// the job on the agent's instance has got (docs/agent.md, "Progress").
type ProgressReport struct {
	// Done is the fraction of the job's whole work done, 0 to 1.
	Done float64 `json:"done"`
	// Step is the job's own step counter; ETASeconds its own estimate of
	// the time to finish. Both optional, for display.
	Step       *int64   `json:"step,omitempty"`
	ETASeconds *float64 `json:"eta_seconds,omitempty"`
	// ReportedAt is when the job measured it. A report with the same or an
	// older time than the stored one changes nothing (retries are safe).
	ReportedAt time.Time `json:"reported_at"`
}

// ProgressResponse answers a progress report.
type ProgressResponse struct {
	// Status is "stored", or "unchanged" when a report as new or newer
	// was already stored.
	Status   string `json:"status"`
	Workload string `json:"workload"`
}

// HeartbeatResponse is the answer to a heartbeat.
type HeartbeatResponse struct {
	// BenchmarkRequested asks the agent to run the GPU benchmark now.
	BenchmarkRequested bool `json:"benchmark_requested"`
	// HeartbeatIntervalSeconds is how often the broker wants heartbeats.
	HeartbeatIntervalSeconds int `json:"heartbeat_interval_seconds,omitempty"`
}

// Notice kinds (see fleet/instance for which are terminal).
const (
	NoticePreempt     = "preempt"
	NoticeTerminate   = "terminate"
	NoticeStop        = "stop"
	NoticeHibernate   = "hibernate"
	NoticeReboot      = "reboot"
	NoticeRedeploy    = "redeploy"
	NoticeRebalance   = "rebalance"
	NoticeMaintenance = "maintenance"
)

// NoticeReport is the body of POST /api/v1/agents/{id}/notices: one
// preemption or maintenance notice from the cloud's metadata service.
type NoticeReport struct {
	Kind string `json:"kind"`
	// ID identifies the cloud's event; it is the default Idempotency-Key.
	ID       string    `json:"id"`
	Cloud    string    `json:"cloud"`
	Deadline time.Time `json:"deadline,omitzero"`
	Observed time.Time `json:"observed"`
	Detail   string    `json:"detail,omitempty"`
	// Raw is the metadata answer the notice came from.
	Raw json.RawMessage `json:"raw,omitempty"`
	// Action is what the agent does about it ("drain", "early_drain",
	// "none", ...).
	Action string `json:"action"`
}

// DrainInfo names the notice a drain answers.
type DrainInfo struct {
	NoticeID string    `json:"notice_id"`
	Kind     string    `json:"kind"`
	Cloud    string    `json:"cloud"`
	Deadline time.Time `json:"deadline,omitzero"`
	Early    bool      `json:"early"`
}

// Drain step statuses.
const (
	StepOK       = "ok"
	StepFailed   = "failed"
	StepTimedOut = "timed_out"
	StepSkipped  = "skipped"
)

// DrainStep reports one drain step.
type DrainStep struct {
	Name       string    `json:"name"`
	Status     string    `json:"status"`
	Error      string    `json:"error,omitempty"`
	Started    time.Time `json:"started,omitzero"`
	DurationNS int64     `json:"duration_ns"`
}

// DrainReport is the body of POST /api/v1/agents/{id}/drains.
type DrainReport struct {
	Info     DrainInfo   `json:"info"`
	Started  time.Time   `json:"started"`
	Finished time.Time   `json:"finished"`
	Deadline time.Time   `json:"deadline,omitzero"`
	Steps    []DrainStep `json:"steps"`
	OK       bool        `json:"ok"`
	// Acked is true when the platform was told the VM is ready (Azure).
	Acked bool `json:"acked"`
	// Error says why the drain could not run as configured (e.g. no drain
	// steps); empty when it ran.
	Error string `json:"error,omitempty"`
}

// BenchmarkGPU is one GPU's benchmark result.
type BenchmarkGPU struct {
	Index            int             `json:"index"`
	Name             string          `json:"name"`
	Model            string          `json:"model,omitempty"`
	DType            string          `json:"dtype"`
	TFLOPS           float64         `json:"tflops"`
	BandwidthGBs     float64         `json:"bandwidth_gbs"`
	MatrixN          int             `json:"matrix_n,omitempty"`
	Iterations       int             `json:"iterations,omitempty"`
	Extra            json.RawMessage `json:"extra,omitempty"`
	SpecTFLOPS       float64         `json:"spec_tflops,omitempty"`
	SpecBandwidthGBs float64         `json:"spec_bandwidth_gbs,omitempty"`
	TFLOPSRatio      float64         `json:"tflops_ratio,omitempty"`
	BandwidthRatio   float64         `json:"bandwidth_ratio,omitempty"`
	BelowSpec        bool            `json:"below_spec"`
}

// BenchmarkReport is the body of POST /api/v1/agents/{id}/benchmarks.
type BenchmarkReport struct {
	Time               time.Time      `json:"time"`
	Method             string         `json:"method"`
	DurationS          float64        `json:"duration_s"`
	BelowSpecThreshold float64        `json:"below_spec_threshold"`
	InstanceType       string         `json:"instance_type,omitempty"`
	GPUs               []BenchmarkGPU `json:"gpus"`
}

// Accepted is the answer to an agent report (202), also for a repeated
// delivery (Duplicate).
type Accepted struct {
	Status    string `json:"status"`
	Duplicate bool   `json:"duplicate"`
	Event     Event  `json:"event"`
}
