package store

import (
	"context"
	"fmt"
	"sort"
	"time"

	"github.com/gpubroker/gpubroker/pricing"
)

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

// PricePoint is one observed price of one offer and capacity type.
type PricePoint struct {
	Key        string
	Capacity   pricing.CapacityType
	Price      float64
	ObservedAt time.Time
	Source     string
}

// PriceHistory returns the recorded prices of the offer with this key since
// a time (zero: all), oldest first, both capacity types interleaved.
func (s *Store) PriceHistory(ctx context.Context, key string, since time.Time) ([]PricePoint, error) {
	var rows []pricePointRow
	q := s.db.WithContext(ctx).Where("offer_key = ?", key)
	if !since.IsZero() {
		q = q.Where("observed_at >= ?", since.UTC())
	}
	if err := q.Order("observed_at, id").Find(&rows).Error; err != nil {
		return nil, fmt.Errorf("loading price history of %s: %w", key, err)
	}
	out := make([]PricePoint, len(rows))
	for i, r := range rows {
		out[i] = PricePoint{Key: r.OfferKey, Capacity: pricing.CapacityType(r.Capacity), Price: r.Price,
			ObservedAt: r.ObservedAt.UTC(), Source: r.Source}
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].ObservedAt.Before(out[j].ObservedAt) })
	return out, nil
}
