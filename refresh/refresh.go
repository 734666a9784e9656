// Package refresh brings the stored offer catalog up to date from the
// clouds' price sources: it builds one source per cloud, asks each (all
// clouds at once) for its regions in one call — the adapters fetch the
// regions concurrently, within the bound given, and read documents shared by
// all regions once — then splits the answer by region and merges each region
// into the store.
//
//	Registry ──Plan──► []Target ──Run──► per cloud: Offers(all its regions)
//	                                       │ split by region, validate
//	                                       ▼
//	               per region: failed / empty → keep old data; else store.SaveOffers
//	                                       ▼
//	                           Progress (bars or log lines), Report
//
// A refresh never replaces good data with an empty or partial result: a
// region that failed or returned nothing keeps its stored offers, and a
// region that answered is upserted offer by offer (offers it did not mention
// keep their old observed-at and age into "stale").
//
// It depends on pricing, providers (the query and errors) and store, never
// on a cloud package: each cloud is a Factory in a Registry the caller fills.
package refresh

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime/debug"
	"slices"
	"sync"
	"time"

	"github.com/gpubroker/gpubroker/pricing"
	"github.com/gpubroker/gpubroker/providers"
	"github.com/gpubroker/gpubroker/store"
)

// OfferSource is one cloud's price source (providers/aws, gcp, azure, fake).
// Offers returns the offers of the regions in q; for regions that failed it
// returns errors.Join of *providers.RegionError next to the offers it has.
// Run calls it once per refresh with all the cloud's regions.
type OfferSource interface {
	Cloud() pricing.Cloud
	Offers(ctx context.Context, q providers.Query) ([]pricing.Offer, error)
}

// SourceConfig is what a Factory gets to build a source.
type SourceConfig struct {
	// Regions the source will be asked about.
	Regions []string
	// Concurrency bounds the regions the source fetches at once.
	Concurrency int
	Logger      *slog.Logger
	// Endpoints overrides the clouds' public endpoints.
	Endpoints providers.Endpoints
}

// Factory builds one cloud's source. Without credentials it returns an error
// wrapping providers.ErrNoCredentials, and the cloud is skipped.
type Factory func(ctx context.Context, cfg SourceConfig) (OfferSource, error)

// Registry maps each cloud to its Factory.
type Registry map[pricing.Cloud]Factory

// Store is the part of *store.Store a refresh writes to.
type Store interface {
	SaveOffers(ctx context.Context, cloud pricing.Cloud, region string, offers []pricing.Offer, at time.Time) (store.SaveResult, error)
	CountOffers(ctx context.Context, cloud pricing.Cloud, region string) (int, error)
}

var _ Store = (*store.Store)(nil)

// Target is one cloud to refresh and its regions.
type Target struct {
	Cloud   pricing.Cloud
	Regions []string
	Factory Factory
	// Patterns are the region patterns Regions came from, for messages.
	Patterns []string
}

// Plan picks the targets for clouds (empty: every cloud in reg) and region
// patterns (see ResolveRegions).
func Plan(reg Registry, clouds []pricing.Cloud, patterns []string) ([]Target, error) {
	if len(clouds) == 0 {
		for _, c := range pricing.Clouds() {
			if reg[c] != nil {
				clouds = append(clouds, c)
			}
		}
	}
	var out []Target
	for _, c := range clouds {
		f := reg[c]
		if f == nil {
			return nil, fmt.Errorf("no price source for cloud %q", c)
		}
		regions, err := ResolveRegions(c, patterns)
		if err != nil {
			return nil, err
		}
		out = append(out, Target{Cloud: c, Regions: regions, Factory: f, Patterns: patterns})
	}
	return out, nil
}

// Status is the outcome for one cloud or region.
type Status string

// Outcomes.
const (
	// Refreshed: the region answered and its offers were saved.
	Refreshed Status = "refreshed"
	// Empty: the region answered with no offers; its old offers are kept.
	Empty Status = "empty"
	// Failed: the region (or the cloud's source) failed; old offers are kept.
	Failed Status = "failed"
	// Skipped: the cloud has no credentials or no regions selected.
	Skipped Status = "skipped"
)

// RegionResult is what happened to one region.
type RegionResult struct {
	Cloud  pricing.Cloud
	Region string
	Status Status
	// Offers is how many valid offers the source returned.
	Offers int
	// Dropped counts offers the source returned that were invalid or
	// belonged elsewhere (an adapter bug; they are logged).
	Dropped int
	// Saved is what the store changed (Refreshed only).
	Saved store.SaveResult
	// Kept is how many stored offers were left untouched because the region
	// failed or came back empty.
	Kept int
	Err  error
	Took time.Duration
}

// CloudResult is what happened to one cloud.
type CloudResult struct {
	Cloud pricing.Cloud
	// Status is Skipped or Failed when the cloud's source could not be
	// built (Err says why); otherwise the worst of its regions' statuses.
	Status  Status
	Err     error
	Regions []RegionResult
}

