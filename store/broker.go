package store

// This file holds the broker daemon's tables: workloads, instances, events,
// agents, API tokens (hashed), benchmarks, the leader lease and job runs.
// Callers see the plain *Record structs; the gorm row types stay private.

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

// Sentinel errors the API layer maps to status codes.
var (
	// ErrNotFound means the record does not exist.
	ErrNotFound = errors.New("not found")
	// ErrConflict means the record already exists (create) or changed.
	ErrConflict = errors.New("already exists")
)

// WorkloadRecord is a workload registered through the API. Spec is the
// workload's definition as JSON, opaque to the store.
type WorkloadRecord struct {
	Name      string          `json:"name"`
	Team      string          `json:"team,omitempty"`
	Kind      string          `json:"kind"`
	Spec      json.RawMessage `json:"spec,omitempty"`
	CreatedAt time.Time       `json:"created_at"`
	UpdatedAt time.Time       `json:"updated_at"`
}

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

// EventRecord is one thing that happened (launched, preemption notice,
// drained, ...).
type EventRecord struct {
	ID       int64           `json:"id"`
	At       time.Time       `json:"at"`
	Kind     string          `json:"kind"`
	Instance string          `json:"instance,omitempty"`
	Workload string          `json:"workload,omitempty"`
	Message  string          `json:"message,omitempty"`
	Data     json.RawMessage `json:"data,omitempty"`
	// IdempotencyKey makes a report recorded once however often it is
	// delivered; unique per instance.
	IdempotencyKey string `json:"idempotency_key,omitempty"`
}

// EventFilter selects events; zero fields do not filter.
type EventFilter struct {
	Kind     string
	Instance string
	Workload string
	Since    time.Time
	// AfterID returns events with a larger ID (for paging).
	AfterID int64
	// Limit caps the result (default 100, at most 1000).
	Limit int
}

// BenchmarkRecord is one measured benchmark of an instance's GPU.
type BenchmarkRecord struct {
	ID             int64     `json:"id"`
	Instance       string    `json:"instance"`
	InstanceType   string    `json:"instance_type,omitempty"`
	GPU            string    `json:"gpu"`
	TFLOPS         float64   `json:"tflops"`
	MemBandwidthGB float64   `json:"mem_bandwidth_gbps"`
	At             time.Time `json:"at"`
}

// TokenRecord is an API token as stored: only its SHA-256 hash.
type TokenRecord struct {
	// Hash is the hex SHA-256 of the token.
	Hash string
	// Kind is "admin", "agent" or "bootstrap".
	Kind string
	// Subject is the instance an agent token reports for; the name of an
	// admin token.
	Subject   string
	CreatedAt time.Time
}

// Token kinds.
const (
	TokenAdmin = "admin"
	TokenAgent = "agent"
	// TokenBootstrap may only register agents (it goes into cloud-init).
	TokenBootstrap = "bootstrap"
)

// HeartbeatUpdate is what one agent heartbeat changes on its instance.
type HeartbeatUpdate struct {
	Instance    string
	At          time.Time
	Load1       float64
	Utilization float64
	Telemetry   json.RawMessage
}

type workloadRow struct {
	Name      string `gorm:"primaryKey;size:128"`
	Team      string `gorm:"size:128"`
	Kind      string `gorm:"size:32"`
	Spec      string
	CreatedAt time.Time
	UpdatedAt time.Time
}

func (workloadRow) TableName() string { return "broker_workloads" }

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

type eventRow struct {
	ID       int64     `gorm:"primaryKey;autoIncrement"`
	At       time.Time `gorm:"index"`
	Kind     string    `gorm:"size:32;index"`
	Instance string    `gorm:"size:256;index;uniqueIndex:idx_event_idem"`
	Workload string    `gorm:"size:128"`
	Message  string
	Data     string
	// IdemKey is NULL for events without a key, so the unique index only
	// binds keyed reports.
	IdemKey *string `gorm:"size:256;uniqueIndex:idx_event_idem"`
}

func (eventRow) TableName() string { return "broker_events" }

type benchmarkRow struct {
	ID             int64  `gorm:"primaryKey;autoIncrement"`
	Instance       string `gorm:"size:256;index"`
	InstanceType   string `gorm:"size:64"`
	GPU            string `gorm:"size:32"`
	TFLOPS         float64
	MemBandwidthGB float64
	At             time.Time
}

func (benchmarkRow) TableName() string { return "broker_benchmarks" }

type tokenRow struct {
	Hash      string `gorm:"primaryKey;size:64"`
	Kind      string `gorm:"size:16"`
	Subject   string `gorm:"size:256;index"`
	CreatedAt time.Time
}

func (tokenRow) TableName() string { return "broker_tokens" }

