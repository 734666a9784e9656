// Package notice defines what every preemption and maintenance watcher
// reports: a Notice, the Watcher interface each cloud implements, and the
// small helpers (backoff, de-duplication) that let a watcher survive metadata
// outages without ever reporting the same notice twice.
package notice

import (
	"context"
	"encoding/json"
	"time"

	"github.com/gpubroker/gpubroker/fleet/instance"
)

// Kind says what the platform is about to do to the VM.
type Kind string

// Notice kinds. Terminal kinds end the VM (or its workload); the others are
// warnings that may trigger an early, gentler drain.
const (
	KindPreempt     Kind = "preempt"     // spot/preemptible capacity is reclaimed
	KindTerminate   Kind = "terminate"   // the VM is deleted (Azure Terminate)
	KindStop        Kind = "stop"        // AWS spot "stop"
	KindHibernate   Kind = "hibernate"   // AWS spot "hibernate"
	KindReboot      Kind = "reboot"      // Azure Reboot: the VM restarts, the workload's processes die
	KindRedeploy    Kind = "redeploy"    // Azure Redeploy: moved to another host, local disks lost
	KindRebalance   Kind = "rebalance"   // AWS rebalance recommendation: risk is elevated
	KindMaintenance Kind = "maintenance" // maintenance the workload survives (live migration, freeze)
)

// Terminal reports whether the notice means the workload will be gone at the
// deadline, so the full drain must run. The rule is the domain's
// (fleet/instance), shared with the broker.
func (k Kind) Terminal() bool { return instance.NoticeKind(k).Terminal() }

// Cloud names, as used on the wire and in flags.
const (
	AWS   = "aws"
	GCP   = "gcp"
	Azure = "azure"
)

// Notice is one event from a cloud's metadata service. Watchers never emit two
// notices with the same ID.
type Notice struct {
	Kind Kind `json:"kind"`
	// ID identifies the event for de-duplication: the same event seen again
	// (a re-poll, a reconnect after an outage) has the same ID.
	ID    string `json:"id"`
	Cloud string `json:"cloud"`
	// Deadline is when the platform acts; zero when the cloud gives none
	// (AWS rebalance recommendations).
	Deadline time.Time `json:"deadline,omitzero"`
	// Observed is when the watcher first saw the notice.
	Observed time.Time `json:"observed"`
	// Detail is a short cloud-specific description ("terminate", "system-reboot").
	Detail string `json:"detail,omitempty"`
	// Raw is the metadata response the notice came from.
	Raw json.RawMessage `json:"raw,omitempty"`
}

// Watcher watches one notice source.
//
// Watch returns at once; the channel delivers notices until ctx is done and is
// then closed. A watcher never gives up on errors: it logs, backs off and
// retries. An error is returned only when the watcher cannot start at all
// (bad configuration).
type Watcher interface {
	Watch(ctx context.Context) (<-chan Notice, error)
}

// Acker is implemented by watchers whose platform waits for an
// acknowledgement (Azure Scheduled Events) before acting early.
type Acker interface {
	Ack(ctx context.Context, n Notice) error
}

// RawJSON returns b as a JSON value for Notice.Raw: b itself when it is valid
// JSON, else b quoted as a JSON string (GCP answers plain text).
func RawJSON(b []byte) json.RawMessage {
	if json.Valid(b) {
		return json.RawMessage(append([]byte(nil), b...))
	}
	q, _ := json.Marshal(string(b))
	return q
}
