package aws

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"regexp"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	awspricing "github.com/aws/aws-sdk-go-v2/service/pricing"
	"github.com/aws/smithy-go/logging"

	"github.com/gpubroker/gpubroker/pricing"
	"github.com/gpubroker/gpubroker/providers"
	"github.com/gpubroker/gpubroker/providers/aws/internal/awsdoc"
)

// SourceName is the Offer.Source of every offer this package produces.
const SourceName = "aws live"

// DefaultSpotAdvisorURL is where AWS publishes the Spot Advisor data behind
// https://aws.amazon.com/ec2/spot/instance-advisor/.
const DefaultSpotAdvisorURL = "https://spot-bid-advisor.s3.amazonaws.com/spot-advisor-data.json"

// Defaults for the zero values of Config.
const (
	DefaultMaxConcurrency = 4
	// DefaultMaxAttempts is per API call, first try included. The SDK's own
	// default is 3; price refreshes are not latency-sensitive, so two more
	// tries ride out a burst of throttling instead of failing a region.
	DefaultMaxAttempts = 5
	// DefaultMaxBackoff caps one wait between tries.
	DefaultMaxBackoff = 20 * time.Second
)

// pricingRegion hosts the Price List Query API; it also answers for every
// other region (the regionCode filter selects them).
const pricingRegion = "us-east-1"

// GPUFamilies are the EC2 instance families gathered: every current NVIDIA
// GPU family sold on demand and as spot.
var GPUFamilies = []string{"g4dn", "g5", "g6", "g6e", "p3", "p3dn", "p4d", "p4de", "p5", "p5e", "p5en", "p6-b200", "p6-b300"}

// Config configures a Source. Zero values take the documented defaults.
type Config struct {
	// Regions are gathered when a Query names none. Empty means the AWS
	// regions of the embedded price snapshot.
	Regions []string
	// SpotAdvisorURL is where the Spot Advisor JSON is fetched from;
	// empty means DefaultSpotAdvisorURL.
	SpotAdvisorURL string
	// HTTPClient carries every request: SDK calls and the Spot Advisor
	// fetch. Nil means the SDK's default client and a 30 s client for the
	// Spot Advisor.
	HTTPClient *http.Client
	// Logger receives progress and degradation notes; nil discards them.
	Logger *slog.Logger
	// Now stamps Offer.ObservedAt and is the spot history's start time; nil
	// means time.Now.
	Now func() time.Time
	// EC2Endpoint and PricingEndpoint override the service endpoints (the
	// SDK's BaseEndpoint); for tests and VPC endpoints.
	EC2Endpoint, PricingEndpoint string
	// AWS, when set, is used instead of loading the default configuration
	// (its Retryer is replaced by one honouring MaxAttempts/MaxBackoff).
	AWS *aws.Config
	// MaxConcurrency bounds regions fetched at once (and placement-score
	// calls in flight). Zero means DefaultMaxConcurrency.
	MaxConcurrency int
	// MaxAttempts is the SDK retryer's attempts per call; zero means
	// DefaultMaxAttempts.
	MaxAttempts int
	// MaxBackoff caps one retry wait; zero means DefaultMaxBackoff.
	MaxBackoff time.Duration
}

// pricingAPI is the part of the Price List Query API the Source calls.
type pricingAPI interface {
	GetProducts(ctx context.Context, in *awspricing.GetProductsInput, optFns ...func(*awspricing.Options)) (*awspricing.GetProductsOutput, error)
}

// ec2API is the part of EC2 the Source calls.
type ec2API interface {
	DescribeInstanceTypes(ctx context.Context, in *ec2.DescribeInstanceTypesInput, optFns ...func(*ec2.Options)) (*ec2.DescribeInstanceTypesOutput, error)
	DescribeSpotPriceHistory(ctx context.Context, in *ec2.DescribeSpotPriceHistoryInput, optFns ...func(*ec2.Options)) (*ec2.DescribeSpotPriceHistoryOutput, error)
	GetSpotPlacementScores(ctx context.Context, in *ec2.GetSpotPlacementScoresInput, optFns ...func(*ec2.Options)) (*ec2.GetSpotPlacementScoresOutput, error)
}