// Report is the outcome of one refresh.
type Report struct {
	Started, Finished time.Time
	Clouds            []CloudResult
}

// Err joins every failure (skipped clouds are not failures), or nil.
func (r *Report) Err() error {
	var errs []error
	for _, c := range r.Clouds {
		if c.Status == Failed && c.Err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", c.Cloud, c.Err))
		}
		for _, rr := range c.Regions {
			if rr.Status == Failed {
				var re *providers.RegionError
				if errors.As(rr.Err, &re) && re.Region == rr.Region {
					errs = append(errs, rr.Err) // already says cloud and region
				} else {
					errs = append(errs, fmt.Errorf("%s %s: %w", rr.Cloud, rr.Region, rr.Err))
				}
			}
		}
	}
	return errors.Join(errs...)
}

// Count returns how many regions ended with status s.
func (r *Report) Count(s Status) int {
	n := 0
	for _, c := range r.Clouds {
		for _, rr := range c.Regions {
			if rr.Status == s {
				n++
			}
		}
	}
	return n
}

// Progress hears about a refresh as it goes. Calls may come from several
// goroutines; implementations synchronise.
type Progress interface {
	CloudStarted(cloud pricing.Cloud, regions int)
	RegionDone(r RegionResult)
	CloudDone(c CloudResult)
}

// Options tune a refresh.
type Options struct {
	// Concurrency bounds the regions each cloud's source fetches at once
	// (clouds run side by side); default 4.
	Concurrency int
	// FetchTimeout bounds one cloud's fetch of all its regions; default 15
	// minutes.
	FetchTimeout time.Duration
	// GPUs limits the GPU models asked for; empty means all.
	GPUs []pricing.GPUModel
	// Now stamps offers that carry no observed-at; default time.Now.
	Now      func() time.Time
	Logger   *slog.Logger
	Progress Progress
	// Endpoints is passed to every source factory.
	Endpoints providers.Endpoints
}

// Run refreshes every target into st and reports per cloud and region. It
// returns when all regions are done or ctx ends (unfinished regions then
// fail with ctx's error; nothing is half-written).
func Run(ctx context.Context, st Store, targets []Target, opt Options) *Report {
	if opt.Concurrency <= 0 {
		opt.Concurrency = 4
	}
	if opt.FetchTimeout <= 0 {
		opt.FetchTimeout = 15 * time.Minute
	}
	if opt.Now == nil {
		opt.Now = time.Now
	}
	if opt.Logger == nil {
		opt.Logger = slog.New(slog.DiscardHandler)
	}
	if opt.Progress == nil {
		opt.Progress = nopProgress{}
	}
	r := &run{st: st, opt: opt}
	rep := &Report{Started: opt.Now(), Clouds: make([]CloudResult, len(targets))}
	var wg sync.WaitGroup
	for i, t := range targets {
		wg.Go(func() { rep.Clouds[i] = r.cloud(ctx, t) })
	}
	wg.Wait()
	rep.Finished = opt.Now()
	return rep
}

type run struct {
	st  Store
	opt Options
}

func (r *run) cloud(ctx context.Context, t Target) CloudResult {
	res := CloudResult{Cloud: t.Cloud}
	r.opt.Progress.CloudStarted(t.Cloud, len(t.Regions))
	defer func() { r.opt.Progress.CloudDone(res) }()
	if len(t.Regions) == 0 {
		res.Status, res.Err = Skipped, fmt.Errorf("no %s regions match %v", t.Cloud, t.Patterns)
		return res
	}
	src, err := r.build(ctx, t)
	switch {
	case errors.Is(err, providers.ErrNoCredentials):
		res.Status, res.Err = Skipped, err
		return res
	case err != nil:
		res.Status, res.Err = Failed, err
		return res
	}
	start := time.Now()
	offers, err := r.fetch(ctx, src, t.Regions)
	took := time.Since(start)
	regionErrs, callErr := splitErrors(err, t.Regions)
	byRegion := make(map[string][]pricing.Offer, len(t.Regions))
	for _, o := range offers {
		byRegion[o.Region] = append(byRegion[o.Region], o)
	}
	res.Regions = make([]RegionResult, len(t.Regions))
	res.Status = Refreshed
	for i, region := range t.Regions {
		rr := RegionResult{Cloud: t.Cloud, Region: region, Took: took}
		rerr := regionErrs[region]
		if callErr != nil {
			// An error not tied to a region may have touched any of them.
			rerr = callErr
		}
		saveStart := time.Now()
		res.Regions[i] = r.merge(ctx, rr, byRegion[region], rerr)
		res.Regions[i].Took += time.Since(saveStart)
		delete(byRegion, region)
		if res.Regions[i].Status == Failed {
			res.Status = Failed
		}
		r.opt.Progress.RegionDone(res.Regions[i])
	}
	for region, stray := range byRegion {
		r.opt.Logger.Warn("dropping offers of a region that was not asked for", "cloud", t.Cloud, "region", region, "offers", len(stray))
	}
	return res
}

