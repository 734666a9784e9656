package store

import (
	"context"
	"fmt"
	"time"

	"gorm.io/gorm"
	"gorm.io/gorm/clause"

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

// SaveResult says what one SaveOffers call changed.
type SaveResult struct {
	// Inserted offers were not in the store before.
	Inserted int
	// Updated offers were there and got a newer observation.
	Updated int
	// Older offers were skipped because the store already holds a newer
	// observation of them.
	Older int
	// PriceChanges counts prices that differ from the offer's previous
	// recorded price (per capacity type); first prices are not changes.
	PriceChanges int
	// Points is how many price points were written (changes and first prices).
	Points int
}

// batchSize bounds rows per INSERT: PostgreSQL allows 65535 parameters per
// statement; the SQLite driver binds parameters in time quadratic in their
// number, so it gets smaller batches (100 rows measured fastest).
func (s *Store) batchSize() int {
	if s.dialect == SQLite {
		return 100
	}
	return 500
}

// SaveOffers records fresh observations of offers in one cloud and region,
// in one transaction: either all of them are stored or none is.
//
// Offers are upserted by key and keep their own ObservedAt (at is used where
// it is zero). Offers of that region missing from offers are kept as they
// are: an absent offer is not evidence it is gone, and its observed-at shows
// its age. An observation older than the stored one is ignored. For each
// offer and capacity type a price point is added when the price differs
// from the last recorded one. Every offer must belong to cloud and region and
// pass Offer.Validate.
func (s *Store) SaveOffers(ctx context.Context, cloud pricing.Cloud, region string, offers []pricing.Offer, at time.Time) (SaveResult, error) {
	var res SaveResult
	fresh := make([]offerRow, 0, len(offers))
	seen := make(map[string]bool, len(offers))
	for _, o := range offers {
		if o.Cloud != cloud || o.Region != region {
			return res, fmt.Errorf("saving %s %s: offer %s belongs to another cloud or region", cloud, region, o.Key())
		}
		if err := o.Validate(); err != nil {
			return res, fmt.Errorf("saving %s %s: %w", cloud, region, err)
		}
		if seen[o.Key()] {
			return res, fmt.Errorf("saving %s %s: offer %s appears twice", cloud, region, o.Key())
		}
		seen[o.Key()] = true
		if o.ObservedAt.IsZero() {
			o.ObservedAt = at
		}
		fresh = append(fresh, toRow(o))
	}
	if len(fresh) == 0 {
		return res, nil
	}
	err := s.db.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		res = SaveResult{}
		var old []offerRow
		if err := tx.Where("cloud = ? AND region = ?", string(cloud), region).Find(&old).Error; err != nil {
			return fmt.Errorf("loading current offers: %w", err)
		}
		byKey := make(map[string]offerRow, len(old))
		for _, r := range old {
			byKey[r.Key] = r
		}
		var rows []offerRow
		var points []pricePointRow
		for _, r := range fresh {
			prev, had := byKey[r.Key]
			switch {
			case had && prev.ObservedAt.After(r.ObservedAt):
				res.Older++
				continue
			case had:
				res.Updated++
			default:
				res.Inserted++
			}
			for _, cp := range []struct {
				ct    pricing.CapacityType
				price float64
				last  float64 // the newest point's price, 0 if none
				dst   *float64
			}{{pricing.OnDemand, r.OnDemandPrice, prev.PointOnDemand, &r.PointOnDemand},
				{pricing.Spot, r.SpotPrice, prev.PointSpot, &r.PointSpot}} {
				*cp.dst = cp.last
				if cp.price <= 0 || cp.price == cp.last {
					continue // unknown is not a price; unchanged is not a change
				}
				if cp.last > 0 {
					res.PriceChanges++
				}
				*cp.dst = cp.price
				points = append(points, pricePointRow{OfferKey: r.Key, Cloud: r.Cloud, Region: r.Region,
					Capacity: string(cp.ct), Price: cp.price, ObservedAt: r.ObservedAt, Source: r.Source})
			}
			rows = append(rows, r)
		}
		if len(rows) > 0 {
			if err := tx.Clauses(clause.OnConflict{UpdateAll: true}).CreateInBatches(&rows, s.batchSize()).Error; err != nil {
				return fmt.Errorf("writing offers: %w", err)
			}
		}
		if len(points) > 0 {
			if err := tx.CreateInBatches(&points, s.batchSize()).Error; err != nil {
				return fmt.Errorf("writing price points: %w", err)
			}
		}
		res.Points = len(points)
		return nil
	})
	if err != nil {
		return SaveResult{}, fmt.Errorf("saving %s %s offers: %w", cloud, region, err)
	}
	return res, nil
}

// Offers returns every stored offer in key order.
func (s *Store) Offers(ctx context.Context) ([]pricing.Offer, error) {
	var rows []offerRow
	if err := s.db.WithContext(ctx).Order("key").Find(&rows).Error; err != nil {
		return nil, fmt.Errorf("loading offers: %w", err)
	}
	out := make([]pricing.Offer, len(rows))
	for i, r := range rows {
		out[i] = r.offer()
	}
	return out, nil
}

// CountOffers returns how many offers are stored for one cloud and region.
func (s *Store) CountOffers(ctx context.Context, cloud pricing.Cloud, region string) (int, error) {
	var n int64
	if err := s.db.WithContext(ctx).Model(&offerRow{}).Where("cloud = ? AND region = ?", string(cloud), region).Count(&n).Error; err != nil {
		return 0, fmt.Errorf("counting %s %s offers: %w", cloud, region, err)
	}
	return int(n), nil
}

// Catalog loads the stored offers as a catalog whose GeneratedAt is the
// newest observation. It returns nil (and no error) when the store holds no
// offers, so callers can fall back to the embedded snapshot.
func (s *Store) Catalog(ctx context.Context) (*pricing.Catalog, error) {
	offers, err := s.Offers(ctx)
	if err != nil || len(offers) == 0 {
		return nil, err
	}
	var newest time.Time
	for _, o := range offers {
		if o.ObservedAt.After(newest) {
			newest = o.ObservedAt
		}
	}
	return pricing.NewCatalog(offers, newest, "store "+s.where), nil
}
