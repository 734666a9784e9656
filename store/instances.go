package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"gorm.io/gorm"
	"gorm.io/gorm/clause"
)

// InstanceRecord is a GPU instance known to the broker, with the latest
// figures its agent reported.
type InstanceRecord struct {
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
	// Load1 is the one-minute load average; Utilization the mean GPU
	// utilisation (0..1).
	Load1       float64 `json:"load1"`
	Utilization float64 `json:"gpu_utilization"`
	// Telemetry is the last heartbeat's per-GPU figures as sent (JSON).
	Telemetry  json.RawMessage `json:"telemetry,omitempty"`
	DrainState string          `json:"drain_state,omitempty"`
	// PreemptAt is when a preemption notice says the instance goes away.
	PreemptAt time.Time `json:"preempt_at,omitzero"`
}

// Instance states.
const (
	StateRunning    = "running"
	StatePreempting = "preempting"
	StateDraining   = "draining"
	StateDrained    = "drained"
)

// HeartbeatUpdate is what one agent heartbeat changes on its instance.
type HeartbeatUpdate struct {
	Instance    string
	At          time.Time
	Load1       float64
	Utilization float64
	Telemetry   json.RawMessage
}

type instanceRow struct {
	ID            string `gorm:"primaryKey;size:256"`
	Hostname      string `gorm:"size:256"`
	AgentVersion  string `gorm:"size:64"`
	Cloud         string `gorm:"size:16"`
	Region        string `gorm:"size:64"`
	Zone          string `gorm:"size:64"`
	InstanceType  string `gorm:"size:64"`
	GPU           string `gorm:"size:32"`
	GPUCount      int
	Capacity      string `gorm:"size:16"`
	Workload      string `gorm:"size:128;index"`
	State         string `gorm:"size:16"`
	RegisteredAt  time.Time
	LastHeartbeat *time.Time
	Load1         float64
	Utilization   float64
	Telemetry     string
	DrainState    string `gorm:"size:32"`
	PreemptAt     *time.Time
}

func (instanceRow) TableName() string { return "broker_instances" }

func tval(t *time.Time) time.Time {
	if t == nil {
		return time.Time{}
	}
	return t.UTC()
}

func (r instanceRow) record() InstanceRecord {
	return InstanceRecord{ID: r.ID, Hostname: r.Hostname, AgentVersion: r.AgentVersion, Cloud: r.Cloud, Region: r.Region, Zone: r.Zone, InstanceType: r.InstanceType,
		GPU: r.GPU, GPUCount: r.GPUCount, Capacity: r.Capacity, Workload: r.Workload, State: r.State,
		RegisteredAt: r.RegisteredAt.UTC(), LastHeartbeat: tval(r.LastHeartbeat), Load1: r.Load1,
		Utilization: r.Utilization, Telemetry: rawOrNil(r.Telemetry), DrainState: r.DrainState,
		PreemptAt: tval(r.PreemptAt)}
}

// RegisterAgent upserts the instance and replaces any previous token of
// that instance with tokenHash, in one transaction: after a re-register the
// old token no longer works.
func (b *Broker) RegisterAgent(ctx context.Context, inst InstanceRecord, tokenHash string, now time.Time) (InstanceRecord, error) {
	row := instanceRow{ID: inst.ID, Hostname: inst.Hostname, AgentVersion: inst.AgentVersion, Cloud: inst.Cloud, Region: inst.Region, Zone: inst.Zone,
		InstanceType: inst.InstanceType, GPU: inst.GPU, GPUCount: inst.GPUCount, Capacity: inst.Capacity,
		Workload: inst.Workload, State: StateRunning, RegisteredAt: now}
	err := b.db.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		err := tx.Clauses(clause.OnConflict{
			Columns: []clause.Column{{Name: "id"}},
			DoUpdates: clause.AssignmentColumns([]string{"hostname", "agent_version", "cloud", "region", "zone", "instance_type", "gpu",
				"gpu_count", "capacity", "workload", "state", "registered_at"}),
		}).Create(&row).Error
		if err != nil {
			return err
		}
		if err := tx.Where("kind = ? AND subject = ?", TokenAgent, inst.ID).Delete(&tokenRow{}).Error; err != nil {
			return err
		}
		if err := tx.Create(&tokenRow{Hash: tokenHash, Kind: TokenAgent, Subject: inst.ID, CreatedAt: now}).Error; err != nil {
			return err
		}
		return tx.Create(&eventRow{At: now, Kind: "registered", Instance: inst.ID, Workload: inst.Workload,
			Message: "agent registered"}).Error
	})
	if err != nil {
		return InstanceRecord{}, fmt.Errorf("registering agent for %q: %w", inst.ID, err)
	}
	return row.record(), nil
}

