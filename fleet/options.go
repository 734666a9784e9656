package fleet

import (
	"bytes"
	"context"
	"fmt"
	"text/template"
	"time"

	"github.com/gpubroker/gpubroker/optimizer"
	"github.com/gpubroker/gpubroker/pricing"
	"github.com/gpubroker/gpubroker/store"
)

// Mode says whether the reconciler acts.
type Mode string

const (
	// DryRun (the default) records and reports the actions the reconciler
	// would take and calls no cloud API that costs money: nothing is
	// launched or terminated.
	DryRun Mode = "dry-run"
	// Apply launches and terminates instances.
	Apply Mode = "apply"
)

// Tags the fleet puts on every instance it launches. Only instances with
// TagFleet set to the fleet's name are ever listed, adopted or terminated.
const (
	TagFleet    = "gpubroker-fleet"
	TagSlot     = "gpubroker-slot"
	TagToken    = "gpubroker-token"
	TagWorkload = "gpubroker-workload"
)

// Options are the reconciler's settings; zero values take the defaults
// documented on each field (and in docs/fleet.md).
type Options struct {
	// Name is the fleet's name, the value of TagFleet; default "gpubroker".
	Name string
	// Mode is DryRun unless set to Apply.
	Mode Mode
	// MaxInstances caps live instances of the whole fleet (default 100);
	// MaxPerCloud caps them per cloud (0: only the global cap).
	MaxInstances int
	MaxPerCloud  map[pricing.Cloud]int
	// LaunchesPerMinute caps launch calls per minute, over the fleet
	// (default 20) and per cloud (0: only the global cap).
	LaunchesPerMinute         int
	LaunchesPerMinutePerCloud int
	// OrphanGrace is how long a broker-tagged instance that no slot owns
	// is reported before it is terminated (default 10m).
	OrphanGrace time.Duration
	// BootTimeout replaces an instance whose agent has not registered this
	// long after launch (default 15m).
	BootTimeout time.Duration
	// HeartbeatTimeout replaces a running instance whose agent has been
	// silent this long (default 2m).
	HeartbeatTimeout time.Duration
	// DrainGrace is how long a preempted instance is left to its agent's
	// drain before the fleet terminates it itself (default 2m, EC2's
	// notice).
	DrainGrace time.Duration
	// ListGrace is how long a launched instance may be missing from the
	// cloud's listing before it counts as lost (eventual consistency;
	// default 2m).
	ListGrace time.Duration
	// UnavailableBackoff is the first block of a pool after a capacity
	// error or a preemption (default 3m; see Unavailable).
	UnavailableBackoff time.Duration
	// LaunchTimeout bounds one launch call (default 2m).
	LaunchTimeout time.Duration
	// MaxAttempts is how many launches one slot may try in a pass after
	// capacity errors, each in the next best pools (default 3).
	MaxAttempts int
	// RequireAgent (default true) waits for the agent's registration before
	// a slot counts as running; false takes the cloud's running state.
	RequireAgent *bool
	// BrokerURL is the broker's address the agents report to; it goes into
	// the user data.
	BrokerURL string
	// UserData is the boot script template per cloud (see UserDataInput);
	// clouds without one get DefaultUserData.
	UserData map[pricing.Cloud]*template.Template
	// Commands is each workload's own command, started by the user data
	// after the agent.
	Commands map[string]string
}

func (o *Options) defaults() {
	if o.Name == "" {
		o.Name = "gpubroker"
	}
	if o.Mode != Apply {
		o.Mode = DryRun
	}
	if o.MaxInstances <= 0 {
		o.MaxInstances = 100
	}
	if o.LaunchesPerMinute <= 0 {
		o.LaunchesPerMinute = 20
	}
	if o.OrphanGrace <= 0 {
		o.OrphanGrace = 10 * time.Minute
	}
	if o.BootTimeout <= 0 {
		o.BootTimeout = 15 * time.Minute
	}
	if o.HeartbeatTimeout <= 0 {
		o.HeartbeatTimeout = 2 * time.Minute
	}
	if o.DrainGrace <= 0 {
		o.DrainGrace = 2 * time.Minute
	}
	if o.ListGrace <= 0 {
		o.ListGrace = 2 * time.Minute
	}
	if o.LaunchTimeout <= 0 {
		o.LaunchTimeout = 2 * time.Minute
	}
	if o.MaxAttempts <= 0 {
		o.MaxAttempts = 3
	}
	if o.RequireAgent == nil {
		t := true
		o.RequireAgent = &t
	}
}

