package provider

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/terraform-plugin-framework/providerserver"
	"github.com/hashicorp/terraform-plugin-go/tfprotov6"
	"github.com/hashicorp/terraform-plugin-testing/helper/resource"
	"github.com/hashicorp/terraform-plugin-testing/terraform"

	"github.com/gpubroker/gpubroker/optimizer"
	"github.com/gpubroker/gpubroker/policy"
	"github.com/gpubroker/gpubroker/pricing"
	"github.com/gpubroker/gpubroker/terraform/internal/tofutest"
)

// These tests run the provider under a real OpenTofu CLI
// (terraform-plugin-testing drives it) and, online, against a real broker.
// They skip without OpenTofu, and fail under CI=true.

// factories serves the provider in process; env is its environment (so a
// developer's GPUBROKER_ENDPOINT does not leak into the offline tests).
func factories(env map[string]string) map[string]func() (tfprotov6.ProviderServer, error) {
	getenv := func(k string) string { return env[k] }
	return map[string]func() (tfprotov6.ProviderServer, error){
		"gpubroker": providerserver.NewProtocol6WithError(New(Options{Version: "test", Getenv: getenv})()),
	}
}

const header = `
terraform {
  required_providers {
    gpubroker = { source = "gpubroker/gpubroker" }
  }
}
`

func online(b tofutest.Broker) string {
	return header + fmt.Sprintf(`
provider "gpubroker" {
  endpoint = %q
  token    = %q
}
`, b.URL, b.Token)
}

func attrs(s *terraform.State, name string) (map[string]string, error) {
	r, ok := s.RootModule().Resources[name]
	if !ok {
		return nil, fmt.Errorf("%s not in state", name)
	}
	return r.Primary.Attributes, nil
}

// sortedBy checks the offers come cheapest first by key.
func sortedBy(name, key string) resource.TestCheckFunc {
	return func(s *terraform.State) error {
		a, err := attrs(s, name)
		if err != nil {
			return err
		}
		n, _ := strconv.Atoi(a["offers.#"])
		prev := -1.0
		for i := range n {
			v, err := strconv.ParseFloat(a[fmt.Sprintf("offers.%d.%s", i, key)], 64)
			if err != nil {
				return fmt.Errorf("offers.%d.%s: %v", i, key, err)
			}
			if v < prev {
				return fmt.Errorf("offers.%d.%s = %v after %v: not sorted", i, key, v, prev)
			}
			prev = v
		}
		return nil
	}
}

// expectedSpotH100 is what the embedded catalog holds for the query the
// offers tests make, computed from the catalog directly.
func expectedSpotH100(t *testing.T) (count int, cheapest float64) {
	t.Helper()
	cat, err := pricing.EmbeddedCatalog()
	if err != nil {
		t.Fatal(err)
	}
	offers := cat.Query(pricing.Query{GPUs: []pricing.GPUModel{pricing.H100}, Capacity: pricing.Spot, Regions: []string{"us-*"}})
	cheapest = math.Inf(1)
	for _, o := range offers {
		cheapest = math.Min(cheapest, o.SpotPrice/float64(o.GPUCount))
	}
	if len(offers) < 2 {
		t.Fatalf("the snapshot has %d H100 spot offers in us-*; the test needs several", len(offers))
	}
	return len(offers), cheapest
}

const offersConfig = `
data "gpubroker_offers" "h100" {
  gpu_models    = ["h100"]
  capacity_type = "spot"
  regions       = ["us-*"]
}

data "gpubroker_offers" "top3" {
  min_gpu_memory_gib = 40
  sort_by            = "tflop"
  limit              = 3
}
`