// Heartbeats applies heartbeats in one transaction (group commit). It
// returns, per update, ErrNotFound for an unknown instance or nil.
//
// It is the hottest write path (every agent, every 10 s). On SQLite the
// whole batch is one UPDATE ... FROM (VALUES ...) statement: one parse per
// batch instead of one per heartbeat (parsing dominates there). Later
// heartbeats of an instance in the same batch win.
func (b *Broker) Heartbeats(ctx context.Context, ups []HeartbeatUpdate) ([]error, error) {
	errs := make([]error, len(ups))
	last := make(map[string]int, len(ups))
	for i, u := range ups {
		last[u.Instance] = i
	}
	pg := b.db.Name() == "postgres"
	var q strings.Builder
	args := make([]any, 0, 5*len(last))
	q.WriteString("UPDATE broker_instances SET last_heartbeat = v.column2, load1 = v.column3, utilization = v.column4, telemetry = v.column5 FROM (VALUES ")
	n := 0
	for i, u := range ups {
		if last[u.Instance] != i {
			continue
		}
		if !pg {
			if n > 0 {
				q.WriteString(", ")
			}
			q.WriteString("(?, ?, ?, ?, ?)")
			args = append(args, u.Instance, u.At, u.Load1, u.Utilization, string(u.Telemetry))
		}
		n++
	}
	q.WriteString(") AS v WHERE broker_instances.id = v.column1")
	err := b.db.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		var affected int64
		if pg {
			// On PostgreSQL one UPDATE by primary key per heartbeat: pgx
			// caches the prepared statement, each row is an index lookup,
			// and the plan cannot go wrong on a freshly filled table (a
			// joined VALUES list can, before ANALYZE has run).
			for i, u := range ups {
				if last[u.Instance] != i {
					continue
				}
				res := tx.Exec("UPDATE broker_instances SET last_heartbeat = ?, load1 = ?, utilization = ?, telemetry = ? WHERE id = ?",
					u.At, u.Load1, u.Utilization, string(u.Telemetry), u.Instance)
				if res.Error != nil {
					return res.Error
				}
				affected += res.RowsAffected
			}
		} else {
			res := tx.Exec(q.String(), args...)
			if res.Error != nil {
				return res.Error
			}
			affected = res.RowsAffected
		}
		if affected == int64(n) {
			return nil
		}
		// Some instance is unknown (rare): find which.
		ids := make([]string, 0, len(last))
		for id := range last {
			ids = append(ids, id)
		}
		var found []string
		if err := tx.Model(&instanceRow{}).Where("id IN ?", ids).Pluck("id", &found).Error; err != nil {
			return err
		}
		known := make(map[string]bool, len(found))
		for _, id := range found {
			known[id] = true
		}
		for i, u := range ups {
			if !known[u.Instance] {
				errs[i] = fmt.Errorf("instance %q: %w", u.Instance, ErrNotFound)
			}
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("recording heartbeats: %w", err)
	}
	return errs, nil
}

// GetInstance returns one instance or ErrNotFound.
func (b *Broker) GetInstance(ctx context.Context, id string) (InstanceRecord, error) {
	var row instanceRow
	err := b.db.WithContext(ctx).First(&row, "id = ?", id).Error
	if errors.Is(err, gorm.ErrRecordNotFound) {
		return InstanceRecord{}, fmt.Errorf("instance %q: %w", id, ErrNotFound)
	}
	if err != nil {
		return InstanceRecord{}, fmt.Errorf("reading instance %q: %w", id, err)
	}
	return row.record(), nil
}

