package aws

import (
	"context"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/aws"
	awspricing "github.com/aws/aws-sdk-go-v2/service/pricing"
	pricingtypes "github.com/aws/aws-sdk-go-v2/service/pricing/types"

	"github.com/gpubroker/gpubroker/providers/aws/internal/awsdoc"
)

// onDemandFilters select Linux, shared-tenancy, no-extra-software, used
// capacity: the plain on-demand hourly price. The GPU families are picked
// client-side from instanceType, because the Price List has no attribute
// naming the family that all of them share reliably.
func onDemandFilters(region string) []pricingtypes.Filter {
	f := func(field, value string) pricingtypes.Filter {
		return pricingtypes.Filter{Type: pricingtypes.FilterTypeTermMatch, Field: aws.String(field), Value: aws.String(value)}
	}
	return []pricingtypes.Filter{
		f("regionCode", region),
		f("operatingSystem", "Linux"),
		f("tenancy", "Shared"),
		f("preInstalledSw", "NA"),
		f("capacitystatus", "Used"),
	}
}

// onDemandPrices returns the on-demand $/h per GPU instance type in region.
// Pages are handled one at a time and each PriceList document is decoded on
// its own, so memory holds one page plus the (small) result, however many
// products the region has.
func (s *Source) onDemandPrices(ctx context.Context, region string) (map[string]float64, error) {
	in := &awspricing.GetProductsInput{
		ServiceCode:   aws.String("AmazonEC2"),
		FormatVersion: aws.String("aws_v1"),
		Filters:       onDemandFilters(region),
		MaxResults:    aws.Int32(100),
	}
	idx := awsdoc.NewPriceIndex(region, isGPUFamily)
	p := awspricing.NewGetProductsPaginator(s.pricing, in)
	for page := 1; p.HasMorePages(); page++ {
		out, err := p.NextPage(ctx)
		if err != nil {
			return nil, err
		}
		for i, doc := range out.PriceList {
			if err := idx.Add(doc); err != nil {
				return nil, fmt.Errorf("page %d, PriceList item %d: %w", page, i+1, err)
			}
		}
	}
	return idx.Prices, nil
}
