package store

import "time"

// SlotRecord is one slot of the fleet: a place one instance of a workload
// must fill (a job's instance, an inference replica), with the pool the plan
// chose for it and where it stands.
type SlotRecord struct {
	// ID is stable across re-plans: "<workload>/<index>".
	ID           string
	Workload     string
	Kind         string
	Index        int
	Cloud        string
	Region       string
	Zone         string
	InstanceType string
	GPU          string
	Capacity     string
	PricePerHour float64
	// State is pending, launching, booting, running, draining or gone.
	State string
	// Generation counts launches of this slot; the launch intent of
	// generation g has the client token derived from (slot, g).
	Generation int
	InstanceID string
	// Reason says why the slot is in its state (the last error, the
	// blocking pool, ...).
	Reason     string
	StateSince time.Time
	CreatedAt  time.Time
	LaunchedAt time.Time
	RunningAt  time.Time
}

type slotRow struct {
	ID           string `gorm:"primaryKey;size:200"`
	Workload     string `gorm:"size:128;index"`
	Kind         string `gorm:"size:32"`
	Idx          int
	Cloud        string `gorm:"size:16"`
	Region       string `gorm:"size:64"`
	Zone         string `gorm:"size:64"`
	InstanceType string `gorm:"size:128"`
	GPU          string `gorm:"size:32"`
	Capacity     string `gorm:"size:16"`
	PricePerHour float64
	State        string `gorm:"size:16;index"`
	Generation   int
	InstanceID   string `gorm:"size:256"`
	Reason       string
	StateSince   time.Time
	CreatedAt    time.Time
	LaunchedAt   *time.Time
	RunningAt    *time.Time
}

func (slotRow) TableName() string { return "fleet_slots" }

func slotToRow(r SlotRecord) slotRow {
	return slotRow{ID: r.ID, Workload: r.Workload, Kind: r.Kind, Idx: r.Index, Cloud: r.Cloud, Region: r.Region, Zone: r.Zone,
		InstanceType: r.InstanceType, GPU: r.GPU, Capacity: r.Capacity, PricePerHour: r.PricePerHour, State: r.State,
		Generation: r.Generation, InstanceID: r.InstanceID, Reason: r.Reason, StateSince: r.StateSince.UTC(),
		CreatedAt: r.CreatedAt.UTC(), LaunchedAt: tptr(r.LaunchedAt), RunningAt: tptr(r.RunningAt)}
}

func (r slotRow) record() SlotRecord {
	return SlotRecord{ID: r.ID, Workload: r.Workload, Kind: r.Kind, Index: r.Idx, Cloud: r.Cloud, Region: r.Region, Zone: r.Zone,
		InstanceType: r.InstanceType, GPU: r.GPU, Capacity: r.Capacity, PricePerHour: r.PricePerHour, State: r.State,
		Generation: r.Generation, InstanceID: r.InstanceID, Reason: r.Reason, StateSince: r.StateSince.UTC(),
		CreatedAt: r.CreatedAt.UTC(), LaunchedAt: tval(r.LaunchedAt), RunningAt: tval(r.RunningAt)}
}
