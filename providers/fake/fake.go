// Package fake is a simulated cloud price source with the same contract as
// providers/aws, gcp and azure (New, Cloud, Offers), for tests and for
// `gpubroker simulate`. It answers from offers set per region and has public
// knobs to make it fail (NextErr, per-region errors), to slow it down, and to
// count and inspect calls.
package fake

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sort"
	"sync"
	"time"

	"github.com/gpubroker/gpubroker/pricing"
	"github.com/gpubroker/gpubroker/providers"
)

// Config configures a fake cloud, mirroring the real adapters' Config.
type Config struct {
	// Cloud is the cloud the fake pretends to be; default aws.
	Cloud pricing.Cloud
	// Regions limits the regions the fake knows; empty means those it has
	// offers for.
	Regions []string
	Logger  *slog.Logger
	// Now stamps offers without an observed-at time; default time.Now.
	Now func() time.Time
	// NoCredentials makes New fail like a real adapter without credentials.
	NoCredentials bool
	// MaxConcurrency bounds the regions one Offers call works on at once,
	// like the real adapters' option of that name; default 4.
	MaxConcurrency int
}

// Source is a fake cloud. It is safe for concurrent use.
type Source struct {
	cloud   pricing.Cloud
	now     func() time.Time
	log     *slog.Logger
	maxConc int

	mu          sync.Mutex
	offers      map[string][]pricing.Offer
	regionErrs  map[string]regionFailure
	nextErr     error
	delay       time.Duration
	calls       int
	queries     []providers.Query
	inFlight    int
	maxInFlight int
}

type regionFailure struct {
	err     error
	partial []pricing.Offer
}

// New returns a fake cloud; with cfg.NoCredentials it fails with an error
// wrapping providers.ErrNoCredentials.
func New(_ context.Context, cfg Config) (*Source, error) {
	if cfg.Cloud == "" {
		cfg.Cloud = pricing.AWS
	}
	if cfg.NoCredentials {
		return nil, fmt.Errorf("fake %s: %w (simulated)", cfg.Cloud, providers.ErrNoCredentials)
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.MaxConcurrency <= 0 {
		cfg.MaxConcurrency = 4
	}
	s := &Source{cloud: cfg.Cloud, now: cfg.Now, log: cfg.Logger, maxConc: cfg.MaxConcurrency}
	s.Reset()
	for _, r := range cfg.Regions {
		s.offers[r] = nil
	}
	return s, nil
}

// FromCatalog returns a fake cloud answering with cat's offers of cloud,
// grouped by region (e.g. the embedded snapshot).
func FromCatalog(ctx context.Context, cloud pricing.Cloud, cat *pricing.Catalog) (*Source, error) {
	s, err := New(ctx, Config{Cloud: cloud})
	if err != nil {
		return nil, err
	}
	for _, o := range cat.Query(pricing.Query{Clouds: []pricing.Cloud{cloud}}) {
		o.ObservedAt = time.Time{}
		o.Source = "fake"
		s.offers[o.Region] = append(s.offers[o.Region], o)
	}
	return s, nil
}

// Cloud returns the cloud the fake pretends to be.
func (s *Source) Cloud() pricing.Cloud { return s.cloud }

// SetOffers makes region answer with offers (none: the region answers with
// an empty list). Offers without an observed-at are stamped at call time.
func (s *Source) SetOffers(region string, offers ...pricing.Offer) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.offers[region] = append([]pricing.Offer(nil), offers...)
}

// FailRegion makes region fail with err (wrapped in a *providers.RegionError)
// on every call until Reset or FailRegion(region, nil); partial offers are
// returned alongside the error, as a real adapter may.
func (s *Source) FailRegion(region string, err error, partial ...pricing.Offer) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err == nil {
		delete(s.regionErrs, region)
		return
	}
	s.regionErrs[region] = regionFailure{err: err, partial: partial}
}

// NextErr makes the next Offers call fail with err and return no offers.
func (s *Source) NextErr(err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.nextErr = err
}

// SetDelay makes each region of an Offers call take d (or until the call's
// context ends, which fails the whole call).
func (s *Source) SetDelay(d time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.delay = d
}

// Calls is how many times Offers was called.
func (s *Source) Calls() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.calls
}

// Queries returns the queries Offers was called with, in call order.
func (s *Source) Queries() []providers.Query {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.queries)
}

// MaxInFlight is the most regions that were being fetched at the same time,
// over all calls.
func (s *Source) MaxInFlight() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.maxInFlight
}

// Reset forgets all offers, errors, delays and counters.
func (s *Source) Reset() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.offers = make(map[string][]pricing.Offer)
	s.regionErrs = make(map[string]regionFailure)
	s.nextErr, s.delay, s.calls, s.queries, s.inFlight, s.maxInFlight = nil, 0, 0, nil, 0, 0
}

// ErrUnknownRegion is wrapped in the RegionError for a region the fake does
// not know.
var ErrUnknownRegion = errors.New("unknown region")

// Offers answers like a real adapter: the offers of every region in q (all
// known regions when q.Regions is empty) matching q.GPUs, and errors.Join of
// a *providers.RegionError per failed region. Regions are worked on
// concurrently, at most MaxConcurrency at once, each taking the delay.
func (s *Source) Offers(ctx context.Context, q providers.Query) ([]pricing.Offer, error) {
	s.mu.Lock()
	s.calls++
	s.queries = append(s.queries, q)
	delay, nextErr := s.delay, s.nextErr
	s.nextErr = nil
	regions := q.Regions
	if len(regions) == 0 {
		for r := range s.offers {
			regions = append(regions, r)
		}
		sort.Strings(regions)
	}
	s.mu.Unlock()
	if nextErr != nil {
		return nil, nextErr
	}

	results := make([][]pricing.Offer, len(regions))
	errs := make([]error, len(regions))
	sem := make(chan struct{}, s.maxConc)
	var wg sync.WaitGroup
	for i, r := range regions {
		wg.Go(func() {
			select {
			case sem <- struct{}{}:
			case <-ctx.Done():
				return
			}
			defer func() { <-sem }()
			results[i], errs[i] = s.region(ctx, r, q, delay)
		})
	}
	wg.Wait()
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("fake %s: %w", s.cloud, err)
	}
	var out []pricing.Offer
	for _, r := range results {
		out = append(out, r...)
	}
	return out, errors.Join(errs...)
}

// region answers for one region after the delay.
func (s *Source) region(ctx context.Context, r string, q providers.Query, delay time.Duration) ([]pricing.Offer, error) {
	s.mu.Lock()
	s.inFlight++
	s.maxInFlight = max(s.maxInFlight, s.inFlight)
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		s.inFlight--
		s.mu.Unlock()
	}()
	if delay > 0 {
		t := time.NewTimer(delay)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, ctx.Err()
		case <-t.C:
		}
	}

	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.now()
	var err error
	list, known := s.offers[r]
	if f, failed := s.regionErrs[r]; failed {
		err = &providers.RegionError{Cloud: s.cloud, Region: r, Err: f.err}
		list = f.partial
	} else if !known {
		return nil, &providers.RegionError{Cloud: s.cloud, Region: r, Err: ErrUnknownRegion}
	}
	var out []pricing.Offer
	for _, o := range list {
		if len(q.GPUs) > 0 && !slices.Contains(q.GPUs, o.GPU) {
			continue
		}
		if o.ObservedAt.IsZero() {
			o.ObservedAt = now
		}
		if o.Source == "" {
			o.Source = "fake"
		}
		out = append(out, o)
	}
	return out, err
}
