package aws

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
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
	"github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/aws/smithy-go"
	"golang.org/x/sync/errgroup"

	"github.com/gpubroker/gpubroker/pricing"
	"github.com/gpubroker/gpubroker/providers"
)

// Allocation strategies of CreateFleet accepted in ComputeConfig.
const (
	// DefaultSpotStrategy lets EC2 pick, among the overrides, the pool with
	// the best mix of low price and deep capacity (AWS's recommended
	// default, and Karpenter's).
	DefaultSpotStrategy = string(types.SpotAllocationStrategyPriceCapacityOptimized)
	// DefaultOnDemandStrategy takes the cheapest override with capacity.
	DefaultOnDemandStrategy = string(types.FleetOnDemandAllocationStrategyLowestPrice)
)

// ComputeConfig configures a Compute. Regions is required; the rest has
// usable defaults.
type ComputeConfig struct {
	// Regions maps each region instances may be launched in to its launch
	// settings (AMIs, security groups and subnets are regional).
	Regions map[string]RegionLaunch
	// InstanceProfile is the IAM instance profile (name or ARN) given to
	// instances when the adapter manages the launch template; optional.
	InstanceProfile string
	// KeyName is an EC2 key pair for SSH; optional.
	KeyName string
	// SpotStrategy and OnDemandStrategy are CreateFleet allocation
	// strategies. Use "capacity-optimized-prioritized" (spot) or
	// "prioritized" (on-demand) to make EC2 honour the plan's ranking
	// strictly; the defaults trade rank for price and capacity depth.
	SpotStrategy, OnDemandStrategy string

	// EC2Endpoint overrides the EC2 endpoint (VPC endpoint, proxy, test
	// server). Empty leaves the SDK's resolution, which honours
	// AWS_ENDPOINT_URL_EC2 and AWS_ENDPOINT_URL.
	EC2Endpoint string
	// AWS, when set, is used instead of the default configuration chain.
	AWS *aws.Config
	// HTTPClient carries every request; nil means the SDK's default.
	HTTPClient *http.Client
	Logger     *slog.Logger
	Now        func() time.Time
	// MaxAttempts per call (default 5) and MaxBackoff per wait (default
	// 20 s) tune the SDK's standard retryer.
	MaxAttempts int
	MaxBackoff  time.Duration
	// MaxConcurrency bounds the regions listed at once (default 4).
	MaxConcurrency int
}

// RegionLaunch is how instances start in one region: either an existing
// launch template, or the parts from which the adapter makes one.
type RegionLaunch struct {
	// LaunchTemplateID or LaunchTemplateName names a template you manage;
	// LaunchTemplateVersion defaults to "$Default". With a template,
	// ImageID and SecurityGroupIDs must be empty (the template has them).
	LaunchTemplateID      string
	LaunchTemplateName    string
	LaunchTemplateVersion string
	// ImageID is the AMI (ami-…); SecurityGroupIDs (sg-…) at least one.
	ImageID          string
	SecurityGroupIDs []string
	// Subnets maps availability zone → subnet (subnet-…). A candidate in a
	// zone without a subnet is skipped; a candidate without a zone may go
	// to any of them.
	Subnets map[string]string
	// SubnetIDs is the short form: subnets whose zones NewCompute looks up
	// with DescribeSubnets (the first subnet of a zone wins). Set it or
	// Subnets.
	SubnetIDs []string
}

// ec2Compute is the part of EC2 that Compute calls.
type ec2Compute interface {
	CreateFleet(context.Context, *ec2.CreateFleetInput, ...func(*ec2.Options)) (*ec2.CreateFleetOutput, error)
	CreateLaunchTemplate(context.Context, *ec2.CreateLaunchTemplateInput, ...func(*ec2.Options)) (*ec2.CreateLaunchTemplateOutput, error)
	DescribeInstances(context.Context, *ec2.DescribeInstancesInput, ...func(*ec2.Options)) (*ec2.DescribeInstancesOutput, error)
	DescribeSubnets(context.Context, *ec2.DescribeSubnetsInput, ...func(*ec2.Options)) (*ec2.DescribeSubnetsOutput, error)
	TerminateInstances(context.Context, *ec2.TerminateInstancesInput, ...func(*ec2.Options)) (*ec2.TerminateInstancesOutput, error)
}

