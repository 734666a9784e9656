// Package aws gathers live GPU offers from Amazon EC2 through aws-sdk-go-v2.
//
// One refresh of a region joins four sources into pricing.Offer values:
//
//	ec2.DescribeInstanceTypes    GPU model, count, memory, vCPUs  (required)
//	pricing.GetProducts          on-demand $/h (Linux, shared)    (required)
//	ec2.DescribeSpotPriceHistory current spot $/h per zone        (required)
//	Spot Advisor JSON            interruption-frequency bucket    (optional)
//	ec2.GetSpotPlacementScores   placement score 1-10 per zone    (optional)
//
// A region whose required calls fail is reported as a *providers.RegionError
// and contributes no offers, so a caller merging results never replaces good
// data with a partial region. Optional enrichments degrade to "unknown" with
// a log line. Every paginated call follows every page; throttling and 5xx
// answers are retried by the SDK's standard retryer (exponential backoff with
// jitter). See docs/providers/aws.md for permissions, cost and refresh rate.
//
// Compute (compute.go) launches, lists and terminates instances for the
// fleet through EC2 CreateFleet of type instant, DescribeInstances and
// TerminateInstances; see docs/fleet-clouds.md.
package aws
