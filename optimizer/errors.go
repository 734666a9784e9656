package optimizer

import (
	"errors"
	"fmt"
	"strings"
)

// ErrInfeasible is wrapped by the error Solve returns when some workload
// cannot be placed; errors.As it into *InfeasibleError for the details.
var ErrInfeasible = errors.New("no feasible placement")

// ErrInput is wrapped when the input itself is unusable (no catalog, no
// policy).
var ErrInput = errors.New("bad optimizer input")

// Blocked says which constraint keeps one workload from being placed.
type Blocked struct {
	// Pos is where the workload is defined ("file:line:col"), when known.
	Pos      string `json:"pos,omitempty"`
	Workload string `json:"workload"`
	// Constraint names the blocking constraint: "gpu_model", "placement",
	// "memory", "gpu_count", "spot_policy", "deadline", "no_finish",
	// "spread", "replicas", "quota", "budget".
	Constraint string `json:"constraint"`
	Reason     string `json:"reason"`
	// Proof says how the infeasibility is known: the workload has no
	// option of its own, or an exhaustive search over the workloads it
	// shares rows with found no full plan, or (not proven) the search hit
	// its limit.
	Proof string `json:"proof"`
}

// InfeasibleError lists every workload that could not be placed. Solve
// returns it together with the plan of the workloads it could place.
type InfeasibleError struct {
	Blocked []Blocked
}

func (e *InfeasibleError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s for %s:", ErrInfeasible, countOf(len(e.Blocked), "workload"))
	for _, x := range e.Blocked {
		if x.Pos != "" {
			fmt.Fprintf(&b, "\n  %s: %s: %s (%s)", x.Pos, x.Workload, x.Reason, x.Constraint)
		} else {
			fmt.Fprintf(&b, "\n  %s: %s (%s)", x.Workload, x.Reason, x.Constraint)
		}
	}
	return b.String()
}

// Unwrap makes errors.Is(err, ErrInfeasible) true.
func (e *InfeasibleError) Unwrap() error { return ErrInfeasible }