var (
	_ ec2Compute        = (*ec2.Client)(nil)
	_ providers.Compute = (*Compute)(nil)
)

// Compute launches, lists and terminates EC2 instances through CreateFleet
// of type instant (see docs/fleet-clouds.md for why not RunInstances). It
// is safe for concurrent use.
type Compute struct {
	cfg     ComputeConfig
	log     *slog.Logger
	clients map[string]ec2Compute

	mu        sync.Mutex
	templates map[string]*types.FleetLaunchTemplateSpecificationRequest
}

var (
	reAMI    = regexp.MustCompile(`^ami-[0-9a-f]{8,17}$`)
	reSG     = regexp.MustCompile(`^sg-[0-9a-f]{8,17}$`)
	reSubnet = regexp.MustCompile(`^subnet-[0-9a-f]{8,17}$`)
	reLT     = regexp.MustCompile(`^lt-[0-9a-f]{8,17}$`)
	reRegion = regexp.MustCompile(`^[a-z]{2}(-[a-z]+)+-\d$`)
)

// Validate reports every problem of the configuration at once, each naming
// the field and what a right value looks like. Errors wrap
// providers.ErrBadConfig.
func (c ComputeConfig) Validate() error {
	var errs []error
	bad := func(format string, a ...any) { errs = append(errs, fmt.Errorf(format, a...)) }
	if len(c.Regions) == 0 {
		bad("regions: none configured; name at least one region with its subnets and an AMI or launch template")
	}
	for _, region := range sortedKeys(c.Regions) {
		r := c.Regions[region]
		p := "regions." + region
		if !reRegion.MatchString(region) {
			bad("%s: %q is not an AWS region name such as us-east-1", p, region)
		}
		tmpl := r.LaunchTemplateID != "" || r.LaunchTemplateName != ""
		switch {
		case r.LaunchTemplateID != "" && r.LaunchTemplateName != "":
			bad("%s: set launch_template_id or launch_template_name, not both", p)
		case r.LaunchTemplateID != "" && !reLT.MatchString(r.LaunchTemplateID):
			bad("%s.launch_template_id: %q is not a template id such as lt-0abcd1234ef567890", p, r.LaunchTemplateID)
		}
		if tmpl && (r.ImageID != "" || len(r.SecurityGroupIDs) > 0) {
			bad("%s: image_id and security_group_ids come from the launch template; leave them empty", p)
		}
		if !tmpl {
			if !reAMI.MatchString(r.ImageID) {
				bad("%s.image_id: %q is not an AMI id such as ami-0abcdef1234567890 (or name a launch template)", p, r.ImageID)
			}
			if len(r.SecurityGroupIDs) == 0 {
				bad("%s.security_group_ids: none; name at least one sg-… in the subnets' VPC", p)
			}
			for _, sg := range r.SecurityGroupIDs {
				if !reSG.MatchString(sg) {
					bad("%s.security_group_ids: %q is not a security group id such as sg-0abc1234def567890", p, sg)
				}
			}
		}
		if len(r.Subnets) == 0 && len(r.SubnetIDs) == 0 {
			bad("%s.subnets: none; map each availability zone to a subnet, e.g. %sa: subnet-0abc1234def567890, or list subnet_ids", p, region)
		}
		if len(r.Subnets) > 0 && len(r.SubnetIDs) > 0 {
			bad("%s: set subnets or subnet_ids, not both", p)
		}
		for _, id := range r.SubnetIDs {
			if !reSubnet.MatchString(id) {
				bad("%s.subnet_ids: %q is not a subnet id such as subnet-0abc1234def567890", p, id)
			}
		}
		for _, zone := range sortedKeys(r.Subnets) {
			if !strings.HasPrefix(zone, region) || len(zone) <= len(region) {
				bad("%s.subnets: %q is not a zone of %s (e.g. %sa)", p, zone, region, region)
			}
			if !reSubnet.MatchString(r.Subnets[zone]) {
				bad("%s.subnets.%s: %q is not a subnet id such as subnet-0abc1234def567890", p, zone, r.Subnets[zone])
			}
		}
	}
	if c.EC2Endpoint != "" {
		if u, err := url.Parse(c.EC2Endpoint); err != nil || u.Host == "" || (u.Scheme != "https" && u.Scheme != "http") {
			bad("ec2_endpoint: %q is not a URL such as https://ec2.us-east-1.amazonaws.com", c.EC2Endpoint)
		}
	}
	switch types.SpotAllocationStrategy(c.SpotStrategy) {
	case "", types.SpotAllocationStrategyPriceCapacityOptimized, types.SpotAllocationStrategyCapacityOptimized,
		types.SpotAllocationStrategyCapacityOptimizedPrioritized, types.SpotAllocationStrategyLowestPrice,
		types.SpotAllocationStrategyDiversified:
	default:
		bad("spot_strategy: %q is not a CreateFleet spot allocation strategy (price-capacity-optimized, capacity-optimized, capacity-optimized-prioritized, lowest-price, diversified)", c.SpotStrategy)
	}
	switch types.FleetOnDemandAllocationStrategy(c.OnDemandStrategy) {
	case "", types.FleetOnDemandAllocationStrategyLowestPrice, types.FleetOnDemandAllocationStrategyPrioritized:
	default:
		bad("on_demand_strategy: %q is not lowest-price or prioritized", c.OnDemandStrategy)
	}
	if len(errs) == 0 {
		return nil
	}
	return fmt.Errorf("aws compute: %w: %w", providers.ErrBadConfig, errors.Join(errs...))
}