var (
	_ pricingAPI = (*awspricing.Client)(nil)
	_ ec2API     = (*ec2.Client)(nil)
)

// Source gathers AWS GPU offers. It is safe for concurrent use.
type Source struct {
	log            *slog.Logger
	now            func() time.Time
	http           *http.Client
	advisorURL     string
	regions        []string
	maxConcurrency int

	pricing pricingAPI
	ec2For  func(region string) ec2API

	mu   sync.Mutex
	ec2s map[string]ec2API
}

// credentialProbeTimeout bounds the credential chain at start-up; the
// instance metadata service answers in milliseconds where it exists.
const credentialProbeTimeout = 3 * time.Second

// New builds a Source. Credentials come from the SDK's default chain
// (environment, shared config and credentials files, SSO, web identity, ECS
// and EC2 instance roles) unless cfg.AWS carries its own; when none can be
// retrieved the error wraps providers.ErrNoCredentials.
func New(ctx context.Context, cfg Config) (*Source, error) {
	var awsCfg aws.Config
	if cfg.AWS != nil {
		awsCfg = cfg.AWS.Copy()
	} else {
		// The SDK's own logger would print "falling back to IMDSv1" and the
		// like on every machine that is not an EC2 instance; errors reach
		// the caller anyway.
		opts := []func(*config.LoadOptions) error{config.WithRegion(pricingRegion), config.WithLogger(logging.Nop{})}
		if cfg.HTTPClient != nil {
			opts = append(opts, config.WithHTTPClient(cfg.HTTPClient))
		}
		var err error
		if awsCfg, err = config.LoadDefaultConfig(ctx, opts...); err != nil {
			return nil, fmt.Errorf("aws: loading the shared configuration: %w", err)
		}
	}
	if cfg.HTTPClient != nil {
		awsCfg.HTTPClient = cfg.HTTPClient
	}
	if awsCfg.Credentials == nil {
		return nil, fmt.Errorf("aws: %w: no credential provider configured", providers.ErrNoCredentials)
	}
	// Retrieve now so a missing credential is one clear line at start-up,
	// not a failure per region later. The error never contains secrets.
	// Off EC2 the chain ends probing the instance metadata service, which
	// on some networks only times out; bound the probe so a machine without
	// credentials is told so at once.
	probeCtx, cancel := context.WithTimeout(ctx, credentialProbeTimeout)
	creds, err := awsCfg.Credentials.Retrieve(probeCtx)
	cancel()
	if err != nil {
		return nil, fmt.Errorf("aws: %w in the default chain (environment, shared config/credentials files, SSO, web identity, ECS/EC2 role): %v", providers.ErrNoCredentials, err)
	}
	if !creds.HasKeys() {
		return nil, fmt.Errorf("aws: %w: the credential chain returned an empty access key", providers.ErrNoCredentials)
	}

	maxAttempts := cmp(cfg.MaxAttempts, DefaultMaxAttempts)
	maxBackoff := cfg.MaxBackoff
	if maxBackoff <= 0 {
		maxBackoff = DefaultMaxBackoff
	}
	awsCfg.RetryMaxAttempts = maxAttempts
	awsCfg.Retryer = func() aws.Retryer { return newRetryer(maxAttempts, maxBackoff) }

	s := &Source{
		log:            cfg.Logger,
		now:            cfg.Now,
		http:           cfg.HTTPClient,
		advisorURL:     cfg.SpotAdvisorURL,
		regions:        slices.Clone(cfg.Regions),
		maxConcurrency: cmp(cfg.MaxConcurrency, DefaultMaxConcurrency),
		ec2s:           make(map[string]ec2API),
	}
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	if s.now == nil {
		s.now = time.Now
	}
	if s.http == nil {
		s.http = &http.Client{Timeout: 30 * time.Second}
	}
	if s.advisorURL == "" {
		s.advisorURL = DefaultSpotAdvisorURL
	}
	if len(s.regions) == 0 {
		if s.regions, err = snapshotRegions(); err != nil {
			return nil, err
		}
	}
	s.pricing = awspricing.NewFromConfig(awsCfg, func(o *awspricing.Options) {
		o.Region = pricingRegion
		if cfg.PricingEndpoint != "" {
			o.BaseEndpoint = aws.String(cfg.PricingEndpoint)
		}
	})
	s.ec2For = func(region string) ec2API {
		return ec2.NewFromConfig(awsCfg, func(o *ec2.Options) {
			o.Region = region
			if cfg.EC2Endpoint != "" {
				o.BaseEndpoint = aws.String(cfg.EC2Endpoint)
			}
		})
	}
	return s, nil
}

