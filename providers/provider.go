// Package providers holds what the cloud adapters share: the query they
// answer and the errors callers act on. Each cloud lives in its own
// sub-package (aws, gcp, azure), and fake is a simulated cloud for tests.
// Adapters turn cloud API responses into pricing.Offer values; they know
// nothing of policies or plans.
package providers

import (
	"errors"
	"fmt"
	"net/url"
	"strings"

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

// Endpoints overrides where the price sources send requests, for users
// behind a proxy or on private endpoints; empty fields keep each cloud's
// public endpoint. AWS's EC2 and Pricing endpoints come from the SDK's own
// AWS_ENDPOINT_URL_EC2 / AWS_ENDPOINT_URL_PRICING (or AWS_ENDPOINT_URL).
type Endpoints struct {
	// GCPCompute and GCPBilling are the Compute Engine and Cloud Billing
	// API base URLs (https://compute.googleapis.com,
	// https://cloudbilling.googleapis.com).
	GCPCompute string
	GCPBilling string
	// AzureResourceManager is the ARM base URL (https://management.azure.com).
	AzureResourceManager string
	// AzureRetailPrices is the Retail Prices API URL
	// (https://prices.azure.com/api/retail/prices).
	AzureRetailPrices string
	// AWSSpotAdvisor is the Spot Advisor JSON URL
	// (https://spot-bid-advisor.s3.amazonaws.com/spot-advisor-data.json).
	AWSSpotAdvisor string
}

// EndpointVars are the environment variables that set Endpoints, in the
// order of EndpointFields.
var EndpointVars = []string{
	"GPUBROKER_GCP_COMPUTE_ENDPOINT", "GPUBROKER_GCP_BILLING_ENDPOINT",
	"GPUBROKER_AZURE_RESOURCE_MANAGER_ENDPOINT", "GPUBROKER_AZURE_RETAIL_PRICES_URL",
	"GPUBROKER_AWS_SPOT_ADVISOR_URL",
}

// Fields returns pointers to the fields, in the order of EndpointVars and
// of the config file keys (gcp_compute, gcp_billing,
// azure_resource_manager, azure_retail_prices, aws_spot_advisor).
func (e *Endpoints) Fields() []*string {
	return []*string{&e.GCPCompute, &e.GCPBilling, &e.AzureResourceManager, &e.AzureRetailPrices, &e.AWSSpotAdvisor}
}

// EndpointKeys are the config file keys under "endpoints:", in field order.
var EndpointKeys = []string{"gcp_compute", "gcp_billing", "azure_resource_manager", "azure_retail_prices", "aws_spot_advisor"}

// CheckEndpoint accepts an absolute http or https URL with a host.
func CheckEndpoint(raw string) error {
	u, err := url.Parse(raw)
	if err != nil {
		return fmt.Errorf("%q is not a URL: %w", raw, err)
	}
	if (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
		return fmt.Errorf("%q: want an absolute http(s) URL such as https://proxy.example:8443", raw)
	}
	if u.User != nil {
		return errors.New("endpoint URLs must not carry credentials")
	}
	return nil
}

// FromEnv fills the fields of e that are empty from the
// environment (lookup is os.LookupEnv outside tests); a bad URL is an
// error naming the variable.
func (e *Endpoints) FromEnv(lookup func(string) (string, bool)) error {
	for i, f := range e.Fields() {
		if *f != "" {
			continue
		}
		v, ok := lookup(EndpointVars[i])
		if !ok || strings.TrimSpace(v) == "" {
			continue
		}
		v = strings.TrimSpace(v)
		if err := CheckEndpoint(v); err != nil {
			return fmt.Errorf("%s: %w", EndpointVars[i], err)
		}
		*f = v
	}
	return nil
}
