package aws

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/aws/smithy-go"

	"github.com/gpubroker/gpubroker/pricing"
	"github.com/gpubroker/gpubroker/providers/aws/internal/awsdoc"
)

// instanceType is the shape of one GPU instance type.
type instanceType struct {
	gpu          pricing.GPUModel
	gpuCount     int
	gpuMemoryGiB float64
	vcpus        float64
	memoryGiB    float64
}

// instanceTypes lists the GPU instance types offered in the client's region.
// Types whose GPU gpubroker does not know are left out with a debug line.
func (s *Source) instanceTypes(ctx context.Context, c ec2API) (map[string]instanceType, error) {
	patterns := make([]string, len(GPUFamilies))
	for i, f := range GPUFamilies {
		// "g5.*" matches g5.xlarge but not g5g.xlarge (Graviton, no NVIDIA GPU).
		patterns[i] = f + ".*"
	}
	in := &ec2.DescribeInstanceTypesInput{
		Filters:    []ec2types.Filter{{Name: aws.String("instance-type"), Values: patterns}},
		MaxResults: aws.Int32(100),
	}
	out := make(map[string]instanceType)
	p := ec2.NewDescribeInstanceTypesPaginator(c, in)
	for p.HasMorePages() {
		page, err := p.NextPage(ctx)
		if err != nil {
			return nil, err
		}
		for _, t := range page.InstanceTypes {
			name := string(t.InstanceType)
			it, ok, why := shapeOf(t)
			if !ok {
				s.log.Debug("aws: skipping instance type", "instance_type", name, "why", why)
				continue
			}
			out[name] = it
		}
	}
	return out, nil
}

// shapeOf turns EC2's description of a type into an instanceType.
func shapeOf(t ec2types.InstanceTypeInfo) (instanceType, bool, string) {
	if t.InstanceType == "" || !isGPUFamily(string(t.InstanceType)) {
		return instanceType{}, false, "not a GPU family gathered"
	}
	if t.GpuInfo == nil || len(t.GpuInfo.Gpus) == 0 {
		return instanceType{}, false, "no gpuInfo"
	}
	g := t.GpuInfo.Gpus[0]
	var memMiB int
	if g.MemoryInfo != nil && g.MemoryInfo.SizeInMiB != nil {
		memMiB = int(*g.MemoryInfo.SizeInMiB)
	}
	model, ok := pricing.NormalizeGPU(aws.ToString(g.Name), memMiB)
	if !ok {
		return instanceType{}, false, fmt.Sprintf("unknown GPU %q", aws.ToString(g.Name))
	}
	it := instanceType{gpu: model, gpuMemoryGiB: float64(memMiB) / 1024}
	for _, d := range t.GpuInfo.Gpus {
		it.gpuCount += int(aws.ToInt32(d.Count))
	}
	if it.gpuCount <= 0 {
		return instanceType{}, false, "GPU count is zero"
	}
	if t.VCpuInfo != nil {
		it.vcpus = float64(aws.ToInt32(t.VCpuInfo.DefaultVCpus))
	}
	if t.MemoryInfo != nil {
		it.memoryGiB = float64(aws.ToInt64(t.MemoryInfo.SizeInMiB)) / 1024
	}
	return it, true, ""
}

// spotPoint is the current spot price of one type in one zone.
type spotPoint struct {
	price  float64
	zoneID string
	at     time.Time
}