// newRetryer is the SDK's standard retryer (exponential backoff with full
// jitter; throttling codes such as RequestLimitExceeded, Throttling and
// ThrottlingException, HTTP 500/502/503/504 and connection errors retried)
// with our attempt count and backoff cap.
func newRetryer(maxAttempts int, maxBackoff time.Duration) aws.Retryer {
	return retry.NewStandard(func(o *retry.StandardOptions) {
		o.MaxAttempts = maxAttempts
		o.MaxBackoff = maxBackoff
	})
}

func cmp(v, def int) int {
	if v <= 0 {
		return def
	}
	return v
}

// snapshotRegions lists the AWS regions of the embedded snapshot: the
// regions gpubroker knows about when nobody names any.
func snapshotRegions() ([]string, error) {
	c, err := pricing.EmbeddedCatalog()
	if err != nil {
		return nil, fmt.Errorf("aws: default regions from the embedded snapshot: %w", err)
	}
	seen := map[string]bool{}
	var out []string
	for _, o := range c.Query(pricing.Query{Clouds: []pricing.Cloud{pricing.AWS}}) {
		if !seen[o.Region] {
			seen[o.Region] = true
			out = append(out, o.Region)
		}
	}
	sort.Strings(out)
	return out, nil
}

// Cloud is pricing.AWS.
func (s *Source) Cloud() pricing.Cloud { return pricing.AWS }

func (s *Source) ec2Client(region string) ec2API {
	s.mu.Lock()
	defer s.mu.Unlock()
	c, ok := s.ec2s[region]
	if !ok {
		c = s.ec2For(region)
		s.ec2s[region] = c
	}
	return c
}

var regionPattern = regexp.MustCompile(`^[a-z]{2}(-[a-z]+)+-[0-9]+$`)

// regionData is what the required calls found in one region.
type regionData struct {
	region string
	types  map[string]instanceType
	// onDemand is $/h by instance type.
	onDemand map[string]float64
	// spot is the latest $/h by instance type and zone name.
	spot map[string]map[string]spotPoint
	err  error
}

// Offers gathers the offers of q.Regions (or the configured regions). It
// returns the offers of every region that succeeded together with
// errors.Join of one *providers.RegionError per failed region; the error is
// nil only when every region succeeded. Offers are sorted by key.
func (s *Source) Offers(ctx context.Context, q providers.Query) ([]pricing.Offer, error) {
	regions := q.Regions
	if len(regions) == 0 {
		regions = s.regions
	}
	regions = dedupe(regions)
	at := s.now().UTC()

	// The Spot Advisor is one document for all regions; fetch it while the
	// regions are being asked.
	var advisor *awsdoc.Advisor
	var advErr error
	advDone := make(chan struct{})
	go func() {
		defer close(advDone)
		advisor, advErr = s.fetchAdvisor(ctx)
	}()

	results := make([]regionData, len(regions))
	sem := make(chan struct{}, s.maxConcurrency)
	var wg sync.WaitGroup
	for i, r := range regions {
		wg.Go(func() {
			select {
			case sem <- struct{}{}:
			case <-ctx.Done():
				results[i] = regionData{region: r, err: ctx.Err()}
				return
			}
			defer func() { <-sem }()
			results[i] = s.fetchRegion(ctx, r, at)
		})
	}
	wg.Wait()
	<-advDone
	if advErr != nil {
		s.log.Warn("aws: spot advisor unavailable; interruption buckets unknown this refresh", "url", s.advisorURL, "err", advErr)
	}

	var errs []error
	var ok []regionData
	for _, r := range results {
		if r.err != nil {
			errs = append(errs, &providers.RegionError{Cloud: pricing.AWS, Region: r.region, Err: r.err})
			continue
		}
		ok = append(ok, r)
	}
	scores := s.placementScores(ctx, ok)

	var offers []pricing.Offer
	for _, r := range ok {
		offers = append(offers, s.assemble(r, q, advisor, scores, at)...)
	}
	sort.SliceStable(offers, func(i, j int) bool { return offers[i].Key() < offers[j].Key() })
	return offers, errors.Join(errs...)
}

