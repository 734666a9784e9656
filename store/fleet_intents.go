package store

import (
	"context"
	"encoding/json"
	"fmt"
	"time"
)

// Launch intent states.
const (
	// IntentOpen: written before the cloud call; the launch may or may not
	// have happened. A new leader finishes it with the same client token.
	IntentOpen = "open"
	// IntentLaunched: the cloud answered with an instance (or the instance
	// was found by its token tag and adopted).
	IntentLaunched = "launched"
	// IntentFailed: the cloud refused the launch; nothing was started.
	IntentFailed = "failed"
	// IntentRetired: the instance of the intent is gone; kept for audit,
	// not loaded by the reconciler.
	IntentRetired = "retired"
)

// IntentRecord is one launch, recorded before the cloud is called. The
// unique (slot, generation) and the deterministic token make a launch
// happen once across crashes and leader changes.
type IntentRecord struct {
	Token      string
	SlotID     string
	Generation int
	// Epoch is the leader term that wrote it.
	Epoch    int64
	Cloud    string
	Capacity string
	// Request is the launch request as JSON (candidates, tags, name; the
	// user data is left out: it holds a registration token), so a retry
	// sends the same request with the same token.
	Request    json.RawMessage
	State      string
	InstanceID string
	Region     string
	Zone       string
	Error      string
	CreatedAt  time.Time
	UpdatedAt  time.Time
}

type intentRow struct {
	Token      string `gorm:"primaryKey;size:64"`
	SlotID     string `gorm:"size:200;uniqueIndex:idx_intent_slot_gen"`
	Generation int    `gorm:"uniqueIndex:idx_intent_slot_gen"`
	Epoch      int64
	Cloud      string `gorm:"size:16"`
	Capacity   string `gorm:"size:16"`
	Request    string
	State      string `gorm:"size:16;index"`
	InstanceID string `gorm:"size:256"`
	Region     string `gorm:"size:64"`
	Zone       string `gorm:"size:64"`
	Error      string
	CreatedAt  time.Time
	// The reconciler's clock, not the database's: an upsert keeps it.
	UpdatedAt time.Time `gorm:"autoUpdateTime:false"`
}

func (intentRow) TableName() string { return "fleet_launch_intents" }

func intentToRow(r IntentRecord) intentRow {
	return intentRow{Token: r.Token, SlotID: r.SlotID, Generation: r.Generation, Epoch: r.Epoch, Cloud: r.Cloud, Capacity: r.Capacity,
		Request: string(r.Request), State: r.State, InstanceID: r.InstanceID, Region: r.Region, Zone: r.Zone, Error: r.Error,
		CreatedAt: r.CreatedAt.UTC(), UpdatedAt: r.UpdatedAt.UTC()}
}

func (r intentRow) record() IntentRecord {
	return IntentRecord{Token: r.Token, SlotID: r.SlotID, Generation: r.Generation, Epoch: r.Epoch, Cloud: r.Cloud, Capacity: r.Capacity,
		Request: rawOrNil(r.Request), State: r.State, InstanceID: r.InstanceID, Region: r.Region, Zone: r.Zone, Error: r.Error,
		CreatedAt: r.CreatedAt.UTC(), UpdatedAt: r.UpdatedAt.UTC()}
}

// LastGeneration is the highest generation of the launch intents recorded
// for slot, retired ones included (0 when there are none). Intents outlive
// their slot's row, so a slot id that comes back continues from here.
func (s *Fleet) LastGeneration(ctx context.Context, slot string) (int, error) {
	var last int
	err := s.db.WithContext(ctx).Model(&intentRow{}).Where("slot_id = ?", slot).
		Select("COALESCE(MAX(generation), 0)").Scan(&last).Error
	if err != nil {
		return 0, fmt.Errorf("reading the last launch generation of %s: %w", slot, err)
	}
	return last, nil
}