// NewCompute validates cfg and builds a Compute. Credentials come from the
// SDK's default chain unless cfg.AWS carries its own; none at all is an
// error wrapping providers.ErrNoCredentials.
func NewCompute(ctx context.Context, cfg ComputeConfig) (*Compute, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	var awsCfg aws.Config
	if cfg.AWS != nil {
		awsCfg = cfg.AWS.Copy()
	} else {
		var opts []func(*config.LoadOptions) error
		if cfg.HTTPClient != nil {
			opts = append(opts, config.WithHTTPClient(cfg.HTTPClient))
		}
		var err error
		if awsCfg, err = config.LoadDefaultConfig(ctx, opts...); err != nil {
			return nil, fmt.Errorf("aws compute: loading the shared configuration: %w", err)
		}
	}
	if cfg.HTTPClient != nil {
		awsCfg.HTTPClient = cfg.HTTPClient
	}
	if awsCfg.Credentials == nil {
		return nil, fmt.Errorf("aws compute: %w: no credential provider configured", providers.ErrNoCredentials)
	}
	if _, err := awsCfg.Credentials.Retrieve(ctx); err != nil {
		return nil, fmt.Errorf("aws compute: %w in the default chain: %v", providers.ErrNoCredentials, err)
	}
	attempts := cmp(cfg.MaxAttempts, DefaultMaxAttempts)
	backoff := cfg.MaxBackoff
	if backoff <= 0 {
		backoff = DefaultMaxBackoff
	}
	awsCfg.RetryMaxAttempts = attempts
	awsCfg.Retryer = func() aws.Retryer { return newComputeRetryer(attempts, backoff) }
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.SpotStrategy == "" {
		cfg.SpotStrategy = DefaultSpotStrategy
	}
	if cfg.OnDemandStrategy == "" {
		cfg.OnDemandStrategy = DefaultOnDemandStrategy
	}
	cfg.MaxConcurrency = cmp(cfg.MaxConcurrency, DefaultMaxConcurrency)
	c := &Compute{
		cfg:       cfg,
		log:       cfg.Logger.With("cloud", "aws"),
		clients:   map[string]ec2Compute{},
		templates: map[string]*types.FleetLaunchTemplateSpecificationRequest{},
	}
	// The caller's map is not modified: zones found for SubnetIDs go into
	// a copy.
	c.cfg.Regions = make(map[string]RegionLaunch, len(cfg.Regions))
	for region, rl := range cfg.Regions {
		c.clients[region] = ec2.NewFromConfig(awsCfg, func(o *ec2.Options) {
			o.Region = region
			if cfg.EC2Endpoint != "" {
				o.BaseEndpoint = aws.String(cfg.EC2Endpoint)
			}
		})
		if len(rl.SubnetIDs) > 0 {
			zones, err := c.subnetZones(ctx, region, rl.SubnetIDs)
			if err != nil {
				return nil, fmt.Errorf("aws compute: regions.%s.subnet_ids: %w", region, err)
			}
			rl.Subnets = zones
		}
		c.cfg.Regions[region] = rl
	}
	return c, nil
}