// ListInstances returns instances by id, optionally only those of one
// workload or state.
func (b *Broker) ListInstances(ctx context.Context, workload, state string) ([]InstanceRecord, error) {
	q := b.db.WithContext(ctx).Order("id")
	if workload != "" {
		q = q.Where("workload = ?", workload)
	}
	if state != "" {
		q = q.Where("state = ?", state)
	}
	var rows []instanceRow
	if err := q.Find(&rows).Error; err != nil {
		return nil, fmt.Errorf("listing instances: %w", err)
	}
	out := make([]InstanceRecord, len(rows))
	for i, r := range rows {
		out[i] = r.record()
	}
	return out, nil
}

// CountInstances counts instances, and those with a heartbeat since
// activeSince.
func (b *Broker) CountInstances(ctx context.Context, activeSince time.Time) (total, active int64, err error) {
	if err = b.db.WithContext(ctx).Model(&instanceRow{}).Count(&total).Error; err != nil {
		return 0, 0, fmt.Errorf("counting instances: %w", err)
	}
	if err = b.db.WithContext(ctx).Model(&instanceRow{}).Where("last_heartbeat >= ?", activeSince).Count(&active).Error; err != nil {
		return 0, 0, fmt.Errorf("counting active instances: %w", err)
	}
	return total, active, nil
}

// Report is one agent report: an event, the instance fields it changes,
// and any benchmark results it carries.
type Report struct {
	Event EventRecord
	// Set holds instance columns to update: "state", "preempt_at",
	// "drain_state" (use the Report* helpers' values).
	State      string
	DrainState string
	PreemptAt  time.Time
	Benchmarks []BenchmarkRecord
}

// RecordReport applies r atomically: update the instance, add the event
// and the benchmarks. A report whose idempotency key this instance already
// used is not applied again; RecordReport then returns the first event and
// duplicate=true. ErrNotFound when the instance is unknown.
func (b *Broker) RecordReport(ctx context.Context, r Report) (ev EventRecord, duplicate bool, err error) {
	ev = r.Event
	findDup := func(tx *gorm.DB) (bool, error) {
		if ev.IdempotencyKey == "" {
			return false, nil
		}
		var row eventRow
		if err := tx.Limit(1).Find(&row, "instance = ? AND idem_key = ?", ev.Instance, ev.IdempotencyKey).Error; err != nil {
			return false, err
		}
		if row.ID == 0 {
			return false, nil
		}
		ev = row.record()
		return true, nil
	}
	err = b.db.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		var inst instanceRow
		if err := tx.Limit(1).Find(&inst, "id = ?", ev.Instance).Error; err != nil {
			return err
		}
		if inst.ID == "" {
			return fmt.Errorf("instance %q: %w", ev.Instance, ErrNotFound)
		}
		if duplicate, err = findDup(tx); err != nil || duplicate {
			return err
		}
		set := map[string]any{}
		if r.State != "" {
			set["state"] = r.State
		}
		if r.DrainState != "" {
			set["drain_state"] = r.DrainState
		}
		if !r.PreemptAt.IsZero() {
			set["preempt_at"] = r.PreemptAt
		}
		if len(set) > 0 {
			if err := tx.Model(&instanceRow{}).Where("id = ?", ev.Instance).Updates(set).Error; err != nil {
				return err
			}
		}
		if ev.Workload == "" {
			ev.Workload = inst.Workload
		}
		var err error
		if ev, err = addEvent(tx, ev); err != nil {
			return err
		}
		for _, bm := range r.Benchmarks {
			row := benchmarkRow{Instance: ev.Instance, InstanceType: bm.InstanceType, GPU: bm.GPU, TFLOPS: bm.TFLOPS,
				MemBandwidthGB: bm.MemBandwidthGB, At: bm.At}
			if row.InstanceType == "" {
				row.InstanceType = inst.InstanceType
			}
			if err := tx.Create(&row).Error; err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil && isUniqueViolation(err) {
		// The same report raced in twice; the other delivery committed.
		if dup, derr := findDup(b.db.WithContext(ctx)); derr == nil && dup {
			return ev, true, nil
		}
	}
	if err != nil {
		return EventRecord{}, false, fmt.Errorf("recording %s for %q: %w", ev.Kind, ev.Instance, err)
	}
	return ev, duplicate, nil
}
