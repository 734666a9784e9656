package optimizer

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gpubroker/gpubroker/policy"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/")

// TestGoldenExamples plans every policy in examples/ on the embedded
// snapshot and compares the table and the JSON with testdata/golden.
// Run `go test ./optimizer -run Golden -update` after an intended change.
func TestGoldenExamples(t *testing.T) {
	files, err := filepath.Glob("../examples/*.yaml")
	if err != nil || len(files) == 0 {
		t.Fatalf("no example policies: %v", err)
	}
	cat := embedded(t)
	schema := loadSchema(t)
	for _, f := range files {
		name := strings.TrimSuffix(filepath.Base(f), ".yaml")
		t.Run(name, func(t *testing.T) {
			p, err := policy.Load(f)
			if err != nil {
				t.Fatal(err)
			}
			plan, err := Solve(Input{Catalog: cat, Policy: p, Now: testNow})
			if err != nil {
				t.Fatal(err)
			}
			checkPlan(t, cat, p, plan)
			var table, js bytes.Buffer
			if err := plan.WriteTable(&table); err != nil {
				t.Fatal(err)
			}
			if err := plan.WriteJSON(&js); err != nil {
				t.Fatal(err)
			}
			golden(t, filepath.Join("testdata", "golden", name+".table.txt"), table.Bytes())
			golden(t, filepath.Join("testdata", "golden", name+".json"), js.Bytes())
			var doc any
			if err := json.Unmarshal(js.Bytes(), &doc); err != nil {
				t.Fatal(err)
			}
			if errs := validate(schema, doc, "$"); len(errs) > 0 {
				t.Errorf("plan JSON does not match docs/plan.schema.json:\n%s", strings.Join(errs, "\n"))
			}
		})
	}
}

func golden(t *testing.T, path string, got []byte) {
	t.Helper()
	if *update {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run with -update to create it)", err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s differs from the output (run with -update if intended); got:\n%s", path, got)
	}
}

func loadSchema(t *testing.T) map[string]any {
	t.Helper()
	b, err := os.ReadFile("../docs/plan.schema.json")
	if err != nil {
		t.Fatal(err)
	}
	var s map[string]any
	if err := json.Unmarshal(b, &s); err != nil {
		t.Fatalf("docs/plan.schema.json: %v", err)
	}
	return s
}

// validate is a small structural JSON Schema check: type, required,
// properties, additionalProperties: false, items and enum. It is enough to
// keep the schema and the Go structs in step.
func validate(s map[string]any, v any, at string) []string {
	var errs []string
	if !typeOK(s["type"], v) {
		return []string{fmt.Sprintf("%s: %T does not match type %v", at, v, s["type"])}
	}
	if enum, ok := s["enum"].([]any); ok {
		found := false
		for _, e := range enum {
			if e == v {
				found = true
			}
		}
		if !found {
			errs = append(errs, fmt.Sprintf("%s: %v not in %v", at, v, enum))
		}
	}
	switch x := v.(type) {
	case map[string]any:
		props, _ := s["properties"].(map[string]any)
		for _, r := range asStrings(s["required"]) {
			if _, ok := x[r]; !ok {
				errs = append(errs, fmt.Sprintf("%s: required %q missing", at, r))
			}
		}
		for k, val := range x {
			ps, ok := props[k].(map[string]any)
			if !ok {
				if s["additionalProperties"] == false {
					errs = append(errs, fmt.Sprintf("%s: %q is not in the schema", at, k))
				}
				continue
			}
			errs = append(errs, validate(ps, val, at+"."+k)...)
		}
	case []any:
		if items, ok := s["items"].(map[string]any); ok {
			for i, e := range x {
				errs = append(errs, validate(items, e, fmt.Sprintf("%s[%d]", at, i))...)
			}
		}
	}
	return errs
}

func typeOK(t any, v any) bool {
	switch tt := t.(type) {
	case nil:
		return true
	case string:
		switch tt {
		case "object":
			_, ok := v.(map[string]any)
			return ok
		case "array":
			_, ok := v.([]any)
			return ok
		case "string":
			_, ok := v.(string)
			return ok
		case "number":
			_, ok := v.(float64)
			return ok
		case "integer":
			f, ok := v.(float64)
			return ok && f == float64(int64(f))
		case "boolean":
			_, ok := v.(bool)
			return ok
		case "null":
			return v == nil
		}
	case []any:
		for _, x := range tt {
			if typeOK(x, v) {
				return true
			}
		}
	}
	return false
}

func asStrings(v any) []string {
	xs, _ := v.([]any)
	out := make([]string, 0, len(xs))
	for _, x := range xs {
		if s, ok := x.(string); ok {
			out = append(out, s)
		}
	}
	return out
}

// TestSchemaCatchesDrift makes sure the validator can fail: a plan with an
// unknown field and a missing required one must be rejected.
func TestSchemaCatchesDrift(t *testing.T) {
	schema := loadSchema(t)
	bad := map[string]any{"policy": "x", "surprise": 1.0}
	errs := validate(schema, bad, "$")
	joined := strings.Join(errs, "\n")
	for _, want := range []string{`required "placements" missing`, `"surprise" is not in the schema`} {
		if !strings.Contains(joined, want) {
			t.Errorf("validator missed %q; got:\n%s", want, joined)
		}
	}
}