// subnetZones maps each zone of the given subnets to the first of them in
// it, through DescribeSubnets.
func (c *Compute) subnetZones(ctx context.Context, region string, ids []string) (map[string]string, error) {
	out, err := c.clients[region].DescribeSubnets(ctx, &ec2.DescribeSubnetsInput{SubnetIds: ids})
	if err != nil {
		_, mapped := mapErr(err)
		return nil, fmt.Errorf("DescribeSubnets: %w", mapped)
	}
	byID := map[string]string{}
	for _, s := range out.Subnets {
		byID[aws.ToString(s.SubnetId)] = aws.ToString(s.AvailabilityZone)
	}
	zones := map[string]string{}
	for _, id := range ids {
		z, ok := byID[id]
		if !ok || z == "" {
			return nil, fmt.Errorf("%w: subnet %s not found in %s", providers.ErrBadConfig, id, region)
		}
		if prev, dup := zones[z]; dup {
			c.log.Warn("two subnets in one zone; using the first", "zone", z, "used", prev, "ignored", id)
			continue
		}
		zones[z] = id
	}
	return zones, nil
}

// newComputeRetryer is the SDK's standard retryer, except that errors the
// fleet acts on are returned at once. EC2 answers InsufficientInstanceCapacity
// with HTTP 500, which the standard retryer would repeat for nothing while
// the fleet could already be trying the next pool. (Every launch carries a
// client token anyway, so a repeat could never start a second instance.)
func newComputeRetryer(attempts int, backoff time.Duration) aws.Retryer {
	return retry.NewStandard(func(o *retry.StandardOptions) {
		o.MaxAttempts = attempts
		o.MaxBackoff = backoff
		o.Retryables = append([]retry.IsErrorRetryable{retry.IsErrorRetryableFunc(func(err error) aws.Ternary {
			var ae smithy.APIError
			if errors.As(err, &ae) {
				if s := mapCode(ae.ErrorCode()); s != nil && s != providers.ErrThrottled {
					return aws.FalseTernary
				}
			}
			return aws.UnknownTernary
		})}, o.Retryables...)
	})
}

// mapCode maps an EC2 error code to the sentinel the fleet acts on; nil
// when the code is none of them. Codes from
// https://docs.aws.amazon.com/AWSEC2/latest/APIReference/errors-overview.html.
func mapCode(code string) error {
	switch code {
	case "InsufficientInstanceCapacity", "InsufficientHostCapacity", "InsufficientReservedInstanceCapacity",
		"InsufficientCapacity", "UnfulfillableCapacity", "Unsupported", "SpotMaxPriceTooLow":
		return providers.ErrInsufficientCapacity
	case "MaxSpotInstanceCountExceeded", "VcpuLimitExceeded", "InstanceLimitExceeded", "MaxFleetCountExceeded",
		"MaxSpotFleetRequestCountExceeded", "InsufficientFreeAddressesInSubnet":
		return providers.ErrQuotaExceeded
	case "UnauthorizedOperation", "AuthFailure", "Blocked", "OptInRequired", "PendingVerification",
		"InvalidClientTokenId", "ExpiredToken", "RequestExpired", "SignatureDoesNotMatch":
		return providers.ErrUnauthorized
	case "RequestLimitExceeded", "Throttling", "ThrottlingException":
		return providers.ErrThrottled
	case "InvalidInstanceID.NotFound":
		return providers.ErrNotFound
	// A token reused with other parameters (user data, overrides): the
	// request must be rebuilt as it was, so retrying as is cannot help.
	case "IdempotentParameterMismatch":
		return providers.ErrBadConfig
	}
	if strings.HasPrefix(code, "Invalid") || strings.HasPrefix(code, "MissingParameter") ||
		strings.HasPrefix(code, "Unknown") {
		return providers.ErrBadConfig
	}
	return nil
}

// mapErr wraps err with its sentinel, keeping the SDK error (and its code)
// in the chain.
func mapErr(err error) (string, error) {
	var ae smithy.APIError
	if errors.As(err, &ae) {
		if s := mapCode(ae.ErrorCode()); s != nil {
			return ae.ErrorCode(), fmt.Errorf("%w: %w", s, err)
		}
		return ae.ErrorCode(), err
	}
	return "", err
}