// splitErrors sorts a source's error into per-region errors (each
// *providers.RegionError for a region asked for) and the rest, which
// concerns the whole call.
func splitErrors(err error, regions []string) (map[string]error, error) {
	perRegion := map[string]error{}
	var rest []error
	for _, e := range leaves(err) {
		var re *providers.RegionError
		if errors.As(e, &re) && slices.Contains(regions, re.Region) {
			perRegion[re.Region] = errors.Join(perRegion[re.Region], e)
			continue
		}
		rest = append(rest, e)
	}
	return perRegion, errors.Join(rest...)
}

// leaves flattens errors.Join trees.
func leaves(err error) []error {
	if err == nil {
		return nil
	}
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		var out []error
		for _, e := range j.Unwrap() {
			out = append(out, leaves(e)...)
		}
		return out
	}
	return []error{err}
}

// build calls the factory, turning a panic into an error.
func (r *run) build(ctx context.Context, t Target) (src OfferSource, err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("building the %s price source panicked: %v", t.Cloud, p)
			r.opt.Logger.Error("price source panicked", "cloud", t.Cloud, "stack", string(debug.Stack()))
		}
	}()
	src, err = t.Factory(ctx, SourceConfig{Regions: slices.Clone(t.Regions), Concurrency: r.opt.Concurrency, Logger: r.opt.Logger.With("cloud", string(t.Cloud)),
		Endpoints: r.opt.Endpoints})
	if err == nil && src == nil {
		err = fmt.Errorf("the %s price source factory returned nothing", t.Cloud)
	}
	return src, err
}

// merge decides what one region's answer does to the store.
func (r *run) merge(ctx context.Context, res RegionResult, offers []pricing.Offer, err error) RegionResult {
	valid := r.validate(res.Cloud, res.Region, offers, &res)
	res.Offers = len(valid)
	switch {
	case err != nil:
		// A failed region's offers may be partial (say, on-demand prices
		// without spot prices); writing them would overwrite good data.
		res.Status, res.Err = Failed, err
		if len(valid) > 0 {
			r.opt.Logger.Warn("discarding a failed region's partial offers", "cloud", res.Cloud, "region", res.Region, "offers", len(valid))
		}
		return r.kept(ctx, res)
	case len(valid) == 0:
		res.Status = Empty
		return r.kept(ctx, res)
	}
	saved, err := r.st.SaveOffers(ctx, res.Cloud, res.Region, valid, r.opt.Now())
	if err != nil {
		res.Status, res.Err = Failed, err
		return r.kept(ctx, res)
	}
	res.Status, res.Saved = Refreshed, saved
	return res
}

// fetch asks the source for all regions at once, turning a panic into an
// error.
func (r *run) fetch(ctx context.Context, src OfferSource, regions []string) (offers []pricing.Offer, err error) {
	ctx, cancel := context.WithTimeout(ctx, r.opt.FetchTimeout)
	defer cancel()
	defer func() {
		if p := recover(); p != nil {
			offers, err = nil, fmt.Errorf("price source panicked: %v", p)
			r.opt.Logger.Error("price source panicked", "cloud", src.Cloud(), "stack", string(debug.Stack()))
		}
	}()
	return src.Offers(ctx, providers.Query{Regions: slices.Clone(regions), GPUs: r.opt.GPUs})
}

// validate keeps the offers that belong to the region and pass
// Offer.Validate; of duplicates it keeps the newest observation.
func (r *run) validate(cloud pricing.Cloud, region string, offers []pricing.Offer, res *RegionResult) []pricing.Offer {
	out := make([]pricing.Offer, 0, len(offers))
	at := make(map[string]int, len(offers))
	for _, o := range offers {
		err := o.Validate()
		if err == nil && (o.Cloud != cloud || o.Region != region) {
			err = fmt.Errorf("offer %s was returned for %s %s", o.Key(), cloud, region)
		}
		if err != nil {
			res.Dropped++
			if res.Dropped <= 3 {
				r.opt.Logger.Warn("dropping an invalid offer", "cloud", cloud, "region", region, "err", err)
			}
			continue
		}
		if i, dup := at[o.Key()]; dup {
			res.Dropped++
			if o.ObservedAt.After(out[i].ObservedAt) {
				out[i] = o
			}
			continue
		}
		at[o.Key()] = len(out)
		out = append(out, o)
	}
	return out
}

// kept fills in how many stored offers a region keeps.
func (r *run) kept(ctx context.Context, res RegionResult) RegionResult {
	n, err := r.st.CountOffers(context.WithoutCancel(ctx), res.Cloud, res.Region)
	if err != nil {
		r.opt.Logger.Warn("counting kept offers", "cloud", res.Cloud, "region", res.Region, "err", err)
	}
	res.Kept = n
	return res
}

type nopProgress struct{}

func (nopProgress) CloudStarted(pricing.Cloud, int) {}
func (nopProgress) RegionDone(RegionResult)         {}
func (nopProgress) CloudDone(CloudResult)           {}
