package pricing

import (
	"fmt"
	"math"
	"time"
)

// Cloud names a cloud provider.
type Cloud string

// Supported clouds.
const (
	AWS   Cloud = "aws"
	GCP   Cloud = "gcp"
	Azure Cloud = "azure"
)

// Clouds lists the supported clouds in a stable order.
func Clouds() []Cloud { return []Cloud{AWS, GCP, Azure} }

// ParseCloud accepts a cloud name in any case.
func ParseCloud(s string) (Cloud, error) {
	switch c := Cloud(lower(s)); c {
	case AWS, GCP, Azure:
		return c, nil
	}
	return "", fmt.Errorf("unknown cloud %q; want one of aws, gcp, azure", s)
}

// CapacityType is how an instance is bought.
type CapacityType string

// Capacity types.
const (
	OnDemand CapacityType = "on-demand"
	Spot     CapacityType = "spot"
)

// SpotSignal is what is known about how reliable spot capacity of one offer
// is. Zero values mean unknown.
type SpotSignal struct {
	// Bucket is the cloud's own interruption-frequency label, e.g. AWS Spot
	// Advisor's "5-10%" (share of instances interrupted per month) or
	// Azure's eviction-rate bucket "0-5".
	Bucket string `json:"bucket,omitempty"`
	// InterruptionsPerHour is the expected preemption rate the cost model
	// uses; derived from Bucket or, where no signal exists, a default.
	InterruptionsPerHour float64 `json:"interruptions_per_hour"`
	// PlacementScore is AWS's spot placement score (1-10), 0 if unknown.
	PlacementScore int `json:"placement_score,omitempty"`
	// Availability is the recently observed share of time spot capacity could
	// be had (0..1), 0 if unknown.
	Availability float64 `json:"availability,omitempty"`
	// Default is true when the figures are the configured per-cloud default,
	// not an observation.
	Default bool `json:"default"`
}

// Offer is one purchasable GPU shape in one place. Prices are USD per hour
// for the whole instance; GCP prices are host plus attached GPUs.
type Offer struct {
	Cloud        Cloud    `json:"cloud"`
	Region       string   `json:"region"`
	Zone         string   `json:"zone,omitempty"`
	InstanceType string   `json:"instance_type"`
	GPU          GPUModel `json:"gpu"`
	GPUCount     int      `json:"gpu_count"`
	// GPUMemoryGiB is memory per GPU.
	GPUMemoryGiB float64 `json:"gpu_memory_gib"`
	VCPUs        float64 `json:"vcpus"`
	MemoryGiB    float64 `json:"memory_gib"`
	// OnDemandPrice is 0 when the shape cannot be bought on demand there.
	OnDemandPrice float64 `json:"on_demand_price"`
	// SpotPrice is 0 when no spot price is known.
	SpotPrice  float64    `json:"spot_price,omitempty"`
	Spot       SpotSignal `json:"spot_signal"`
	ObservedAt time.Time  `json:"observed_at"`
	Source     string     `json:"source"`
}

// Key identifies an offer's place and shape; two observations of the same
// offer share a key.
func (o Offer) Key() string {
	return string(o.Cloud) + "/" + o.Region + "/" + o.Zone + "/" + o.InstanceType
}

// Price returns the hourly price for a capacity type and whether the offer is
// sold that way.
func (o Offer) Price(ct CapacityType) (float64, bool) {
	switch ct {
	case OnDemand:
		return o.OnDemandPrice, o.OnDemandPrice > 0
	case Spot:
		return o.SpotPrice, o.SpotPrice > 0
	}
	return 0, false
}

// PricePerGPUHour is the hourly price divided by the GPU count.
func (o Offer) PricePerGPUHour(ct CapacityType) (float64, bool) {
	p, ok := o.Price(ct)
	if !ok || o.GPUCount <= 0 {
		return 0, false
	}
	return p / float64(o.GPUCount), true
}

// PricePerTFLOPHour is the hourly price per dense tensor TFLOPS of the whole
// instance: what an hour of compute costs per unit of peak speed.
func (o Offer) PricePerTFLOPHour(ct CapacityType) (float64, bool) {
	p, ok := o.Price(ct)
	s, known := Spec(o.GPU)
	if !ok || !known || o.GPUCount <= 0 || s.TensorTFLOPS <= 0 {
		return 0, false
	}
	return p / (s.TensorTFLOPS * float64(o.GPUCount)), true
}

// Validate reports the first thing that makes an offer unusable.
func (o Offer) Validate() error {
	switch {
	case o.Cloud == "":
		return fmt.Errorf("offer %s: no cloud", o.Key())
	case o.Region == "" || o.InstanceType == "":
		return fmt.Errorf("offer %s: region and instance type are required", o.Key())
	case o.GPUCount <= 0:
		return fmt.Errorf("offer %s: GPU count %d must be positive", o.Key(), o.GPUCount)
	case !validPrice(o.OnDemandPrice) || !validPrice(o.SpotPrice):
		return fmt.Errorf("offer %s: prices must be finite and non-negative", o.Key())
	case o.OnDemandPrice == 0 && o.SpotPrice == 0:
		return fmt.Errorf("offer %s: neither an on-demand nor a spot price", o.Key())
	}
	if _, ok := Spec(o.GPU); !ok {
		return fmt.Errorf("offer %s: unknown GPU model %q", o.Key(), o.GPU)
	}
	return nil
}

func validPrice(p float64) bool { return p >= 0 && !math.IsInf(p, 0) && !math.IsNaN(p) }

func lower(s string) string {
	b := []byte(s)
	for i, c := range b {
		if 'A' <= c && c <= 'Z' {
			b[i] = c + 'a' - 'A'
		}
	}
	return string(b)
}