// ClientToken turns a launch intent's token into one EC2 accepts (at most
// 64 ASCII characters), deterministically.
func ClientToken(token string) string {
	if len(token) <= 64 && isASCII(token) {
		return token
	}
	sum := sha256.Sum256([]byte(token))
	return "gpb-" + hex.EncodeToString(sum[:])[:60]
}

func isASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < 0x21 || s[i] > 0x7e {
			return false
		}
	}
	return true
}

// override is one CreateFleet override and the pool it stands for.
type override struct {
	req  types.FleetLaunchTemplateOverridesRequest
	pool providers.PoolKey
}

// Launch starts one instance with CreateFleet type instant. Every candidate
// in the first candidate's region becomes an override (in each of its
// configured subnets when it names no zone), ranked by Priority. When EC2
// starts none, the error joins one *providers.LaunchError per pool that
// failed (see providers.LaunchErrors).
func (c *Compute) Launch(ctx context.Context, req providers.LaunchRequest) (providers.Instance, error) {
	if err := providers.CheckLaunchRequest(pricing.AWS, req); err != nil {
		return providers.Instance{}, fmt.Errorf("aws launch: %w", err)
	}
	first := req.Candidates[0]
	firstPool := providers.PoolKey{Cloud: pricing.AWS, Zone: first.Zone, InstanceType: first.InstanceType, Capacity: req.Capacity}
	region := first.Region
	rl, ok := c.cfg.Regions[region]
	if !ok {
		return providers.Instance{}, &providers.LaunchError{Pool: firstPool, Code: "RegionNotConfigured",
			Err: fmt.Errorf("%w: region %s has no launch settings (configured: %s)", providers.ErrBadConfig, region, strings.Join(sortedKeys(c.cfg.Regions), ", "))}
	}
	// EC2 caps user data at 16 KiB before base64.
	if len(req.UserData) > 16<<10 {
		return providers.Instance{}, &providers.LaunchError{Pool: firstPool, Code: "UserDataTooLarge",
			Err: fmt.Errorf("%w: user data is %d bytes; EC2 takes at most 16384", providers.ErrBadConfig, len(req.UserData))}
	}
	ovs := c.overrides(req, rl)
	if len(ovs) == 0 {
		return providers.Instance{}, &providers.LaunchError{Pool: firstPool, Code: "NoSubnet",
			Err: fmt.Errorf("%w: no configured subnet in the candidates' zones of %s", providers.ErrBadConfig, region)}
	}
	spec, err := c.template(ctx, region, rl)
	if err != nil {
		code, mapped := mapErr(err)
		return providers.Instance{}, &providers.LaunchError{Pool: firstPool, Code: code, Err: fmt.Errorf("launch template: %w", mapped)}
	}
	spec.LaunchTemplateSpecificationUserData = aws.String(base64.StdEncoding.EncodeToString([]byte(req.UserData)))

	in := &ec2.CreateFleetInput{
		Type:        types.FleetTypeInstant,
		ClientToken: aws.String(ClientToken(req.ClientToken)),
		TargetCapacitySpecification: &types.TargetCapacitySpecificationRequest{
			TotalTargetCapacity: aws.Int32(1),
		},
		LaunchTemplateConfigs: []types.FleetLaunchTemplateConfigRequest{{LaunchTemplateSpecification: &spec}},
		TagSpecifications:     tagSpecs(req),
	}
	for _, o := range ovs {
		in.LaunchTemplateConfigs[0].Overrides = append(in.LaunchTemplateConfigs[0].Overrides, o.req)
	}
	if req.Capacity == pricing.Spot {
		in.TargetCapacitySpecification.DefaultTargetCapacityType = types.DefaultTargetCapacityTypeSpot
		in.SpotOptions = &types.SpotOptionsRequest{
			AllocationStrategy:           types.SpotAllocationStrategy(c.cfg.SpotStrategy),
			InstanceInterruptionBehavior: types.SpotInstanceInterruptionBehaviorTerminate,
		}
	} else {
		in.TargetCapacitySpecification.DefaultTargetCapacityType = types.DefaultTargetCapacityTypeOnDemand
		in.OnDemandOptions = &types.OnDemandOptionsRequest{AllocationStrategy: types.FleetOnDemandAllocationStrategy(c.cfg.OnDemandStrategy)}
	}
	out, err := c.clients[region].CreateFleet(ctx, in)
	if err != nil {
		code, mapped := mapErr(err)
		return providers.Instance{}, &providers.LaunchError{Pool: firstPool, Code: code, Err: fmt.Errorf("CreateFleet: %w", mapped)}
	}
	for _, fi := range out.Instances {
		if len(fi.InstanceIds) == 0 {
			continue
		}
		zone := aws.ToString(fi.AvailabilityZone)
		if zone == "" && fi.LaunchTemplateAndOverrides != nil && fi.LaunchTemplateAndOverrides.Overrides != nil {
			zone = c.zoneOf(rl, fi.LaunchTemplateAndOverrides.Overrides)
		}
		if len(out.Errors) > 0 {
			c.log.Info("launched after other pools failed", "token", req.ClientToken, "errors", len(out.Errors))
		}
		tags := withName(req)
		return providers.Instance{
			InstanceRef:  providers.InstanceRef{Cloud: pricing.AWS, Region: region, Zone: zone, ID: fi.InstanceIds[0]},
			InstanceType: string(fi.InstanceType),
			Capacity:     req.Capacity,
			State:        providers.StatePending,
			Tags:         tags,
			LaunchedAt:   c.cfg.Now(),
		}, nil
	}
	if len(out.Errors) == 0 {
		return providers.Instance{}, &providers.LaunchError{Pool: firstPool, Code: "NoInstance",
			Err: errors.New("CreateFleet started no instance and reported no error")}
	}
	var errs []error
	seen := map[providers.PoolKey]bool{}
	for _, fe := range out.Errors {
		pool := firstPool
		if fe.LaunchTemplateAndOverrides != nil && fe.LaunchTemplateAndOverrides.Overrides != nil {
			ov := fe.LaunchTemplateAndOverrides.Overrides
			pool = providers.PoolKey{Cloud: pricing.AWS, Zone: c.zoneOf(rl, ov), InstanceType: string(ov.InstanceType), Capacity: req.Capacity}
		}
		if seen[pool] {
			continue
		}
		seen[pool] = true
		code := aws.ToString(fe.ErrorCode)
		s := mapCode(code)
		if s == nil {
			s = errors.New("launch failed")
		}
		errs = append(errs, &providers.LaunchError{Pool: pool, Code: code, Err: fmt.Errorf("%w: %s", s, aws.ToString(fe.ErrorMessage))})
	}
	// Best-ranked pool first, as the fleet reads them.
	rank := map[providers.PoolKey]int{}
	for i, o := range ovs {
		if _, ok := rank[o.pool]; !ok {
			rank[o.pool] = i
		}
	}
	sort.SliceStable(errs, func(i, j int) bool {
		return rank[errs[i].(*providers.LaunchError).Pool] < rank[errs[j].(*providers.LaunchError).Pool]
	})
	return providers.Instance{}, errors.Join(errs...)
}