func offersChecks(t *testing.T) resource.TestCheckFunc {
	n, cheapest := expectedSpotH100(t)
	return resource.ComposeAggregateTestCheckFunc(
		resource.TestCheckResourceAttr("data.gpubroker_offers.h100", "offers.#", strconv.Itoa(n)),
		resource.TestCheckResourceAttr("data.gpubroker_offers.h100", "offers.0.gpu", "H100"),
		resource.TestCheckResourceAttr("data.gpubroker_offers.h100", "capacity", "spot"),
		resource.TestCheckResourceAttr("data.gpubroker_offers.h100", "sorted_by", "gpu-hour"),
		resource.TestCheckResourceAttr("data.gpubroker_offers.h100", "offers.0.usd_per_gpu_hour", strconv.FormatFloat(roundTo(cheapest, 6), 'f', -1, 64)),
		resource.TestCheckResourceAttrSet("data.gpubroker_offers.h100", "offers.0.spot_signal.interruptions_per_hour"),
		resource.TestCheckResourceAttrSet("data.gpubroker_offers.h100", "offers.0.observed_at"),
		resource.TestMatchResourceAttr("data.gpubroker_offers.h100", "catalog_source", regexp.MustCompile(`snapshot`)),
		sortedBy("data.gpubroker_offers.h100", "usd_per_gpu_hour"),
		resource.TestCheckResourceAttr("data.gpubroker_offers.top3", "offers.#", "3"),
		resource.TestCheckResourceAttr("data.gpubroker_offers.top3", "sorted_by", "tflop"),
		sortedBy("data.gpubroker_offers.top3", "usd_per_tflop_hour"),
	)
}

func TestAccOffersOffline(t *testing.T) {
	tofutest.AcceptanceEnv(t)
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: factories(nil),
		// Steps that must fail come first: the framework destroys with the
		// last step's configuration.
		Steps: []resource.TestStep{
			{
				Config:      header + `data "gpubroker_offers" "bad" { clouds = ["aws", "gpc"] }`,
				ExpectError: regexp.MustCompile(`(?s)Invalid filter.*clouds\s+=.*unknown\s+cloud\s+"gpc"`),
			},
			{Config: header + offersConfig, Check: offersChecks(t)},
		},
	})
}

// minimalPlacement is examples/minimal.yaml's workload as attributes.
const minimalPlacement = `
data "gpubroker_placement" "finetune" {
  name = "finetune"
  kind = "training"
  gpu  = { count = 1, min_memory_gib = 24 }
  work = { gpu_hours = 40 }
}
`

// expectedMinimal is the optimizer's placement of examples/minimal.yaml,
// planned directly.
func expectedMinimal(t *testing.T) optimizer.Placement {
	t.Helper()
	pol, err := policy.Load("../../../examples/minimal.yaml")
	if err != nil {
		t.Fatal(err)
	}
	cat, err := pricing.EmbeddedCatalog()
	if err != nil {
		t.Fatal(err)
	}
	plan, err := optimizer.Solve(optimizer.Input{Catalog: cat, Policy: pol, Now: time.Now()})
	if err != nil {
		t.Fatal(err)
	}
	return plan.Placements[0]
}

func placementChecks(t *testing.T) resource.TestCheckFunc {
	want := expectedMinimal(t)
	const n = "data.gpubroker_placement.finetune"
	return resource.ComposeAggregateTestCheckFunc(
		resource.TestCheckResourceAttr(n, "cloud", string(want.Cloud)),
		resource.TestCheckResourceAttr(n, "region", want.Region),
		resource.TestCheckResourceAttr(n, "zone", want.Zone),
		resource.TestCheckResourceAttr(n, "instance_type", want.InstanceType),
		resource.TestCheckResourceAttr(n, "gpu_model", string(want.GPU)),
		resource.TestCheckResourceAttr(n, "capacity_type", string(want.Capacity)),
		resource.TestCheckResourceAttr(n, "price_per_hour", strconv.FormatFloat(want.PricePerHour, 'f', -1, 64)),
		resource.TestCheckResourceAttr(n, "expected_hours", strconv.FormatFloat(want.ExpectedHours, 'f', -1, 64)),
		resource.TestCheckResourceAttr(n, "expected_cost", strconv.FormatFloat(want.ExpectedCost, 'f', -1, 64)),
		resource.TestCheckResourceAttr(n, "reason", strings.Join(want.Explanation, "; ")),
		resource.TestCheckResourceAttr(n, "groups.#", strconv.Itoa(len(want.Groups))),
		resource.TestCheckResourceAttrSet(n, "runner_up.reason"),
	)
}