// spotPrices returns the current Linux spot price of each type per zone.
// With StartTime = now, EC2 returns only the price in effect now for each
// type and zone; if more than one point comes back the latest wins.
func (s *Source) spotPrices(ctx context.Context, c ec2API, types []string, now time.Time) (map[string]map[string]spotPoint, error) {
	its := make([]ec2types.InstanceType, len(types))
	for i, t := range types {
		its[i] = ec2types.InstanceType(t)
	}
	in := &ec2.DescribeSpotPriceHistoryInput{
		InstanceTypes:       its,
		ProductDescriptions: []string{"Linux/UNIX"},
		StartTime:           aws.Time(now),
		MaxResults:          aws.Int32(1000),
	}
	out := make(map[string]map[string]spotPoint)
	p := ec2.NewDescribeSpotPriceHistoryPaginator(c, in)
	for p.HasMorePages() {
		page, err := p.NextPage(ctx)
		if err != nil {
			return nil, err
		}
		for _, sp := range page.SpotPriceHistory {
			typ, zone := string(sp.InstanceType), aws.ToString(sp.AvailabilityZone)
			if typ == "" || zone == "" || sp.ProductDescription != ec2types.RIProductDescriptionLinuxUnix {
				continue
			}
			price, err := awsdoc.ParsePrice(aws.ToString(sp.SpotPrice))
			if err != nil {
				return nil, fmt.Errorf("spot price of %s in %s: %w", typ, zone, err)
			}
			pt := spotPoint{price: price, zoneID: aws.ToString(sp.AvailabilityZoneId), at: aws.ToTime(sp.Timestamp)}
			if out[typ] == nil {
				out[typ] = make(map[string]spotPoint)
			}
			if old, seen := out[typ][zone]; !seen || pt.at.After(old.at) {
				out[typ][zone] = pt
			}
		}
	}
	return out, nil
}

// placementScores maps instance type and zone ID to a score of 1-10.
type placementScores map[string]map[string]int

func (p placementScores) get(instanceType, zoneID string) int {
	if p == nil || zoneID == "" {
		return 0
	}
	return p[instanceType][zoneID]
}

// placementScores asks GetSpotPlacementScores, one instance type at a time,
// for a single-zone target of one instance across the regions that
// succeeded. The call needs ec2:GetSpotPlacementScores and is limited per
// account; where it is denied the scores stay unknown (one debug line), and
// other failures are a warning, never a region failure.
func (s *Source) placementScores(ctx context.Context, regions []regionData) placementScores {
	typeSet := map[string]bool{}
	var names []string
	for _, r := range regions {
		for t := range r.spot {
			typeSet[t] = true
		}
		if len(r.spot) > 0 {
			names = append(names, r.region)
		}
	}
	if len(names) == 0 {
		return nil
	}
	c := s.ec2Client(names[0])
	scores := placementScores{}
	var mu sync.Mutex
	var denied atomic.Bool
	var firstErr error
	sem := make(chan struct{}, s.maxConcurrency)
	var wg sync.WaitGroup
	for _, t := range sortedKeys(typeSet) {
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			if denied.Load() || ctx.Err() != nil {
				return
			}
			got, err := scoresFor(ctx, c, t, names)
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				if isAccessDenied(err) {
					if !denied.Swap(true) {
						s.log.Debug("aws: spot placement scores not allowed for these credentials; skipping them", "err", err)
					}
					return
				}
				if firstErr == nil {
					firstErr = fmt.Errorf("%s: %w", t, err)
				}
				return
			}
			scores[t] = got
		})
	}
	wg.Wait()
	if firstErr != nil {
		s.log.Warn("aws: some spot placement scores unavailable", "err", firstErr)
	}
	return scores
}

func scoresFor(ctx context.Context, c ec2API, instanceType string, regions []string) (map[string]int, error) {
	in := &ec2.GetSpotPlacementScoresInput{
		InstanceTypes:          []string{instanceType},
		RegionNames:            regions,
		SingleAvailabilityZone: aws.Bool(true),
		TargetCapacity:         aws.Int32(1),
		TargetCapacityUnitType: ec2types.TargetCapacityUnitTypeUnits,
		MaxResults:             aws.Int32(10),
	}
	out := map[string]int{}
	p := ec2.NewGetSpotPlacementScoresPaginator(c, in)
	for p.HasMorePages() {
		page, err := p.NextPage(ctx)
		if err != nil {
			return nil, err
		}
		for _, sc := range page.SpotPlacementScores {
			score := int(aws.ToInt32(sc.Score))
			if zone := aws.ToString(sc.AvailabilityZoneId); zone != "" && score >= 1 && score <= 10 {
				out[zone] = score
			}
		}
	}
	return out, nil
}

// isAccessDenied reports the errors that mean "this account or role may not
// make the call".
func isAccessDenied(err error) bool {
	var ae smithy.APIError
	if !errors.As(err, &ae) {
		return false
	}
	switch ae.ErrorCode() {
	case "AccessDenied", "AccessDeniedException", "UnauthorizedOperation", "OptInRequired":
		return true
	}
	return false
}