type leaseRow struct {
	Name    string `gorm:"primaryKey;size:64"`
	Holder  string `gorm:"size:128"`
	Epoch   int64
	Expires time.Time
}

func (leaseRow) TableName() string { return "broker_leases" }

// jobRunRow records one background job run. The unique (job, slot) index is
// what guarantees a scheduled run happens once even if two replicas both
// believe they lead for a moment.
type jobRunRow struct {
	ID         int64     `gorm:"primaryKey;autoIncrement"`
	Job        string    `gorm:"size:64;uniqueIndex:idx_job_slot"`
	Slot       time.Time `gorm:"uniqueIndex:idx_job_slot"`
	Holder     string    `gorm:"size:128"`
	Epoch      int64
	StartedAt  time.Time
	FinishedAt *time.Time
	Error      string
}

func (jobRunRow) TableName() string { return "broker_job_runs" }

// Broker is the daemon's persistence. Every method commits before it
// returns, so a caller that acknowledges after a nil error never loses an
// acknowledged write.
type Broker struct {
	db *gorm.DB
}

// Broker migrates the broker daemon's tables and returns their store,
// sharing this Store's connection pool. On SQLite the pool is narrowed to
// one connection: writers then queue in Go instead of sleeping in SQLite's
// busy handler, which keeps heartbeat latency flat under load.
//
// On PostgreSQL the pool is bounded (brokerPGConns): without a bound, a
// burst of API requests opens a connection each, runs into the server's
// max_connections and fails; with it, requests queue briefly in Go.
func (s *Store) Broker(ctx context.Context) (*Broker, error) {
	if sqlDB, err := s.db.DB(); err == nil {
		switch s.dialect {
		case SQLite:
			sqlDB.SetMaxOpenConns(1)
		case Postgres:
			sqlDB.SetMaxOpenConns(brokerPGConns)
			sqlDB.SetMaxIdleConns(brokerPGConns)
		}
	}
	return newBroker(ctx, s.db)
}

// brokerPGConns bounds the PostgreSQL pool per replica.
const brokerPGConns = 16

func newBroker(ctx context.Context, db *gorm.DB) (*Broker, error) {
	err := db.WithContext(ctx).AutoMigrate(&workloadRow{}, &instanceRow{}, &eventRow{},
		&benchmarkRow{}, &tokenRow{}, &leaseRow{}, &jobRunRow{})
	if err != nil {
		return nil, fmt.Errorf("migrating broker tables: %w", err)
	}
	return &Broker{db: db}, nil
}

// Dialect is "sqlite" or "postgres".
func (b *Broker) Dialect() string { return b.db.Name() }

// Ping checks the database answers.
func (b *Broker) Ping(ctx context.Context) error {
	sqlDB, err := b.db.DB()
	if err != nil {
		return err
	}
	return sqlDB.PingContext(ctx)
}

// CheckIntegrity runs SQLite's integrity check (PostgreSQL needs none: it
// never commits a torn page) and fails on any problem it reports.
func (b *Broker) CheckIntegrity(ctx context.Context) error {
	if b.db.Name() != "sqlite" {
		return nil
	}
	var res []string
	if err := b.db.WithContext(ctx).Raw("PRAGMA integrity_check").Scan(&res).Error; err != nil {
		return fmt.Errorf("integrity check: %w", err)
	}
	if len(res) != 1 || res[0] != "ok" {
		return fmt.Errorf("integrity check: %s", strings.Join(res, "; "))
	}
	return nil
}

func isUniqueViolation(err error) bool {
	if errors.Is(err, gorm.ErrDuplicatedKey) {
		return true
	}
	s := err.Error()
	return strings.Contains(s, "UNIQUE constraint failed") || strings.Contains(s, "duplicate key value") ||
		strings.Contains(s, "SQLSTATE 23505")
}

func rawOrNil(s string) json.RawMessage {
	if s == "" {
		return nil
	}
	return json.RawMessage(s)
}

// --- workloads ---

func (r workloadRow) record() WorkloadRecord {
	return WorkloadRecord{Name: r.Name, Team: r.Team, Kind: r.Kind, Spec: rawOrNil(r.Spec),
		CreatedAt: r.CreatedAt.UTC(), UpdatedAt: r.UpdatedAt.UTC()}
}

// CreateWorkload stores a new workload; ErrConflict when the name is taken.
func (b *Broker) CreateWorkload(ctx context.Context, w WorkloadRecord, now time.Time) (WorkloadRecord, error) {
	row := workloadRow{Name: w.Name, Team: w.Team, Kind: w.Kind, Spec: string(w.Spec), CreatedAt: now, UpdatedAt: now}
	if err := b.db.WithContext(ctx).Create(&row).Error; err != nil {
		if isUniqueViolation(err) {
			return WorkloadRecord{}, fmt.Errorf("workload %q: %w", w.Name, ErrConflict)
		}
		return WorkloadRecord{}, fmt.Errorf("creating workload %q: %w", w.Name, err)
	}
	return row.record(), nil
}