func TestAccPlacementOffline(t *testing.T) {
	tofutest.AcceptanceEnv(t)
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: factories(nil),
		Steps: []resource.TestStep{
			{
				// A bad attribute: the policy's message, at the attribute.
				Config: header + `
data "gpubroker_placement" "bad" {
  name = "finetune"
  kind = "training"
  gpu = {
    models = ["A100-80GB", "A100-80"]
  }
  work = { gpu_hours = 40 }
}
`,
				// OpenTofu shows the block of a nested attribute; the detail
				// names the attribute.
				ExpectError: regexp.MustCompile(`(?s)Invalid workload.*in data "gpubroker_placement" "bad".*gpu.models\[1\]:\s+unknown\s+GPU\s+"A100-80";\s+did\s+you\s+mean\s+"A100-80GB"`),
			},
			{
				// Valid, but nothing finishes 10,000 GPU-hours in 2 hours.
				Config: header + `
data "gpubroker_placement" "late" {
  name     = "huge"
  kind     = "training"
  work     = { gpu_hours = 10000 }
  deadline = "2h"
}
`,
				ExpectError: regexp.MustCompile(`(?s)No feasible placement.*"huge"\s+cannot\s+be\s+placed`),
			},
			{Config: header + minimalPlacement, Check: placementChecks(t)},
		},
	})
}

func TestAccDataSourcesOnline(t *testing.T) {
	tofutest.AcceptanceEnv(t)
	b := tofutest.StartBroker(t)
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: factories(nil),
		Steps: []resource.TestStep{
			// The broker (no refresh) serves the same snapshot, so the
			// answers are the offline ones.
			{Config: online(b) + offersConfig, Check: offersChecks(t)},
			{Config: online(b) + minimalPlacement, Check: placementChecks(t)},
		},
	})
}

// api calls the broker as a user of its API (or the dashboard) would.
func api(t *testing.T, b tofutest.Broker, method, path, body string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(method, b.URL+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+b.Token)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(data)
}

// brokerSpec checks the broker holds the workload with a spec field.
func brokerSpec(t *testing.T, b tofutest.Broker, name, key, want string) resource.TestCheckFunc {
	return func(*terraform.State) error {
		code, body := api(t, b, "GET", "/api/v1/workloads/"+name, "")
		if code != 200 {
			return fmt.Errorf("GET workload %s: %d %s", name, code, body)
		}
		var rec struct{ Spec map[string]any }
		if err := json.Unmarshal([]byte(body), &rec); err != nil {
			return err
		}
		got, _ := json.Marshal(rec.Spec[key])
		if string(got) != want {
			return fmt.Errorf("broker's spec.%s = %s, want %s", key, got, want)
		}
		return nil
	}
}

func workloadConfig(b tofutest.Broker, deadline string) string {
	return online(b) + fmt.Sprintf(`
resource "gpubroker_workload" "train" {
  name     = "llm-finetune"
  team     = "research"
  kind     = "training"
  gpu      = { models = ["A100-80GB", "H100"], count = 8 }
  work     = { gpu_hours = 1200 }
  deadline = %q
  spot     = "prefer"
  placement = {
    clouds  = ["aws", "gcp"]
    regions = ["us-*"]
  }
}
`, deadline)
}