func (c *Compute) overrides(req providers.LaunchRequest, rl RegionLaunch) []override {
	var out []override
	region := req.Candidates[0].Region
	add := func(o pricing.Offer, zone string) {
		subnet, ok := rl.Subnets[zone]
		if !ok {
			return
		}
		out = append(out, override{
			req: types.FleetLaunchTemplateOverridesRequest{
				InstanceType: types.InstanceType(o.InstanceType),
				SubnetId:     aws.String(subnet),
				// Lower is better; honoured by the *-prioritized strategies.
				Priority: aws.Float64(float64(len(out))),
			},
			pool: providers.PoolKey{Cloud: pricing.AWS, Zone: zone, InstanceType: o.InstanceType, Capacity: req.Capacity},
		})
	}
	for _, o := range req.Candidates {
		if o.Region != region {
			continue // CreateFleet is regional; the fleet retries other regions
		}
		if o.Zone != "" {
			add(o, o.Zone)
			continue
		}
		for _, z := range sortedKeys(rl.Subnets) {
			add(o, z)
		}
	}
	return out
}

func (c *Compute) zoneOf(rl RegionLaunch, ov *types.FleetLaunchTemplateOverrides) string {
	if z := aws.ToString(ov.AvailabilityZone); z != "" {
		return z
	}
	for z, s := range rl.Subnets {
		if s == aws.ToString(ov.SubnetId) {
			return z
		}
	}
	return ""
}