// UpdateWorkload replaces a workload's fields; ErrNotFound when absent.
func (b *Broker) UpdateWorkload(ctx context.Context, w WorkloadRecord, now time.Time) (WorkloadRecord, error) {
	var out WorkloadRecord
	err := b.db.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		res := tx.Model(&workloadRow{}).Where("name = ?", w.Name).
			Updates(map[string]any{"team": w.Team, "kind": w.Kind, "spec": string(w.Spec), "updated_at": now})
		if res.Error != nil {
			return res.Error
		}
		if res.RowsAffected == 0 {
			return ErrNotFound
		}
		var row workloadRow
		if err := tx.First(&row, "name = ?", w.Name).Error; err != nil {
			return err
		}
		out = row.record()
		return nil
	})
	if err != nil {
		return WorkloadRecord{}, fmt.Errorf("updating workload %q: %w", w.Name, err)
	}
	return out, nil
}

// GetWorkload returns one workload or ErrNotFound.
func (b *Broker) GetWorkload(ctx context.Context, name string) (WorkloadRecord, error) {
	var row workloadRow
	err := b.db.WithContext(ctx).First(&row, "name = ?", name).Error
	if errors.Is(err, gorm.ErrRecordNotFound) {
		return WorkloadRecord{}, fmt.Errorf("workload %q: %w", name, ErrNotFound)
	}
	if err != nil {
		return WorkloadRecord{}, fmt.Errorf("reading workload %q: %w", name, err)
	}
	return row.record(), nil
}

// ListWorkloads returns every workload by name.
func (b *Broker) ListWorkloads(ctx context.Context) ([]WorkloadRecord, error) {
	var rows []workloadRow
	if err := b.db.WithContext(ctx).Order("name").Find(&rows).Error; err != nil {
		return nil, fmt.Errorf("listing workloads: %w", err)
	}
	out := make([]WorkloadRecord, len(rows))
	for i, r := range rows {
		out[i] = r.record()
	}
	return out, nil
}

// DeleteWorkload removes a workload; ErrNotFound when absent.
func (b *Broker) DeleteWorkload(ctx context.Context, name string) error {
	res := b.db.WithContext(ctx).Delete(&workloadRow{}, "name = ?", name)
	if res.Error != nil {
		return fmt.Errorf("deleting workload %q: %w", name, res.Error)
	}
	if res.RowsAffected == 0 {
		return fmt.Errorf("workload %q: %w", name, ErrNotFound)
	}
	return nil
}

// --- instances and agents ---

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

// --- events ---

func addEvent(tx *gorm.DB, ev EventRecord) (EventRecord, error) {
	row := eventRow{At: ev.At, Kind: ev.Kind, Instance: ev.Instance, Workload: ev.Workload, Message: ev.Message,
		Data: string(ev.Data)}
	if ev.IdempotencyKey != "" {
		k := ev.IdempotencyKey
		row.IdemKey = &k
	}
	if err := tx.Create(&row).Error; err != nil {
		return EventRecord{}, err
	}
	return row.record(), nil
}

func (r eventRow) record() EventRecord {
	e := EventRecord{ID: r.ID, At: r.At.UTC(), Kind: r.Kind, Instance: r.Instance, Workload: r.Workload,
		Message: r.Message, Data: rawOrNil(r.Data)}
	if r.IdemKey != nil {
		e.IdempotencyKey = *r.IdemKey
	}
	return e
}

// AddEvent records an event and returns it with its ID.
func (b *Broker) AddEvent(ctx context.Context, ev EventRecord) (EventRecord, error) {
	out, err := addEvent(b.db.WithContext(ctx), ev)
	if err != nil {
		return EventRecord{}, fmt.Errorf("recording event %s: %w", ev.Kind, err)
	}
	return out, nil
}

// ListEvents returns events matching f, oldest first.
func (b *Broker) ListEvents(ctx context.Context, f EventFilter) ([]EventRecord, error) {
	q := b.db.WithContext(ctx).Order("id")
	if f.Kind != "" {
		q = q.Where("kind = ?", f.Kind)
	}
	if f.Instance != "" {
		q = q.Where("instance = ?", f.Instance)
	}
	if f.Workload != "" {
		q = q.Where("workload = ?", f.Workload)
	}
	if !f.Since.IsZero() {
		q = q.Where("at >= ?", f.Since)
	}
	if f.AfterID > 0 {
		q = q.Where("id > ?", f.AfterID)
	}
	limit := f.Limit
	if limit <= 0 {
		limit = 100
	}
	limit = min(limit, 1000)
	var rows []eventRow
	if err := q.Limit(limit).Find(&rows).Error; err != nil {
		return nil, fmt.Errorf("listing events: %w", err)
	}
	out := make([]EventRecord, len(rows))
	for i, r := range rows {
		out[i] = r.record()
	}
	return out, nil
}

