package store

import (
	"context"
	"fmt"
	"time"
)

// BenchmarkRecord is one measured benchmark of an instance's GPU.
type BenchmarkRecord struct {
	ID             int64
	Instance       string
	InstanceType   string
	GPU            string
	TFLOPS         float64
	MemBandwidthGB float64
	At             time.Time
}

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