func TestAccWorkloadResource(t *testing.T) {
	tofutest.AcceptanceEnv(t)
	b := tofutest.StartBroker(t)
	const n = "gpubroker_workload.train"
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: factories(nil),
		CheckDestroy: func(*terraform.State) error {
			if code, body := api(t, b, "GET", "/api/v1/workloads/llm-finetune", ""); code != 404 {
				return fmt.Errorf("after destroy the broker answers %d %s; want 404", code, body)
			}
			return nil
		},
		Steps: []resource.TestStep{
			{
				Config: workloadConfig(b, "3d"),
				Check: resource.ComposeAggregateTestCheckFunc(
					resource.TestCheckResourceAttr(n, "id", "llm-finetune"),
					resource.TestCheckResourceAttr(n, "gpu.count", "8"),
					resource.TestCheckResourceAttr(n, "deadline", "3d"),
					resource.TestCheckResourceAttrSet(n, "created_at"),
					brokerSpec(t, b, "llm-finetune", "deadline", `"3d"`),
					brokerSpec(t, b, "llm-finetune", "gpu", `{"count":8,"models":["A100-80GB","H100"]}`),
				),
			},
			// Refresh finds no change.
			{RefreshState: true},
			// Update in place.
			{
				Config: workloadConfig(b, "96h"),
				Check: resource.ComposeAggregateTestCheckFunc(
					resource.TestCheckResourceAttr(n, "deadline", "96h"),
					brokerSpec(t, b, "llm-finetune", "deadline", `"96h"`),
				),
			},
			// Import by name gives the same state.
			{ResourceName: n, ImportState: true, ImportStateId: "llm-finetune", ImportStateVerify: true},
			// Changed through the API: the plan shows the drift...
			{
				PreConfig: func() {
					code, body := api(t, b, "PUT", "/api/v1/workloads/llm-finetune",
						`{"name":"llm-finetune","team":"research","kind":"training","spec":{"gpu":{"models":["A100-80GB","H100"],"count":4},"work":{"gpu_hours":1200},"deadline":"96h","spot":"prefer","placement":{"clouds":["aws","gcp"],"regions":["us-*"]}}}`)
					if code != 200 {
						t.Fatalf("changing the workload through the API: %d %s", code, body)
					}
				},
				Config:             workloadConfig(b, "96h"),
				PlanOnly:           true,
				ExpectNonEmptyPlan: true,
			},
			// ...and apply puts it back.
			{
				Config: workloadConfig(b, "96h"),
				Check:  brokerSpec(t, b, "llm-finetune", "gpu", `{"count":8,"models":["A100-80GB","H100"]}`),
			},
			// Deleted through the API: the plan creates it again.
			{
				PreConfig: func() {
					if code, body := api(t, b, "DELETE", "/api/v1/workloads/llm-finetune", ""); code != 204 {
						t.Fatalf("deleting through the API: %d %s", code, body)
					}
				},
				Config:             workloadConfig(b, "96h"),
				PlanOnly:           true,
				ExpectNonEmptyPlan: true,
			},
			{Config: workloadConfig(b, "96h"), Check: brokerSpec(t, b, "llm-finetune", "deadline", `"96h"`)},
			// A bad attribute is refused before anything is sent, at its path.
			{
				Config:      strings.Replace(workloadConfig(b, "96h"), `count = 8`, `count = 99999`, 1),
				ExpectError: regexp.MustCompile(`(?s)Invalid workload.*resource "gpubroker_workload" "train".*gpu.count\s+99999:\s+want\s+1\s+to\s+16384`),
			},
			// The broker still holds the last good workload.
			{Config: workloadConfig(b, "96h"), PlanOnly: true},
		},
	})
}

func TestAccWorkloadNeedsBroker(t *testing.T) {
	tofutest.AcceptanceEnv(t)
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: factories(nil),
		Steps: []resource.TestStep{{
			Config: header + `
resource "gpubroker_workload" "x" {
  name = "x"
  kind = "training"
  work = { gpu_hours = 1 }
}
`,
			ExpectError: regexp.MustCompile(`No broker configured`),
		}},
	})
}