// CountEvents counts every event.
func (b *Broker) CountEvents(ctx context.Context) (int64, error) {
	var n int64
	if err := b.db.WithContext(ctx).Model(&eventRow{}).Count(&n).Error; err != nil {
		return 0, fmt.Errorf("counting events: %w", err)
	}
	return n, nil
}

// --- benchmarks ---

// AddBenchmark records a benchmark result.
func (b *Broker) AddBenchmark(ctx context.Context, r BenchmarkRecord) (BenchmarkRecord, error) {
	row := benchmarkRow{Instance: r.Instance, InstanceType: r.InstanceType, GPU: r.GPU, TFLOPS: r.TFLOPS,
		MemBandwidthGB: r.MemBandwidthGB, At: r.At}
	if err := b.db.WithContext(ctx).Create(&row).Error; err != nil {
		return BenchmarkRecord{}, fmt.Errorf("recording benchmark for %q: %w", r.Instance, err)
	}
	r.ID = row.ID
	return r, nil
}

// ListBenchmarks returns benchmarks, newest last, optionally for one
// instance type.
func (b *Broker) ListBenchmarks(ctx context.Context, instanceType string) ([]BenchmarkRecord, error) {
	q := b.db.WithContext(ctx).Order("id")
	if instanceType != "" {
		q = q.Where("instance_type = ?", instanceType)
	}
	var rows []benchmarkRow
	if err := q.Find(&rows).Error; err != nil {
		return nil, fmt.Errorf("listing benchmarks: %w", err)
	}
	out := make([]BenchmarkRecord, len(rows))
	for i, r := range rows {
		out[i] = BenchmarkRecord{ID: r.ID, Instance: r.Instance, InstanceType: r.InstanceType, GPU: r.GPU,
			TFLOPS: r.TFLOPS, MemBandwidthGB: r.MemBandwidthGB, At: r.At.UTC()}
	}
	return out, nil
}

// --- tokens ---

// AddToken stores a token hash.
func (b *Broker) AddToken(ctx context.Context, t TokenRecord) error {
	row := tokenRow(t)
	if err := b.db.WithContext(ctx).Create(&row).Error; err != nil {
		if isUniqueViolation(err) {
			return fmt.Errorf("token: %w", ErrConflict)
		}
		return fmt.Errorf("storing token: %w", err)
	}
	return nil
}

// LookupToken finds a token by its hash; ErrNotFound when unknown.
func (b *Broker) LookupToken(ctx context.Context, hash string) (TokenRecord, error) {
	var row tokenRow
	err := b.db.WithContext(ctx).Limit(1).Find(&row, "hash = ?", hash).Error
	if err != nil {
		return TokenRecord{}, fmt.Errorf("looking up token: %w", err)
	}
	if row.Hash == "" {
		return TokenRecord{}, fmt.Errorf("token: %w", ErrNotFound)
	}
	return TokenRecord{Hash: row.Hash, Kind: row.Kind, Subject: row.Subject, CreatedAt: row.CreatedAt.UTC()}, nil
}

// CountTokens counts tokens of one kind.
func (b *Broker) CountTokens(ctx context.Context, kind string) (int64, error) {
	var n int64
	if err := b.db.WithContext(ctx).Model(&tokenRow{}).Where("kind = ?", kind).Count(&n).Error; err != nil {
		return 0, fmt.Errorf("counting tokens: %w", err)
	}
	return n, nil
}

// EnsureFirstAdminToken stores hash as an admin token only when no admin
// token exists yet, and reports whether it did. The check and insert run in
// one transaction so two replicas starting together create one.
func (b *Broker) EnsureFirstAdminToken(ctx context.Context, hash, name string, now time.Time) (bool, error) {
	created := false
	err := b.db.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		// A fixed-name lease row serialises first start across replicas.
		if err := tx.Clauses(clause.OnConflict{DoNothing: true}).Create(&leaseRow{Name: "first-admin-token"}).Error; err != nil {
			return err
		}
		var l leaseRow
		if err := tx.Clauses(clause.Locking{Strength: "UPDATE"}).First(&l, "name = ?", "first-admin-token").Error; err != nil {
			return err
		}
		var n int64
		if err := tx.Model(&tokenRow{}).Where("kind = ?", TokenAdmin).Count(&n).Error; err != nil {
			return err
		}
		if n > 0 {
			return nil
		}
		created = true
		return tx.Create(&tokenRow{Hash: hash, Kind: TokenAdmin, Subject: name, CreatedAt: now}).Error
	})
	if err != nil {
		return false, fmt.Errorf("creating the first admin token: %w", err)
	}
	return created, nil
}
