//go:build !agentonly

package main

import (
	"github.com/gpubroker/gpubroker/policy"
	"github.com/gpubroker/gpubroker/pricing"
)

// policyScope reads the clouds and region globs a policy file allows, which
// is all `catalog refresh -f` needs from it. The whole file is validated, so
// a broken policy is reported with file:line:col before anything is fetched.
func policyScope(path string) ([]pricing.Cloud, []string, error) {
	p, err := policy.Load(path)
	if err != nil {
		return nil, nil, err
	}
	return p.Clouds, p.Regions, nil
}