func TestAccBudgetsOnline(t *testing.T) {
	tofutest.AcceptanceEnv(t)
	b := tofutest.StartBrokerWithPolicy(t, "../../../examples/fleet.yaml")
	code, body := api(t, b, "GET", "/api/v1/budgets", "")
	if code != 200 {
		t.Fatalf("budgets: %d %s", code, body)
	}
	var want struct {
		Budgets []struct {
			Name       string
			PlannedUSD float64 `json:"planned_usd"`
		}
	}
	if err := json.Unmarshal([]byte(body), &want); err != nil || len(want.Budgets) == 0 {
		t.Fatalf("budgets answer %s: %v", body, err)
	}
	const n = "data.gpubroker_budgets.all"
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: factories(nil),
		Steps: []resource.TestStep{
			{
				Config:      header + `data "gpubroker_budgets" "offline" {}`,
				ExpectError: regexp.MustCompile(`No broker configured`),
			},
			{
				Config: online(b) + `data "gpubroker_budgets" "all" {}`,
				Check: resource.ComposeAggregateTestCheckFunc(
					resource.TestCheckResourceAttr(n, "budgets.#", strconv.Itoa(len(want.Budgets))),
					resource.TestCheckResourceAttr(n, "budgets.0.name", want.Budgets[0].Name),
					resource.TestCheckResourceAttr(n, "budgets.0.planned_usd", strconv.FormatFloat(want.Budgets[0].PlannedUSD, 'f', -1, 64)),
					resource.TestCheckResourceAttr(n, "horizon_hours", "720"),
				),
			},
		},
	})
}

// TestAccTopLevelAttributeDiagnostic checks OpenTofu shows a top-level
// attribute's problem on that attribute's own line.
func TestAccTopLevelAttributeDiagnostic(t *testing.T) {
	tofutest.AcceptanceEnv(t)
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: factories(nil),
		Steps: []resource.TestStep{{
			Config: header + `
data "gpubroker_placement" "typo" {
  name = "finetune"
  kind = "trainin"
  work = { gpu_hours = 40 }
}
`,
			ExpectError: regexp.MustCompile(`(?s)Invalid workload.*\d+:\s+kind = "trainin".*unknown\s+kind\s+"trainin";\s+want\s+training,\s+inference\s+or\s+batch;\s+did\s+you\s+mean\s+"training"`),
		}},
	})
}

// policyKeysConfig is an autoscaled, load-profiled inference service with
// an availability goal, and a weekly multi-node training job with its own
// scaling and live spot policy: every workload key of the policy file
// beyond those workloadConfig writes.
func policyKeysConfig(b tofutest.Broker, goal string) string {
	return online(b) + fmt.Sprintf(`
resource "gpubroker_workload" "chat" {
  name        = "chat-api"
  kind        = "inference"
  gpu         = { models = ["L4"] }
  replicas    = { min = 2, max = 10, target_utilization = 0.6 }
  spot_policy = "spot-hedge"
  autoscale = {
    prometheus = {
      url                = "http://prometheus.monitoring:9090"
      query              = "sum(rate(http_requests_total{service=\"chat\"}[2m]))"
      target_per_replica = 50
    }
    scale_up_window   = "0"
    scale_down_window = "10m"
  }
  availability = { goal = %s, window = "30d" }
  load = {
    replicas_by_hour = [2, 2, 2, 2, 2, 2, 3, 4, 6, 8, 9, 10, 10, 10, 9, 8, 8, 7, 6, 5, 4, 3, 2, 2]
  }
}

resource "gpubroker_workload" "nightly" {
  name        = "weekly-finetune"
  kind        = "training"
  gpu         = { models = ["H100"], count = 16, interconnect = "required" }
  work        = { gpu_hours = 640 }
  deadline    = "2d"
  schedule    = "0 2 * * mon"
  spot_policy = "uniform-progress"
  scaling     = { intra_node = 0.97, inter_node = 0.85 }
}

resource "gpubroker_workload" "search" {
  name     = "search"
  kind     = "inference"
  gpu      = { models = ["T4"] }
  replicas = { min = 1, max = 20 }
  load = {
    requests_per_second  = [20, 15, 10, 10, 10, 15, 30, 60, 120, 150, 160, 160, 150, 150, 160, 150, 140, 120, 100, 80, 60, 40, 30, 25.5]
    requests_per_replica = 25
  }
}
`, goal)
}

