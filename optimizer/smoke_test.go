package optimizer

import (
	"encoding/json"
	"os"
	"testing"
)

func TestSmoke(t *testing.T) {
	p, err := Solve(Input{Catalog: embedded(t), Policy: fleetPolicy(), Now: testNow})
	if err != nil {
		t.Fatal(err)
	}
	enc := json.NewEncoder(os.Stdout)
	enc.SetIndent("", "  ")
	enc.Encode(p)
}
