package main

import (
	"fmt"
	"os"

	"go.yaml.in/yaml/v3"

	"github.com/gpubroker/gpubroker/pricing"
)

// policyScope reads the clouds and region globs a policy file allows, which
// is all `catalog refresh -f` needs from it.
//
// TODO(lead): once the policy package is merged, replace the body with
// policy.Load(path) and return p.Clouds, p.Regions (it validates the whole
// file with file:line:col errors). Until then this reads the two top-level
// keys only.
func policyScope(path string) ([]pricing.Cloud, []string, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, nil, err
	}
	var doc struct {
		Clouds  []string `yaml:"clouds"`
		Regions []string `yaml:"regions"`
	}
	if err := yaml.Unmarshal(data, &doc); err != nil {
		return nil, nil, fmt.Errorf("%s: %w", path, err)
	}
	var clouds []pricing.Cloud
	for _, c := range doc.Clouds {
		cl, err := pricing.ParseCloud(c)
		if err != nil {
			return nil, nil, fmt.Errorf("%s: clouds: %w", path, err)
		}
		clouds = append(clouds, cl)
	}
	return clouds, doc.Regions, nil
}