func withName(req providers.LaunchRequest) map[string]string {
	tags := make(map[string]string, len(req.Tags)+1)
	for k, v := range req.Tags {
		tags[k] = v
	}
	if _, ok := tags["Name"]; !ok && req.Name != "" {
		tags["Name"] = req.Name
	}
	return tags
}

// tagSpecs tags the instance, its volumes and the (instant) fleet record at
// creation, so nothing the launch makes is ever untagged.
func tagSpecs(req providers.LaunchRequest) []types.TagSpecification {
	tags := withName(req)
	var ts []types.Tag
	for _, k := range sortedKeys(tags) {
		ts = append(ts, types.Tag{Key: aws.String(k), Value: aws.String(tags[k])})
	}
	var out []types.TagSpecification
	for _, rt := range []types.ResourceType{types.ResourceTypeInstance, types.ResourceTypeVolume, types.ResourceTypeFleet} {
		out = append(out, types.TagSpecification{ResourceType: rt, Tags: ts})
	}
	return out
}

// template returns the launch template for region: the configured one, or
// one the adapter creates from the AMI, security groups and instance
// profile. Its name holds a hash of those settings, so a changed setting
// makes a new template and an existing one of that name is the same.
func (c *Compute) template(ctx context.Context, region string, rl RegionLaunch) (types.FleetLaunchTemplateSpecificationRequest, error) {
	version := rl.LaunchTemplateVersion
	if version == "" {
		version = "$Default"
	}
	switch {
	case rl.LaunchTemplateID != "":
		return types.FleetLaunchTemplateSpecificationRequest{LaunchTemplateId: aws.String(rl.LaunchTemplateID), Version: aws.String(version)}, nil
	case rl.LaunchTemplateName != "":
		return types.FleetLaunchTemplateSpecificationRequest{LaunchTemplateName: aws.String(rl.LaunchTemplateName), Version: aws.String(version)}, nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if t, ok := c.templates[region]; ok {
		return *t, nil
	}
	data := &types.RequestLaunchTemplateData{
		ImageId:          aws.String(rl.ImageID),
		SecurityGroupIds: slices.Clone(rl.SecurityGroupIDs),
		// IMDSv2 only; hop limit 2 so the agent in a container still
		// reaches it for spot notices.
		MetadataOptions: &types.LaunchTemplateInstanceMetadataOptionsRequest{
			HttpTokens:              types.LaunchTemplateHttpTokensStateRequired,
			HttpEndpoint:            types.LaunchTemplateInstanceMetadataEndpointStateEnabled,
			HttpPutResponseHopLimit: aws.Int32(2),
		},
	}
	if p := c.cfg.InstanceProfile; p != "" {
		data.IamInstanceProfile = &types.LaunchTemplateIamInstanceProfileSpecificationRequest{}
		if strings.HasPrefix(p, "arn:") {
			data.IamInstanceProfile.Arn = aws.String(p)
		} else {
			data.IamInstanceProfile.Name = aws.String(p)
		}
	}
	if c.cfg.KeyName != "" {
		data.KeyName = aws.String(c.cfg.KeyName)
	}
	blob, _ := json.Marshal(struct {
		AMI, Profile, Key string
		SGs               []string
	}{rl.ImageID, c.cfg.InstanceProfile, c.cfg.KeyName, rl.SecurityGroupIDs})
	sum := sha256.Sum256(blob)
	name := "gpubroker-" + hex.EncodeToString(sum[:])[:16]
	_, err := c.clients[region].CreateLaunchTemplate(ctx, &ec2.CreateLaunchTemplateInput{
		LaunchTemplateName: aws.String(name),
		ClientToken:        aws.String(name),
		LaunchTemplateData: data,
		VersionDescription: aws.String("managed by gpubroker"),
	})
	var ae smithy.APIError
	if err != nil && !(errors.As(err, &ae) && ae.ErrorCode() == "InvalidLaunchTemplateName.AlreadyExistsException") {
		return types.FleetLaunchTemplateSpecificationRequest{}, fmt.Errorf("CreateLaunchTemplate %s: %w", name, err)
	}
	t := &types.FleetLaunchTemplateSpecificationRequest{LaunchTemplateName: aws.String(name), Version: aws.String("$Default")}
	c.templates[region] = t
	return *t, nil
}

// Terminate terminates ref's instance; EBS volumes marked delete-on-
// termination (the AMI root) go with it. An instance already gone is not
// an error.
func (c *Compute) Terminate(ctx context.Context, ref providers.InstanceRef) error {
	cl, ok := c.clients[ref.Region]
	if !ok {
		return fmt.Errorf("aws terminate %s: %w: region %q not configured", ref.ID, providers.ErrBadConfig, ref.Region)
	}
	_, err := cl.TerminateInstances(ctx, &ec2.TerminateInstancesInput{InstanceIds: []string{ref.ID}})
	if err != nil {
		_, mapped := mapErr(err)
		if errors.Is(mapped, providers.ErrNotFound) {
			return nil
		}
		return fmt.Errorf("aws terminate %s in %s: %w", ref.ID, ref.Region, mapped)
	}
	return nil
}

// List returns the instances carrying every tag of f in f.Regions (all
// configured regions when empty), following every page. One failed region
// fails the whole list: a partial list would look to the fleet like lost
// instances and make it launch duplicates.
func (c *Compute) List(ctx context.Context, f providers.Filter) ([]providers.Instance, error) {
	regions := f.Regions
	if len(regions) == 0 {
		regions = sortedKeys(c.cfg.Regions)
	}
	var filters []types.Filter
	for _, k := range sortedKeys(f.Tags) {
		filters = append(filters, types.Filter{Name: aws.String("tag:" + k), Values: []string{f.Tags[k]}})
	}
	results := make([][]providers.Instance, len(regions))
	errs := make([]error, len(regions))
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(c.cfg.MaxConcurrency)
	for i, region := range regions {
		cl, ok := c.clients[region]
		if !ok {
			errs[i] = &providers.RegionError{Cloud: pricing.AWS, Region: region, Err: fmt.Errorf("%w: region not configured", providers.ErrBadConfig)}
			continue
		}
		g.Go(func() error {
			p := ec2.NewDescribeInstancesPaginator(cl, &ec2.DescribeInstancesInput{Filters: filters, MaxResults: aws.Int32(500)})
			for p.HasMorePages() {
				page, err := p.NextPage(gctx)
				if err != nil {
					_, mapped := mapErr(err)
					errs[i] = &providers.RegionError{Cloud: pricing.AWS, Region: region, Err: fmt.Errorf("DescribeInstances: %w", mapped)}
					return nil
				}
				for _, r := range page.Reservations {
					for _, in := range r.Instances {
						results[i] = append(results[i], instanceOf(region, in))
					}
				}
			}
			return nil
		})
	}
	_ = g.Wait()
	if err := errors.Join(errs...); err != nil {
		return nil, fmt.Errorf("aws list: %w", err)
	}
	var out []providers.Instance
	for _, r := range results {
		out = append(out, r...)
	}
	return out, nil
}

func instanceOf(region string, in types.Instance) providers.Instance {
	inst := providers.Instance{
		InstanceRef:  providers.InstanceRef{Cloud: pricing.AWS, Region: region, ID: aws.ToString(in.InstanceId)},
		InstanceType: string(in.InstanceType),
		Capacity:     pricing.OnDemand,
		State:        providers.StateUnknown,
		Tags:         map[string]string{},
		LaunchedAt:   aws.ToTime(in.LaunchTime),
		PrivateIP:    aws.ToString(in.PrivateIpAddress),
	}
	if in.Placement != nil {
		inst.Zone = aws.ToString(in.Placement.AvailabilityZone)
	}
	if in.InstanceLifecycle == types.InstanceLifecycleTypeSpot {
		inst.Capacity = pricing.Spot
	}
	if in.State != nil {
		switch in.State.Name {
		case types.InstanceStateNamePending:
			inst.State = providers.StatePending
		case types.InstanceStateNameRunning:
			inst.State = providers.StateRunning
		case types.InstanceStateNameStopping:
			inst.State = providers.StateStopping
		case types.InstanceStateNameStopped:
			inst.State = providers.StateStopped
		// shutting-down only ever ends in terminated: the fleet may
		// replace the instance now rather than a poll later.
		case types.InstanceStateNameShuttingDown, types.InstanceStateNameTerminated:
			inst.State = providers.StateTerminated
		}
	}
	for _, t := range in.Tags {
		inst.Tags[aws.ToString(t.Key)] = aws.ToString(t.Value)
	}
	return inst
}