// UserDataInput is what a user data template sees.
type UserDataInput struct {
	// BrokerURL is where the agent reports; Token is the one-time
	// registration token minted for this launch.
	BrokerURL string
	Token     string
	Fleet     string
	Slot      string
	Workload  string
	Cloud     string
	Region    string
	Zone      string
	// InstanceType and Capacity are those of the first candidate.
	InstanceType string
	Capacity     string
	// Command is the workload's own command ("" when none is configured).
	Command string
}

// DefaultUserData installs nothing (the image is expected to carry the
// gpubroker binary), writes the registration token, starts the agent and
// then the workload's command.
var DefaultUserData = template.Must(template.New("user-data").Parse(`#!/bin/sh
set -eu
install -d -m 0700 /etc/gpubroker
umask 077
printf '%s' '{{.Token}}' > /etc/gpubroker/agent-token
cat > /etc/gpubroker/agent.yaml <<'GPUBROKER_EOF'
broker: {{.BrokerURL}}
token_file: /etc/gpubroker/agent-token
GPUBROKER_EOF
nohup gpubroker agent --config /etc/gpubroker/agent.yaml >/var/log/gpubroker-agent.log 2>&1 &
{{if .Command}}exec {{.Command}}
{{end}}`))

// RenderUserData executes t with in; errors name the template.
func RenderUserData(t *template.Template, in UserDataInput) (string, error) {
	var b bytes.Buffer
	if err := t.Execute(&b, in); err != nil {
		return "", fmt.Errorf("rendering user data template %s: %w", t.Name(), err)
	}
	return b.String(), nil
}

// TokenMinter mints the one-time registration token that goes into a
// launch's user data. It must return the same token for the same launch
// (client token) until that token is used, so a retried launch sends
// byte-identical user data (EC2 rejects a reused ClientToken with other
// parameters).
type TokenMinter interface {
	Mint(ctx context.Context, launch MintRequest) (string, error)
}

// MintRequest says what a registration token is for.
type MintRequest struct {
	// ClientToken identifies the launch.
	ClientToken string
	Slot        string
	Workload    string
	Expires     time.Time
}

// PlanSource gives the current plan with the pools u blocks ruled out
// (optimizer.Input.Unavailable = u.Func(now)). It may cache the plan while
// u.Version() and its inputs stay the same.
type PlanSource interface {
	Plan(ctx context.Context, u *Unavailable) (*optimizer.Plan, error)
}

// Store is the fleet's persistence; *store.Fleet implements it.
type Store interface {
	Load(ctx context.Context) (store.FleetState, error)
	// Apply must not keep c's slices: the pass reuses them for its next
	// write.
	Apply(ctx context.Context, f store.Fence, c store.FleetChanges) error
	Paused(ctx context.Context) (store.FleetPause, error)
	// LastGeneration is the highest generation of any launch intent ever
	// recorded for the slot id (0 if none), so a slot whose row was
	// deleted and is created again goes on counting instead of resending
	// its first launch's client token.
	LastGeneration(ctx context.Context, slot string) (int, error)
	// ReplaceRequests are the instances users (or the slow-host check)
	// asked to replace; the pass that replaces one lists it in
	// FleetChanges.DoneReplacements.
	ReplaceRequests(ctx context.Context) ([]store.ReplaceRequest, error)
}

// Agents lists what the agents reported; *store.Broker implements it.
type Agents interface {
	ListInstances(ctx context.Context, workload, state string) ([]store.InstanceRecord, error)
}
