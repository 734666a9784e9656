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
	ID           string
	Hostname     string
	AgentVersion string
	Cloud        string
	Region       string
	Zone         string
	InstanceType string
	GPU          string
	GPUCount     int
	Capacity     string
	Workload     string
	State        string
	RegisteredAt time.Time
	// LastHeartbeat is zero until the first heartbeat.
	LastHeartbeat time.Time
	// Load1 is the one-minute load average; Utilization the mean GPU
	// utilisation (0..1).
	Load1       float64
	Utilization float64
	// Telemetry is the last heartbeat's per-GPU figures as sent (JSON).
	Telemetry  json.RawMessage
	DrainState string
	// PreemptAt is when a preemption notice says the instance goes away.
	PreemptAt time.Time
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
// old token no longer works. It is the admin's registration; agents
// register through RegisterAgentAs.
func (b *Broker) RegisterAgent(ctx context.Context, inst InstanceRecord, tokenHash string, now time.Time) (InstanceRecord, error) {
	return b.RegisterAgentAs(ctx, inst, tokenHash, now, TokenRecord{Kind: TokenAdmin})
}

// RegisterAgentAs registers inst for the caller authenticated by token by:
//   - admin: any instance, new or existing (re-registration);
//   - registration: only the instance the token is bound to, once: the
//     token is deleted in the same transaction, so it can never be used
//     again (ErrTokenSpent when it was used or has expired, ErrTakeover
//     when it is bound to another instance);
//   - bootstrap: only an instance that is not registered yet
//     (ErrTakeover otherwise), so a fleet-wide token cannot become another
//     instance and report for it.
func (b *Broker) RegisterAgentAs(ctx context.Context, inst InstanceRecord, tokenHash string, now time.Time, by TokenRecord) (InstanceRecord, error) {
	if err := checkText("instance", inst.ID, inst.Hostname, inst.AgentVersion, inst.Cloud, inst.Region, inst.Zone,
		inst.InstanceType, inst.GPU, inst.Capacity, inst.Workload, tokenHash); err != nil {
		return InstanceRecord{}, err
	}
	row := instanceRow{ID: inst.ID, Hostname: inst.Hostname, AgentVersion: inst.AgentVersion, Cloud: inst.Cloud, Region: inst.Region, Zone: inst.Zone,
		InstanceType: inst.InstanceType, GPU: inst.GPU, GPUCount: inst.GPUCount, Capacity: inst.Capacity,
		Workload: inst.Workload, State: StateRunning, RegisteredAt: now}
	// An unbound registration token (minted before the cloud assigned the
	// id, as on AWS) registers one new instance, once: a bootstrap token
	// that works a single time.
	newOnly := by.Kind == TokenBootstrap || (by.Kind == TokenRegistration && by.Subject == "")
	err := b.db.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		if by.Kind == TokenRegistration {
			if by.Subject != "" && by.Subject != inst.ID {
				return fmt.Errorf("%w: this registration token is bound to instance %q", ErrTakeover, by.Subject)
			}
			res := tx.Where("hash = ? AND kind = ? AND subject = ? AND (expires_at IS NULL OR expires_at > ?)",
				by.Hash, TokenRegistration, by.Subject, now.UTC()).Delete(&tokenRow{})
			if res.Error != nil {
				return res.Error
			}
			if res.RowsAffected != 1 {
				return ErrTokenSpent
			}
		}
		switch {
		case by.Kind == TokenAdmin || by.Kind == RegisterVerified:
		case by.Kind == TokenRegistration && !newOnly:
		case newOnly:
			// A plain insert: the instance must be new. The unique key
			// also settles two bootstrap registrations racing for one id.
			var n int64
			if err := tx.Model(&instanceRow{}).Where("id = ?", inst.ID).Count(&n).Error; err != nil {
				return err
			}
			if n > 0 {
				return fmt.Errorf("%w: instance %q is already registered; a %s token only registers new instances", ErrTakeover, inst.ID, by.Kind)
			}
			if err := tx.Create(&row).Error; err != nil {
				if isUniqueViolation(err) {
					return fmt.Errorf("%w: instance %q is already registered", ErrTakeover, inst.ID)
				}
				return err
			}
		default:
			return fmt.Errorf("%w: a %q token cannot register", ErrTakeover, by.Kind)
		}
		if !newOnly {
			err := tx.Clauses(clause.OnConflict{
				Columns: []clause.Column{{Name: "id"}},
				DoUpdates: clause.AssignmentColumns([]string{"hostname", "agent_version", "cloud", "region", "zone", "instance_type", "gpu",
					"gpu_count", "capacity", "workload", "state", "registered_at"}),
			}).Create(&row).Error
			if err != nil {
				return err
			}
		}
		if err := revokeWhere(tx, now, "kind = ? AND subject = ?", TokenAgent, inst.ID); err != nil {
			return err
		}
		if err := tx.Create(&tokenRow{Hash: tokenHash, Kind: TokenAgent, Subject: inst.ID, CreatedAt: now}).Error; err != nil {
			return err
		}
		return tx.Create(&eventRow{At: now, Kind: "registered", Instance: inst.ID, Workload: inst.Workload,
			Message: "agent registered (" + by.Kind + " token)"}).Error
	})
	if err != nil {
		return InstanceRecord{}, fmt.Errorf("registering agent for %q: %w", inst.ID, err)
	}
	return row.record(), nil
}

