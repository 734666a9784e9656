package providers

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/gpubroker/gpubroker/pricing"
)

// Compute is what the fleet reconciler needs from one cloud to put GPU
// instances where the plan says. Each cloud adapter (aws, gcp, azure) and the
// fake cloud implement it; the fleet package declares the interface it uses
// and these types are the plain data that crosses it.
type Compute interface {
	// Launch starts one instance. It is idempotent on req.ClientToken: a
	// retry with the same token never starts a second instance, it returns
	// the first.
	Launch(ctx context.Context, req LaunchRequest) (Instance, error)
	// Terminate stops and deletes an instance (and what the adapter created
	// with it: NIC, disk). Terminating an instance that is already gone is
	// not an error.
	Terminate(ctx context.Context, ref InstanceRef) error
	// List returns the instances that carry every tag in f.Tags, in every
	// region of f.Regions (all configured regions when empty).
	List(ctx context.Context, f Filter) ([]Instance, error)
}

// LaunchRequest is one instance to start.
type LaunchRequest struct {
	// ClientToken makes the launch idempotent (AWS ClientToken, GCP
	// requestId, Azure VM name). Deterministic per launch intent.
	ClientToken string
	// Name is a human-readable, cloud-valid instance name.
	Name string
	// Candidates are the offers to try, best first; all share the cloud.
	// Adapters that can try several in one call (EC2 CreateFleet) do so;
	// the others take the first. Each has Region, Zone and InstanceType.
	Candidates []pricing.Offer
	Capacity   pricing.CapacityType
	// Tags go on the instance and its volumes (labels on GCP: adapters
	// lower-case and sanitise keys and values as the cloud requires).
	Tags map[string]string
	// UserData is the boot script (cloud-init); adapters encode it as the
	// cloud wants it (base64 on AWS and Azure, metadata on GCP).
	UserData string
}

// InstanceRef names one instance to act on.
type InstanceRef struct {
	Cloud  pricing.Cloud
	Region string
	Zone   string
	// ID is the cloud's instance id (EC2 i-…, GCP instance name, Azure VM
	// name).
	ID string
}

// InstanceState is the cloud's view of an instance, normalised.
type InstanceState string

const (
	StatePending    InstanceState = "pending"
	StateRunning    InstanceState = "running"
	StateStopping   InstanceState = "stopping"
	StateStopped    InstanceState = "stopped"
	StateTerminated InstanceState = "terminated"
	StateUnknown    InstanceState = "unknown"
)

// Instance is one instance as the cloud reports it.
type Instance struct {
	InstanceRef
	InstanceType string
	Capacity     pricing.CapacityType
	State        InstanceState
	Tags         map[string]string
	LaunchedAt   time.Time
	PrivateIP    string
}

// Filter selects instances for List.
type Filter struct {
	Regions []string
	Tags    map[string]string
}

// Sentinel errors of compute calls. Adapters wrap them (errors.Is works) and
// map by the cloud's error code or reason, never by HTTP status alone.
var (
	// ErrInsufficientCapacity: the pool has no capacity now (AWS
	// InsufficientInstanceCapacity, GCP ZONE_RESOURCE_POOL_EXHAUSTED, Azure
	// ZonalAllocationFailed/AllocationFailed/SkuNotAvailable). The fleet
	// blocks the pool for a back-off and tries the next one.
	ErrInsufficientCapacity = errors.New("insufficient capacity")
	// ErrQuotaExceeded: an account quota stops the launch (AWS
	// MaxSpotInstanceCountExceeded/VcpuLimitExceeded, GCP QUOTA_EXCEEDED,
	// Azure OperationNotAllowed on 409).
	ErrQuotaExceeded = errors.New("quota exceeded")
	// ErrUnauthorized: credentials are missing, expired or lack permission.
	ErrUnauthorized = errors.New("unauthorized")
	// ErrBadConfig: the launch configuration (image, subnet, …) is wrong;
	// retrying will not help.
	ErrBadConfig = errors.New("bad launch configuration")
	// ErrThrottled: the cloud asked us to slow down; retry later.
	ErrThrottled = errors.New("throttled")
	// ErrNotFound: the instance does not exist.
	ErrNotFound = errors.New("instance not found")
)

// PoolKey names a spot/on-demand pool: the unit the unavailable-offerings
// cache blocks after a capacity error.
type PoolKey struct {
	Cloud        pricing.Cloud
	Zone         string
	InstanceType string
	Capacity     pricing.CapacityType
}

// LaunchError carries the pool a launch failed in with the mapped sentinel,
// so the fleet can block exactly that pool.
type LaunchError struct {
	Pool PoolKey
	// Code is the cloud's own error code, for events and metrics.
	Code string
	Err  error
}

func (e *LaunchError) Error() string {
	return string(e.Pool.Cloud) + " " + e.Pool.Zone + " " + e.Pool.InstanceType + " " + string(e.Pool.Capacity) + ": " + e.Code + ": " + e.Err.Error()
}

func (e *LaunchError) Unwrap() error { return e.Err }

// LaunchErrors returns every *LaunchError in err's tree, best-ranked pool
// first. A launch that tried several pools in one call (EC2 CreateFleet
// with ranked overrides) fails with one LaunchError per pool joined by
// errors.Join; errors.As finds only the first, so the fleet calls this to
// block each pool that reported a capacity error.
func LaunchErrors(err error) []*LaunchError {
	var out []*LaunchError
	var walk func(error)
	walk = func(e error) {
		if e == nil {
			return
		}
		if le, ok := e.(*LaunchError); ok {
			out = append(out, le)
			return
		}
		switch u := e.(type) {
		case interface{ Unwrap() []error }:
			for _, x := range u.Unwrap() {
				walk(x)
			}
		case interface{ Unwrap() error }:
			walk(u.Unwrap())
		}
	}
	walk(err)
	return out
}

// CheckLaunchRequest reports what makes req unusable by any adapter of
// cloud: no token, no candidate, a candidate of another cloud or without an
// instance type, an unknown capacity type. The error wraps ErrBadConfig.
func CheckLaunchRequest(cloud pricing.Cloud, req LaunchRequest) error {
	var errs []error
	if req.ClientToken == "" {
		errs = append(errs, errors.New("no client token (every launch needs one so a retry cannot start a second instance)"))
	}
	if len(req.Candidates) == 0 {
		errs = append(errs, errors.New("no candidate offer"))
	}
	for i, o := range req.Candidates {
		if o.Cloud != cloud {
			errs = append(errs, fmt.Errorf("candidate %d is on %q, want %q", i, o.Cloud, cloud))
		}
		if o.InstanceType == "" || o.Region == "" {
			errs = append(errs, fmt.Errorf("candidate %d has no instance type or region", i))
		}
	}
	if req.Capacity != pricing.Spot && req.Capacity != pricing.OnDemand {
		errs = append(errs, fmt.Errorf("capacity %q, want %q or %q", req.Capacity, pricing.Spot, pricing.OnDemand))
	}
	if len(errs) == 0 {
		return nil
	}
	return fmt.Errorf("%w: %w", ErrBadConfig, errors.Join(errs...))
}

// HasTags reports whether have carries every tag of want with the same
// value.
func HasTags(have, want map[string]string) bool {
	for k, v := range want {
		if got, ok := have[k]; !ok || got != v {
			return false
		}
	}
	return true
}