func TestAccWorkloadPolicyKeys(t *testing.T) {
	tofutest.AcceptanceEnv(t)
	b := tofutest.StartBroker(t)
	const chat, nightly = "gpubroker_workload.chat", "gpubroker_workload.nightly"
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: factories(nil),
		Steps: []resource.TestStep{
			// Bad values in the new blocks are refused at their attributes,
			// and a credential in the Prometheus URL is never shown.
			{
				Config:      policyKeysConfig(b, "1.5"),
				ExpectError: regexp.MustCompile(`(?s)Invalid workload.*resource "gpubroker_workload" "chat".*availability.goal\s+1.5:\s+want\s+the\s+share\s+of\s+time\s+at\s+target,\s+above\s+0\s+and\s+below\s+1`),
			},
			{
				Config:      strings.Replace(policyKeysConfig(b, "0.995"), `"0 2 * * mon"`, `"0 2 * * mun"`, 1),
				ExpectError: regexp.MustCompile(`(?s)Invalid workload.*resource "gpubroker_workload" "nightly".*schedule:`),
			},
			{
				Config:      strings.Replace(policyKeysConfig(b, "0.995"), `[2, 2, 2, 2, 2, 2, 3,`, `[2, 2, 2, 2, 2, 3,`, 1),
				ExpectError: regexp.MustCompile(`(?s)Invalid workload.*load.replicas_by_hour\s+has\s+23\s+entries;\s+want\s+24`),
			},
			{
				Config:      strings.Replace(policyKeysConfig(b, "0.995"), `http://prometheus.monitoring`, `http://admin:hunter2@prometheus.monitoring`, 1),
				ExpectError: regexp.MustCompile(`(?s)autoscale.prometheus.url:\s+credentials\s+are\s+not\s+allowed`),
			},
			{
				Config: policyKeysConfig(b, "0.995"),
				Check: resource.ComposeAggregateTestCheckFunc(
					resource.TestCheckResourceAttr(chat, "autoscale.prometheus.url", "http://prometheus.monitoring:9090"),
					resource.TestCheckResourceAttr(chat, "load.replicas_by_hour.#", "24"),
					resource.TestCheckResourceAttr(chat, "load.replicas_by_hour.11", "10"),
					resource.TestCheckResourceAttr(nightly, "scaling.inter_node", "0.85"),
					brokerSpec(t, b, "chat-api", "autoscale", `{"prometheus":{"query":"sum(rate(http_requests_total{service=\"chat\"}[2m]))",`+
						`"target_per_replica":50,"url":"http://prometheus.monitoring:9090"},"scale_down_window":"10m","scale_up_window":"0"}`),
					brokerSpec(t, b, "chat-api", "availability", `{"goal":0.995,"window":"30d"}`),
					brokerSpec(t, b, "chat-api", "load", `{"replicas_by_hour":[2,2,2,2,2,2,3,4,6,8,9,10,10,10,9,8,8,7,6,5,4,3,2,2]}`),
					brokerSpec(t, b, "chat-api", "spot_policy", `"spot-hedge"`),
					brokerSpec(t, b, "weekly-finetune", "schedule", `"0 2 * * mon"`),
					brokerSpec(t, b, "weekly-finetune", "scaling", `{"inter_node":0.85,"intra_node":0.97}`),
					brokerSpec(t, b, "weekly-finetune", "spot_policy", `"uniform-progress"`),
					brokerSpec(t, b, "weekly-finetune", "gpu", `{"count":16,"interconnect":"required","models":["H100"]}`),
					brokerSpec(t, b, "search", "load", `{"requests_per_replica":25,"requests_per_second":`+
						`[20,15,10,10,10,15,30,60,120,150,160,160,150,150,160,150,140,120,100,80,60,40,30,25.5]}`),
				),
			},
			// Refreshed, then planned again: no changes.
			{RefreshState: true},
			{Config: policyKeysConfig(b, "0.995"), PlanOnly: true},
			// Import reads every key back as written.
			{ResourceName: chat, ImportState: true, ImportStateId: "chat-api", ImportStateVerify: true},
			{ResourceName: nightly, ImportState: true, ImportStateId: "weekly-finetune", ImportStateVerify: true},
			// The broker holds the same durations spelled differently (as
			// a dashboard or API client may write them): still no change.
			{
				PreConfig: func() {
					code, body := api(t, b, "PUT", "/api/v1/workloads/chat-api", `{"name":"chat-api","kind":"inference","spec":{"gpu":{"models":["L4"]},`+
						`"replicas":{"min":2,"max":10,"target_utilization":0.6},"spot_policy":"spot-hedge",`+
						`"autoscale":{"prometheus":{"url":"http://prometheus.monitoring:9090","query":"sum(rate(http_requests_total{service=\"chat\"}[2m]))","target_per_replica":50},`+
						`"scale_up_window":"0s","scale_down_window":"600s"},"availability":{"goal":0.995,"window":"720h"},`+
						`"load":{"replicas_by_hour":[2,2,2,2,2,2,3,4,6,8,9,10,10,10,9,8,8,7,6,5,4,3,2,2]}}}`)
					if code != 200 {
						t.Fatalf("rewriting the workload through the API: %d %s", code, body)
					}
				},
				Config:   policyKeysConfig(b, "0.995"),
				PlanOnly: true,
			},
			// A real change through the API shows, and apply puts it back.
			{
				PreConfig: func() {
					code, body := api(t, b, "PUT", "/api/v1/workloads/weekly-finetune", `{"name":"weekly-finetune","kind":"training","spec":{`+
						`"gpu":{"models":["H100"],"count":16,"interconnect":"required"},"work":{"gpu_hours":640},"deadline":"2d",`+
						`"schedule":"0 2 * * mon","spot_policy":"greedy","scaling":{"intra_node":0.97,"inter_node":0.85}}}`)
					if code != 200 {
						t.Fatalf("changing the workload through the API: %d %s", code, body)
					}
				},
				Config:             policyKeysConfig(b, "0.995"),
				PlanOnly:           true,
				ExpectNonEmptyPlan: true,
			},
			{
				Config: policyKeysConfig(b, "0.995"),
				Check:  brokerSpec(t, b, "weekly-finetune", "spot_policy", `"uniform-progress"`),
			},
		},
	})
}

