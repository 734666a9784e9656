package terraform_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/gpubroker/gpubroker/terraform/internal/tofutest"
)

// buildProvider builds the provider binary into dir/bin and writes a CLI
// configuration that installs it through dev_overrides; it returns the
// configuration's path.
func buildProvider(t *testing.T, dir string) string {
	t.Helper()
	bin := filepath.Join(dir, "bin")
	build := exec.Command("go", "build", "-o", filepath.Join(bin, "terraform-provider-gpubroker"), "./cmd/terraform-provider-gpubroker")
	build.Dir = ".."
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("building the provider: %v\n%s", err, out)
	}
	// `tofu init` still asks an installation method for every provider,
	// and this machine reaches no registry: a filesystem mirror holding the
	// same binary answers it, as it would for a team sharing a build.
	mirror := filepath.Join(dir, "mirror")
	exe, err := os.ReadFile(filepath.Join(bin, "terraform-provider-gpubroker"))
	if err != nil {
		t.Fatal(err)
	}
	mirrored := filepath.Join(mirror, "registry.opentofu.org", "gpubroker", "gpubroker", "0.1.0", runtime.GOOS+"_"+runtime.GOARCH, "terraform-provider-gpubroker_v0.1.0")
	writeFile(t, mirrored, string(exe))
	if err := os.Chmod(mirrored, 0o755); err != nil {
		t.Fatal(err)
	}
	cliConfig := filepath.Join(dir, "tofurc")
	writeFile(t, cliConfig, fmt.Sprintf(`provider_installation {
  dev_overrides {
    "registry.opentofu.org/gpubroker/gpubroker" = %q
  }
  filesystem_mirror {
    path    = %q
    include = ["registry.opentofu.org/gpubroker/gpubroker"]
  }
  direct {
    exclude = ["registry.opentofu.org/gpubroker/gpubroker"]
  }
}
`, bin, mirror))
	return cliConfig
}

// tofuRunner runs tofu in a directory with an environment, failing the
// test on a non-zero exit.
func tofuRunner(t *testing.T, tofu, dir string, env []string) func(args ...string) string {
	return func(args ...string) string {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
		defer cancel()
		cmd := exec.CommandContext(ctx, tofu, args...)
		cmd.Dir, cmd.Env = dir, env
		var out bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &out
		if err := cmd.Run(); err != nil {
			t.Fatalf("tofu %s in %s: %v\n%s", strings.Join(args, " "), dir, err, out.String())
		}
		return out.String()
	}
}

// baseEnv is the environment without a developer's broker settings.
func baseEnv(extra ...string) []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "GPUBROKER_ENDPOINT=") && !strings.HasPrefix(kv, "GPUBROKER_TOKEN=") && !strings.HasPrefix(kv, "TF_") {
			env = append(env, kv)
		}
	}
	return append(append(env, "CHECKPOINT_DISABLE=1", "TF_IN_AUTOMATION=1"), extra...)
}

// TestDocExamples runs the examples the registry docs show: every data
// source example is planned offline (so its outputs are real answers), the
// provider and resource examples are validated.
func TestDocExamples(t *testing.T) {
	tofu := tofutest.Binary(t)
	tmp := t.TempDir()
	cliConfig := buildProvider(t, tmp)
	const versions = `terraform {
  required_providers {
    gpubroker = { source = "gpubroker/gpubroker" }
  }
}
`
	for _, ex := range []struct {
		dir, file string
		plan      bool
	}{
		{"examples/provider", "provider.tf", false},
		{"examples/data-sources/gpubroker_offers", "data-source.tf", true},
		{"examples/data-sources/gpubroker_placement", "data-source.tf", true},
		{"examples/resources/gpubroker_workload", "resource.tf", false},
	} {
		t.Run(ex.dir, func(t *testing.T) {
			b, err := os.ReadFile(filepath.Join(ex.dir, ex.file))
			if err != nil {
				t.Fatal(err)
			}
			work := filepath.Join(tmp, strings.ReplaceAll(ex.dir, "/", "_"))
			writeFile(t, filepath.Join(work, ex.file), string(b))
			if !strings.Contains(string(b), "required_providers") {
				writeFile(t, filepath.Join(work, "versions.tf"), versions)
			}
			run := tofuRunner(t, tofu, work, baseEnv("TF_CLI_CONFIG_FILE="+cliConfig))
			run("validate", "-no-color")
			if ex.plan {
				out := run("plan", "-input=false", "-no-color")
				if !strings.Contains(out, "Changes to Outputs") {
					t.Fatalf("plan shows no outputs:\n%s", out)
				}
			}
		})
	}
}

