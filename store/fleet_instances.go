package store

import "time"

// FleetInstanceRecord is one broker-tagged instance as the fleet last saw
// it in a cloud's listing, with the slot it fills ("" for an orphan).
type FleetInstanceRecord struct {
	ID           string
	Cloud        string
	Region       string
	Zone         string
	InstanceType string
	Capacity     string
	// State is the cloud's (pending, running, stopping, stopped,
	// terminated).
	State  string
	SlotID string
	Token  string
	// Retired is set once the fleet gave up on the instance (preempted,
	// lost, superseded): it is terminated and no longer fills its slot.
	Retired bool
	// RetiredAt is when; RetireReason why.
	RetiredAt    time.Time
	RetireReason string
	LaunchedAt   time.Time
	FirstSeen    time.Time
	// OrphanSince is when the fleet first saw it without a slot.
	OrphanSince time.Time
}

type fleetInstanceRow struct {
	ID           string `gorm:"primaryKey;size:256"`
	Cloud        string `gorm:"size:16;index"`
	Region       string `gorm:"size:64"`
	Zone         string `gorm:"size:64"`
	InstanceType string `gorm:"size:128"`
	Capacity     string `gorm:"size:16"`
	State        string `gorm:"size:16"`
	SlotID       string `gorm:"size:200;index"`
	Token        string `gorm:"size:64"`
	Retired      bool
	RetiredAt    *time.Time
	RetireReason string
	LaunchedAt   time.Time
	FirstSeen    time.Time
	OrphanSince  *time.Time
}

func (fleetInstanceRow) TableName() string { return "fleet_instances" }

func fleetInstanceToRow(r FleetInstanceRecord) fleetInstanceRow {
	return fleetInstanceRow{ID: r.ID, Cloud: r.Cloud, Region: r.Region, Zone: r.Zone, InstanceType: r.InstanceType, Capacity: r.Capacity,
		State: r.State, SlotID: r.SlotID, Token: r.Token, Retired: r.Retired, RetiredAt: tptr(r.RetiredAt), RetireReason: r.RetireReason,
		LaunchedAt: r.LaunchedAt.UTC(), FirstSeen: r.FirstSeen.UTC(), OrphanSince: tptr(r.OrphanSince)}
}

func (r fleetInstanceRow) record() FleetInstanceRecord {
	return FleetInstanceRecord{ID: r.ID, Cloud: r.Cloud, Region: r.Region, Zone: r.Zone, InstanceType: r.InstanceType, Capacity: r.Capacity,
		State: r.State, SlotID: r.SlotID, Token: r.Token, Retired: r.Retired, RetiredAt: tval(r.RetiredAt), RetireReason: r.RetireReason,
		LaunchedAt: r.LaunchedAt.UTC(), FirstSeen: r.FirstSeen.UTC(), OrphanSince: tval(r.OrphanSince)}
}