// apiFormsConfig holds, in the provider's spelling, the two workloads
// TestAccWorkloadImportAPIForms registers through the API in the policy's
// other forms; zero is how it writes the durations that are 0.
func apiFormsConfig(b tofutest.Broker, zero string) string {
	return online(b) + fmt.Sprintf(`
resource "gpubroker_workload" "job" {
  name                = "api-job"
  kind                = "training"
  gpu                 = { count = 2 }
  work                = { gpu_hours = 100 }
  checkpoint_interval = %[1]q
  restart_overhead    = %[1]q
}

resource "gpubroker_workload" "svc" {
  name      = "api-svc"
  kind      = "inference"
  gpu       = { models = ["L4"] }
  replicas  = { min = 1 }
  autoscale = { scale_up_window = %[1]q, scale_down_window = %[1]q }
}
`, zero)
}

// The specs as an API or CLI user may write them: models as one string
// ("any", "L4"), the durations that may be 0 as the number 0.
const (
	apiJobSpec = `{"name":"api-job","kind":"training","spec":{"gpu":{"models":"any","count":2},"work":{"gpu_hours":100},` +
		`"checkpoint_interval":0,"restart_overhead":0}}`
	apiSvcSpec = `{"name":"api-svc","kind":"inference","spec":{"gpu":{"models":"L4"},"replicas":{"min":1},` +
		`"autoscale":{"scale_up_window":0,"scale_down_window":0}}}`
)

