package store

import (
	"time"

	"github.com/gpubroker/gpubroker/pricing"
)

// offerRow is the current observation of one offer, keyed by Offer.Key().
type offerRow struct {
	Key                      string    `gorm:"column:key;primaryKey;size:300"`
	Cloud                    string    `gorm:"column:cloud;size:16;not null;index:idx_offers_place,priority:1"`
	Region                   string    `gorm:"column:region;size:64;not null;index:idx_offers_place,priority:2"`
	Zone                     string    `gorm:"column:zone;size:64;not null"`
	InstanceType             string    `gorm:"column:instance_type;size:128;not null"`
	GPU                      string    `gorm:"column:gpu;size:32;not null"`
	GPUCount                 int       `gorm:"column:gpu_count;not null"`
	GPUMemoryGiB             float64   `gorm:"column:gpu_memory_gib"`
	VCPUs                    float64   `gorm:"column:vcpus"`
	MemoryGiB                float64   `gorm:"column:memory_gib"`
	OnDemandPrice            float64   `gorm:"column:on_demand_price"`
	SpotPrice                float64   `gorm:"column:spot_price"`
	SpotBucket               string    `gorm:"column:spot_bucket;size:32"`
	SpotInterruptionsPerHour float64   `gorm:"column:spot_interruptions_per_hour"`
	SpotPlacementScore       int       `gorm:"column:spot_placement_score"`
	SpotAvailability         float64   `gorm:"column:spot_availability"`
	SpotDefault              bool      `gorm:"column:spot_default"`
	ObservedAt               time.Time `gorm:"column:observed_at;not null"`
	Source                   string    `gorm:"column:source;size:128"`
	// PointOnDemand and PointSpot are the prices of the offer's newest
	// price points (0: none yet), so a save compares against them without
	// reading the ever-growing history.
	PointOnDemand float64   `gorm:"column:point_on_demand"`
	PointSpot     float64   `gorm:"column:point_spot"`
	UpdatedAt     time.Time `gorm:"column:updated_at"`
}

func (offerRow) TableName() string { return "offers" }

// pricePointRow is one observed price of one offer and capacity type,
// recorded only when it differs from the previous point.
type pricePointRow struct {
	ID         uint64    `gorm:"column:id;primaryKey;autoIncrement"`
	OfferKey   string    `gorm:"column:offer_key;size:300;not null;index:idx_price_points_offer,priority:1"`
	Cloud      string    `gorm:"column:cloud;size:16;not null;index:idx_price_points_place,priority:1"`
	Region     string    `gorm:"column:region;size:64;not null;index:idx_price_points_place,priority:2"`
	Capacity   string    `gorm:"column:capacity;size:16;not null;index:idx_price_points_offer,priority:2"`
	Price      float64   `gorm:"column:price;not null"`
	ObservedAt time.Time `gorm:"column:observed_at;not null;index:idx_price_points_offer,priority:3"`
	Source     string    `gorm:"column:source;size:128"`
}

func (pricePointRow) TableName() string { return "price_points" }

func toRow(o pricing.Offer) offerRow {
	return offerRow{
		Key: o.Key(), Cloud: string(o.Cloud), Region: o.Region, Zone: o.Zone, InstanceType: o.InstanceType,
		GPU: string(o.GPU), GPUCount: o.GPUCount, GPUMemoryGiB: o.GPUMemoryGiB, VCPUs: o.VCPUs, MemoryGiB: o.MemoryGiB,
		OnDemandPrice: o.OnDemandPrice, SpotPrice: o.SpotPrice,
		SpotBucket: o.Spot.Bucket, SpotInterruptionsPerHour: o.Spot.InterruptionsPerHour,
		SpotPlacementScore: o.Spot.PlacementScore, SpotAvailability: o.Spot.Availability, SpotDefault: o.Spot.Default,
		ObservedAt: o.ObservedAt.UTC(), Source: o.Source,
	}
}

func (r offerRow) offer() pricing.Offer {
	return pricing.Offer{
		Cloud: pricing.Cloud(r.Cloud), Region: r.Region, Zone: r.Zone, InstanceType: r.InstanceType,
		GPU: pricing.GPUModel(r.GPU), GPUCount: r.GPUCount, GPUMemoryGiB: r.GPUMemoryGiB, VCPUs: r.VCPUs, MemoryGiB: r.MemoryGiB,
		OnDemandPrice: r.OnDemandPrice, SpotPrice: r.SpotPrice,
		Spot: pricing.SpotSignal{Bucket: r.SpotBucket, InterruptionsPerHour: r.SpotInterruptionsPerHour,
			PlacementScore: r.SpotPlacementScore, Availability: r.SpotAvailability, Default: r.SpotDefault},
		ObservedAt: r.ObservedAt.UTC(), Source: r.Source,
	}
}