// Heartbeats applies heartbeats in one transaction (group commit). It
// returns, per update, nil, ErrNotFound for an unknown instance, or
// ErrInvalidText for a heartbeat that holds text no database can store.
// One bad heartbeat never fails the others: invalid text is refused before
// the shared statement, and should the shared transaction still fail for a
// reason other than the database being unreachable, each heartbeat is
// applied again on its own so that only the one at fault gets an error.
//
// It is the hottest write path (every agent, every 10 s). On SQLite the
// whole batch is one UPDATE ... FROM (VALUES ...) statement: one parse per
// batch instead of one per heartbeat (parsing dominates there). Later
// heartbeats of an instance in the same batch win.
func (b *Broker) Heartbeats(ctx context.Context, ups []HeartbeatUpdate) ([]error, error) {
	errs := make([]error, len(ups))
	last := make(map[string]int, len(ups))
	for i, u := range ups {
		if err := checkText("heartbeat", u.Instance, string(u.Telemetry)); err != nil {
			errs[i] = fmt.Errorf("instance %q: %w", u.Instance, err)
			continue
		}
		last[u.Instance] = i
	}
	if len(last) == 0 {
		return errs, nil
	}
	err := b.heartbeatBatch(ctx, ups, last, errs)
	if err == nil {
		return errs, nil
	}
	if ctx.Err() != nil || IsUnavailable(err) {
		return nil, fmt.Errorf("recording heartbeats: %w", err)
	}
	b.heartbeatsOneByOne(ctx, ups, last, errs)
	return errs, nil
}