// TestAccWorkloadImportAPIForms checks that workloads created through the
// API in any form the policy accepts can be imported and then plan no
// changes, and that once Terraform has written them in its own spelling,
// the API writing them back in the other form shows no drift.
func TestAccWorkloadImportAPIForms(t *testing.T) {
	tofutest.AcceptanceEnv(t)
	b := tofutest.StartBroker(t)
	const job, svc = "gpubroker_workload.job", "gpubroker_workload.svc"
	put := func(name, body string) {
		if code, out := api(t, b, "PUT", "/api/v1/workloads/"+name, body); code != 200 {
			t.Fatalf("writing %s through the API: %d %s", name, code, out)
		}
	}
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: factories(nil),
		Steps: []resource.TestStep{
			// tofu import, then plan: no changes.
			{
				PreConfig: func() {
					for _, body := range []string{apiJobSpec, apiSvcSpec} {
						if code, out := api(t, b, "POST", "/api/v1/workloads", body); code != 201 {
							t.Fatalf("creating through the API: %d %s", code, out)
						}
					}
				},
				Config: apiFormsConfig(b, "0"), ResourceName: job, ImportState: true, ImportStateId: "api-job", ImportStatePersist: true,
				ImportStateCheck: func(s []*terraform.InstanceState) error {
					if len(s) != 1 || s[0].Attributes["checkpoint_interval"] != "0" || s[0].Attributes["gpu.count"] != "2" {
						return fmt.Errorf("imported %+v", s)
					}
					if _, ok := s[0].Attributes["gpu.models.#"]; ok {
						return fmt.Errorf("models any imported as a list: %v", s[0].Attributes)
					}
					return nil
				},
			},
			{Config: apiFormsConfig(b, "0"), ResourceName: svc, ImportState: true, ImportStateId: "api-svc", ImportStatePersist: true},
			{Config: apiFormsConfig(b, "0"), PlanOnly: true},
			// An import block (on a copy of the state without the
			// resource) plans the import and nothing else.
			{Config: apiFormsConfig(b, "0"), ResourceName: job, ImportState: true, ImportStateKind: resource.ImportBlockWithID, ImportStateId: "api-job"},
			{Config: apiFormsConfig(b, "0"), ResourceName: svc, ImportState: true, ImportStateKind: resource.ImportBlockWithID, ImportStateId: "api-svc"},
			// Terraform writes 0s; the API puts back 0 and "any": the same
			// values, no drift.
			{
				Config: apiFormsConfig(b, "0s"),
				Check: resource.ComposeAggregateTestCheckFunc(
					brokerSpec(t, b, "api-job", "checkpoint_interval", `"0s"`),
					brokerSpec(t, b, "api-job", "gpu", `{"count":2}`),
					brokerSpec(t, b, "api-svc", "gpu", `{"models":["L4"]}`),
				),
			},
			{
				PreConfig: func() { put("api-job", apiJobSpec); put("api-svc", apiSvcSpec) },
				Config:    apiFormsConfig(b, "0s"),
				PlanOnly:  true,
			},
			// A real change through the API still shows.
			{
				PreConfig:          func() { put("api-job", strings.Replace(apiJobSpec, `"models":"any"`, `"models":"H100"`, 1)) },
				Config:             apiFormsConfig(b, "0s"),
				PlanOnly:           true,
				ExpectNonEmptyPlan: true,
			},
		},
	})
}

// TestAccPlacementPolicyKeysOffline checks the placement data source
// passes the new keys to the optimizer: a scheduled job is costed per run,
// a load-profiled service by its profile.
func TestAccPlacementPolicyKeysOffline(t *testing.T) {
	tofutest.AcceptanceEnv(t)
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: factories(nil),
		Steps: []resource.TestStep{{
			Config: header + `
data "gpubroker_placement" "nightly" {
  name        = "nightly"
  kind        = "training"
  gpu         = { models = ["L4"] }
  work        = { gpu_hours = 4 }
  schedule    = "0 2 * * *"
  spot_policy = "greedy"
  scaling     = { intra_node = 0.9 }
}

data "gpubroker_placement" "search" {
  name         = "search"
  kind         = "inference"
  gpu          = { models = ["T4"] }
  replicas     = { min = 1, max = 8 }
  availability = { goal = 0.999, window = "7d" }
  autoscale    = { scale_down_window = "15m" }
  load = {
    replicas_by_hour = [1, 1, 1, 1, 1, 1, 2, 3, 4, 6, 8, 8, 8, 8, 8, 8, 6, 5, 4, 3, 2, 2, 1, 1]
  }
}
`,
			Check: resource.ComposeAggregateTestCheckFunc(
				resource.TestMatchResourceAttr("data.gpubroker_placement.nightly", "reason", regexp.MustCompile(`30 runs/month`)),
				resource.TestMatchResourceAttr("data.gpubroker_placement.search", "reason", regexp.MustCompile(`load profile`)),
			),
		}},
	})
}