func dedupe(xs []string) []string {
	seen := map[string]bool{}
	var out []string
	for _, x := range xs {
		if !seen[x] {
			seen[x] = true
			out = append(out, x)
		}
	}
	return out
}

// fetchRegion runs the required calls of one region. Any failure fails the
// region as a whole: half a region is worse than the last good one.
func (s *Source) fetchRegion(ctx context.Context, region string, at time.Time) regionData {
	rd := regionData{region: region}
	if !regionPattern.MatchString(region) {
		rd.err = fmt.Errorf("%q is not an AWS region name (want e.g. us-east-1)", region)
		return rd
	}
	start := time.Now()
	c := s.ec2Client(region)
	var err error
	if rd.types, err = s.instanceTypes(ctx, c); err != nil {
		rd.err = fmt.Errorf("describing instance types: %w", err)
		return rd
	}
	if len(rd.types) == 0 {
		s.log.Info("aws: no GPU instance types offered", "region", region)
		return rd
	}
	if rd.onDemand, err = s.onDemandPrices(ctx, region); err != nil {
		rd.err = fmt.Errorf("getting on-demand prices: %w", err)
		return rd
	}
	if rd.spot, err = s.spotPrices(ctx, c, typeNames(rd.types), at); err != nil {
		rd.err = fmt.Errorf("getting spot prices: %w", err)
		return rd
	}
	s.log.Debug("aws: region fetched", "region", region, "instance_types", len(rd.types),
		"on_demand_prices", len(rd.onDemand), "spot_types", len(rd.spot), "took", time.Since(start).Round(time.Millisecond))
	return rd
}

func typeNames(m map[string]instanceType) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// assemble joins one region's data into offers: one per zone with a spot
// price (carrying the regional on-demand price too), or one regional offer
// when the type has no spot price anywhere in the region.
func (s *Source) assemble(r regionData, q providers.Query, adv *awsdoc.Advisor, scores placementScores, at time.Time) []pricing.Offer {
	var out []pricing.Offer
	for _, name := range typeNames(r.types) {
		it := r.types[name]
		if len(q.GPUs) > 0 && !slices.Contains(q.GPUs, it.gpu) {
			continue
		}
		base := pricing.Offer{
			Cloud: pricing.AWS, Region: r.region, InstanceType: name,
			GPU: it.gpu, GPUCount: it.gpuCount, GPUMemoryGiB: it.gpuMemoryGiB,
			VCPUs: it.vcpus, MemoryGiB: it.memoryGiB,
			OnDemandPrice: r.onDemand[name],
			ObservedAt:    at, Source: SourceName,
		}
		signal := adv.Signal(r.region, name)
		zones := r.spot[name]
		if len(zones) == 0 {
			if err := base.Validate(); err == nil {
				out = append(out, base)
			}
			continue
		}
		for _, z := range sortedKeys(zones) {
			o := base
			o.Zone = z
			o.SpotPrice = zones[z].price
			o.Spot = signal
			o.Spot.PlacementScore = scores.get(name, zones[z].zoneID)
			if err := o.Validate(); err != nil {
				s.log.Debug("aws: dropping unusable offer", "err", err)
				continue
			}
			out = append(out, o)
		}
	}
	return out
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// familyOf returns the family of an instance type name ("p4d" of
// "p4d.24xlarge").
func familyOf(instanceType string) string {
	f, _, _ := strings.Cut(instanceType, ".")
	return f
}

func isGPUFamily(instanceType string) bool {
	return slices.Contains(GPUFamilies, familyOf(instanceType))
}