// TestExampleEndToEnd runs examples/terraform as a user would: the provider
// binary built with go build, installed through dev_overrides in a CLI
// configuration file, a real broker, and the real OpenTofu CLI running
// init, plan, apply, output and destroy.
func TestExampleEndToEnd(t *testing.T) {
	tofu := tofutest.Binary(t)
	tmp := t.TempDir()
	cliConfig := buildProvider(t, tmp)
	work := filepath.Join(tmp, "work")
	src := "../examples/terraform"
	entries, err := os.ReadDir(src)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if strings.HasSuffix(e.Name(), ".tf") {
			b, err := os.ReadFile(filepath.Join(src, e.Name()))
			if err != nil {
				t.Fatal(err)
			}
			writeFile(t, filepath.Join(work, e.Name()), string(b))
		}
	}
	b := tofutest.StartBroker(t)
	tofuRun := tofuRunner(t, tofu, work, baseEnv("TF_CLI_CONFIG_FILE="+cliConfig,
		"GPUBROKER_ENDPOINT="+b.URL, "GPUBROKER_TOKEN="+b.Token))
	run := func(args ...string) string {
		t.Helper()
		out := tofuRun(args...)
		if strings.Contains(out, b.Token) {
			t.Fatalf("tofu %s printed the broker token", args[0])
		}
		return out
	}
	run("init", "-input=false", "-no-color")
	plan := run("plan", "-input=false", "-no-color", "-out=tfplan")
	if !strings.Contains(plan, "gpubroker_workload.finetune will be created") {
		t.Fatalf("plan does not create the workload:\n%s", plan)
	}
	run("apply", "-input=false", "-no-color", "tfplan")

	var outputs struct {
		Cheapest  struct{ Value []string }       `json:"cheapest_a100_spot"`
		Placement struct{ Value map[string]any } `json:"finetune_placement"`
		Workload  struct{ Value string }         `json:"registered_workload"`
	}
	if err := json.Unmarshal([]byte(run("output", "-json")), &outputs); err != nil {
		t.Fatal(err)
	}
	if len(outputs.Cheapest.Value) != 3 || outputs.Workload.Value != "finetune-llama" {
		t.Fatalf("outputs: %+v", outputs)
	}
	if c, _ := outputs.Placement.Value["expected_cost"].(float64); c <= 0 || outputs.Placement.Value["instance_type"] == "" {
		t.Fatalf("placement output: %+v", outputs.Placement.Value)
	}
	if code := get(t, b, "/api/v1/workloads/finetune-llama"); code != 200 {
		t.Fatalf("the broker answers %d for the applied workload", code)
	}
	// A second plan finds nothing to do.
	if out := run("plan", "-input=false", "-no-color", "-detailed-exitcode"); !strings.Contains(out, "No changes") {
		t.Fatalf("second plan is not empty:\n%s", out)
	}
	run("destroy", "-auto-approve", "-input=false", "-no-color")
	if code := get(t, b, "/api/v1/workloads/finetune-llama"); code != 404 {
		t.Fatalf("after destroy the broker answers %d; want 404", code)
	}
}

func get(t *testing.T, b tofutest.Broker, path string) int {
	t.Helper()
	req, _ := http.NewRequest("GET", b.URL+path, nil)
	req.Header.Set("Authorization", "Bearer "+b.Token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

func writeFile(t *testing.T, p, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}