// heartbeatBatch writes the heartbeats ups[i] with last[ups[i].Instance]
// == i in one transaction and sets errs for unknown instances.
func (b *Broker) heartbeatBatch(ctx context.Context, ups []HeartbeatUpdate, last map[string]int, errs []error) error {
	pg := b.db.Name() == "postgres"
	var q strings.Builder
	args := make([]any, 0, 5*len(last))
	q.WriteString("UPDATE broker_instances SET last_heartbeat = v.column2, load1 = v.column3, utilization = v.column4, telemetry = v.column5 FROM (VALUES ")
	n := 0
	for i, u := range ups {
		if j, ok := last[u.Instance]; !ok || j != i {
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
	var unknown []int
	err := b.db.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		unknown = unknown[:0]
		var affected int64
		if pg {
			// On PostgreSQL one UPDATE by primary key per heartbeat: pgx
			// caches the prepared statement, each row is an index lookup,
			// and the plan cannot go wrong on a freshly filled table (a
			// joined VALUES list can, before ANALYZE has run).
			for i, u := range ups {
				if j, ok := last[u.Instance]; !ok || j != i {
					continue
				}
				res := tx.Exec(heartbeatSQL, u.At, u.Load1, u.Utilization, string(u.Telemetry), u.Instance)
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
			if _, ok := last[u.Instance]; ok && !known[u.Instance] {
				unknown = append(unknown, i)
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	for _, i := range unknown {
		errs[i] = fmt.Errorf("instance %q: %w", ups[i].Instance, ErrNotFound)
	}
	return nil
}

const heartbeatSQL = "UPDATE broker_instances SET last_heartbeat = ?, load1 = ?, utilization = ?, telemetry = ? WHERE id = ?"

// heartbeatsOneByOne applies each heartbeat in its own statement after the
// shared transaction failed, so that the failure lands on the heartbeat
// that caused it.
func (b *Broker) heartbeatsOneByOne(ctx context.Context, ups []HeartbeatUpdate, last map[string]int, errs []error) {
	for i, u := range ups {
		j, ok := last[u.Instance]
		if !ok {
			continue // already refused
		}
		if j != i {
			continue // superseded by a later heartbeat of the same instance
		}
		res := b.db.WithContext(ctx).Exec(heartbeatSQL, u.At, u.Load1, u.Utilization, string(u.Telemetry), u.Instance)
		switch {
		case res.Error != nil:
			errs[i] = fmt.Errorf("recording the heartbeat of %q: %w", u.Instance, res.Error)
		case res.RowsAffected == 0:
			errs[i] = fmt.Errorf("instance %q: %w", u.Instance, ErrNotFound)
		}
	}
	// Superseded heartbeats share the fate of the one that replaced them.
	for i, u := range ups {
		if j, ok := last[u.Instance]; ok && j != i {
			errs[i] = errs[j]
		}
	}
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
	// Next, when set, decides the new state from the instance's current
	// one inside the transaction (the domain's transition rules,
	// fleet/instance); it overrides State.
	Next func(current string) string
}

// RecordReport applies r atomically: update the instance, add the event
// and the benchmarks. A report whose idempotency key this instance already
// used, with the same kind and data, is not applied again; RecordReport
// then returns the first event and duplicate=true. The same key with other
// kind or data is ErrKeyReused: the client reused a key for a different
// report, and recording neither silently is the only safe answer.
// ErrNotFound when the instance is unknown; ErrInvalidText when a value
// cannot be stored.
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
		if row.Kind != r.Event.Kind || row.Data != string(r.Event.Data) {
			return false, fmt.Errorf("idempotency key %q of %q: %w", ev.IdempotencyKey, ev.Instance, ErrKeyReused)
		}
		ev = row.record()
		return true, nil
	}
	if err := checkText("report", ev.Instance, ev.Kind, ev.Workload, ev.Message, string(ev.Data), ev.IdempotencyKey,
		r.State, r.DrainState); err != nil {
		return EventRecord{}, false, err
	}
	for _, bm := range r.Benchmarks {
		if err := checkText("benchmark", bm.InstanceType, bm.GPU); err != nil {
			return EventRecord{}, false, err
		}
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
		state := r.State
		if r.Next != nil {
			if state = r.Next(inst.State); state == inst.State {
				state = "" // the rules keep the state (e.g. drained is final)
			}
		}
		if state != "" {
			set["state"] = state
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
		dup, derr := findDup(b.db.WithContext(ctx))
		if derr == nil && dup {
			return ev, true, nil
		}
		if errors.Is(derr, ErrKeyReused) {
			return EventRecord{}, false, derr
		}
	}
	if err != nil {
		return EventRecord{}, false, fmt.Errorf("recording %s for %q: %w", ev.Kind, ev.Instance, err)
	}
	return ev, duplicate, nil
}
