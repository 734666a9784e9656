// Package providers holds what the cloud adapters share: the query they
// answer and the errors callers act on. Each cloud lives in its own
// sub-package (aws, gcp, azure), and fake is a simulated cloud for tests.
// Adapters turn cloud API responses into pricing.Offer values; they know
// nothing of policies or plans.
package providers

import (
	"errors"

	"github.com/gpubroker/gpubroker/pricing"
)

// Query says which offers to gather. Empty fields mean "everything the
// adapter knows about".
type Query struct {
	// Regions are exact region names to fetch (clouds are asked region by
	// region).
	Regions []string
	// GPUs limits the GPU models gathered.
	GPUs []pricing.GPUModel
}

// ErrNoCredentials is returned (wrapped) by an adapter's constructor when the
// SDK's standard credential chain finds nothing; callers skip that cloud with
// one clear line.
var ErrNoCredentials = errors.New("no credentials")

// RegionError reports one region that failed while others succeeded; an
// adapter returns the offers it has together with errors.Join of these.
type RegionError struct {
	Cloud  pricing.Cloud
	Region string
	Err    error
}

func (e *RegionError) Error() string {
	return string(e.Cloud) + " " + e.Region + ": " + e.Err.Error()
}

func (e *RegionError) Unwrap() error { return e.Err }
