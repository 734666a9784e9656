// Package cbc runs the COIN-OR CBC MILP solver as a process on a model file,
// the way PuLP does: the fleet problem is written in CPLEX LP format, the
// heuristic's plan as a MIP start, and CBC's solution file is read back.
// It implements optimizer.ExactSolver. CBC is Debian's coinor-cbc.
package cbc

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/gpubroker/gpubroker/optimizer"
)

// ErrNotInstalled is returned by Find when no cbc binary is on the PATH.
var ErrNotInstalled = errors.New("cbc is not installed (Debian: apt-get install coinor-cbc)")

// Solver runs one CBC process per model.
type Solver struct {
	// Path is the cbc binary.
	Path string
	// TimeLimit is CBC's "sec" limit; 0 means 60 s. CBC returns its best
	// solution when it runs out.
	TimeLimit time.Duration
	// Threads is CBC's thread count; 0 means 1 (deterministic).
	Threads int
	// Dir is where model files are written; "" means a new temporary
	// directory, removed afterwards. When set, the files are kept there,
	// CBC's log (cbc.log) included.
	Dir string
	// RatioGap, when above 0, stops CBC once its plan is proven within
	// this fraction of the optimum (CBC's ratioGap; 0.001 is 0.1%).
	RatioGap float64
}

// Find returns a Solver for the cbc binary on the PATH.
func Find() (*Solver, error) {
	p, err := exec.LookPath("cbc")
	if err != nil {
		return nil, ErrNotInstalled
	}
	return &Solver{Path: p}, nil
}

var _ optimizer.ExactSolver = (*Solver)(nil)

// varName is the LP name of x_wj.
func varName(w, j int) string { return "x_" + strconv.Itoa(w) + "_" + strconv.Itoa(j) }

// WriteLP writes the model in CPLEX LP format: minimise Σ c·x subject to
// one option per workload and every row within its cap, all x binary.
func WriteLP(out io.Writer, m *optimizer.Model) error {
	w := bufio.NewWriter(out)
	fmt.Fprintln(w, "\\ gpubroker fleet placement: one option per workload, quota and budget rows")
	fmt.Fprintln(w, "Minimize")
	fmt.Fprint(w, " cost:")
	n := 0
	for wi, cs := range m.Costs {
		for j, c := range cs {
			fmt.Fprintf(w, " + %s %s", num(c), varName(wi, j))
			if n++; n%8 == 0 {
				fmt.Fprint(w, "\n ")
			}
		}
	}
	fmt.Fprintln(w)
	fmt.Fprintln(w, "Subject To")
	for wi, cs := range m.Costs {
		fmt.Fprintf(w, " one_%d:", wi)
		for j := range cs {
			fmt.Fprintf(w, " + %s", varName(wi, j))
			if (j+1)%16 == 0 {
				fmt.Fprint(w, "\n ")
			}
		}
		fmt.Fprintln(w, " = 1")
	}
	for ri, r := range m.Rows {
		if len(r.Terms) == 0 {
			continue
		}
		fmt.Fprintf(w, " row_%d:", ri)
		for k, t := range r.Terms {
			fmt.Fprintf(w, " + %s %s", num(t.Coef), varName(t.W, t.J))
			if (k+1)%8 == 0 {
				fmt.Fprint(w, "\n ")
			}
		}
		fmt.Fprintf(w, " <= %s\n", num(r.Cap))
	}
	fmt.Fprintln(w, "Binary")
	for wi, cs := range m.Costs {
		for j := range cs {
			fmt.Fprintf(w, " %s", varName(wi, j))
		}
		fmt.Fprintln(w)
	}
	fmt.Fprintln(w, "End")
	return w.Flush()
}

// num prints a coefficient exactly enough: 12 significant digits.
func num(x float64) string { return strconv.FormatFloat(x, 'g', 12, 64) }

// writeStart writes a MIP start in CBC's solution format (index name value).
func writeStart(out io.Writer, m *optimizer.Model, start []int) error {
	w := bufio.NewWriter(out)
	fmt.Fprintln(w, "Stopped on iterations - objective value 0")
	k := 0
	for wi, cs := range m.Costs {
		for j := range cs {
			v := 0
			if start[wi] == j {
				v = 1
			}
			fmt.Fprintf(w, "%d %s %d 0\n", k, varName(wi, j), v)
			k++
		}
	}
	return w.Flush()
}

var (
	versionRE    = regexp.MustCompile(`Version:\s*(\S+)`)
	bestPossRE   = regexp.MustCompile(`best possible ([-0-9.eE+]+)`)
	lowerBoundRE = regexp.MustCompile(`(?m)^Lower bound:\s+([-0-9.eE+]+)`)
)

// SolveModel writes the model (and the start, when given) to files, runs
// CBC with its time limit and parses the solution file.
func (s *Solver) SolveModel(ctx context.Context, m *optimizer.Model, start []int) (optimizer.ExactResult, error) {
	res := optimizer.ExactResult{Status: optimizer.ExactUnknown, Solver: "cbc"}
	dir := s.Dir
	if dir == "" {
		d, err := os.MkdirTemp("", "gpubroker-cbc-")
		if err != nil {
			return res, fmt.Errorf("cbc: %w", err)
		}
		defer os.RemoveAll(d)
		dir = d
	}
	lp := filepath.Join(dir, "model.lp")
	sol := filepath.Join(dir, "solution.txt")
	if err := writeFile(lp, func(w io.Writer) error { return WriteLP(w, m) }); err != nil {
		return res, err
	}
	limit := s.TimeLimit
	if limit <= 0 {
		limit = time.Minute
	}
	threads := max(1, s.Threads)
	// Wall-clock time: the limit is what the user waits.
	args := []string{lp, "-timeMode", "elapsed", "-sec", strconv.FormatFloat(limit.Seconds(), 'f', 1, 64), "-threads", strconv.Itoa(threads)}
	if s.RatioGap > 0 {
		args = append(args, "-ratioGap", strconv.FormatFloat(s.RatioGap, 'g', -1, 64))
	}
	if start != nil {
		ms := filepath.Join(dir, "start.sol")
		if err := writeFile(ms, func(w io.Writer) error { return writeStart(w, m, start) }); err != nil {
			return res, err
		}
		args = append(args, "-mips", ms)
	}
	args = append(args, "-solve", "-solu", sol)
	// A hard stop after CBC's own limit, in case it overruns (its root
	// node and cut loop do not check the limit often on large models).
	cctx, cancel := context.WithTimeout(ctx, limit+limit/2+30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(cctx, s.Path, args...)
	cmd.Dir = dir
	var stdout bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stdout
	if s.Dir != "" {
		// A kept run keeps its log too: on long runs it shows how the
		// bound moved.
		logf, err := os.Create(filepath.Join(dir, "cbc.log"))
		if err != nil {
			return res, fmt.Errorf("cbc: %w", err)
		}
		defer logf.Close()
		out := io.MultiWriter(&stdout, logf)
		cmd.Stdout, cmd.Stderr = out, out
	}
	if err := cmd.Run(); err != nil {
		if cctx.Err() != nil && ctx.Err() == nil {
			return res, fmt.Errorf("cbc overran its %s time limit and was stopped: %w", limit, context.DeadlineExceeded)
		}
		return res, fmt.Errorf("cbc %s: %w: %s", strings.Join(args, " "), err, tail(stdout.String(), 400))
	}
	if v := versionRE.FindStringSubmatch(stdout.String()); v != nil {
		res.Solver = "cbc " + v[1]
	}
	if b := bestPossRE.FindStringSubmatch(stdout.String()); b != nil {
		res.BestBound, _ = strconv.ParseFloat(b[1], 64)
	} else if b := lowerBoundRE.FindStringSubmatch(stdout.String()); b != nil {
		res.BestBound, _ = strconv.ParseFloat(b[1], 64)
	}
	f, err := os.Open(sol)
	if err != nil {
		return res, fmt.Errorf("cbc wrote no solution: %w: %s", err, tail(stdout.String(), 400))
	}
	defer f.Close()
	res, err = ParseSolution(f, m, res)
	if err == nil && s.RatioGap > 0 && res.Status == optimizer.ExactOptimal && res.BestBound < res.Objective-1e-9*max(1, res.Objective) {
		// CBC calls a plan within the ratio gap "optimal"; it is proven
		// only within the gap.
		res.Status = optimizer.ExactFeasible
	}
	return res, err
}

// ParseSolution reads CBC's solution file: a status line ("Optimal -
// objective value 123", "Infeasible - ...", "Stopped on time - ..."),
// then one line per non-zero variable: index, name, value, reduced cost.
func ParseSolution(r io.Reader, m *optimizer.Model, res optimizer.ExactResult) (optimizer.ExactResult, error) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64*1024), 1<<20)
	if !sc.Scan() {
		return res, errors.New("cbc solution: empty file")
	}
	status := sc.Text()
	low := strings.ToLower(status)
	switch {
	case strings.HasPrefix(low, "optimal"):
		res.Status = optimizer.ExactOptimal
	case strings.HasPrefix(low, "infeasible") || strings.Contains(low, "integer infeasible"):
		res.Status = optimizer.ExactInfeasible
		return res, nil
	case strings.Contains(low, "no integer solution") || strings.HasPrefix(low, "unbounded"):
		res.Status = optimizer.ExactUnknown
		return res, nil
	case strings.HasPrefix(low, "stopped"):
		res.Status = optimizer.ExactFeasible
	default:
		return res, fmt.Errorf("cbc solution: unknown status line %q", status)
	}
	if i := strings.LastIndex(status, "objective value"); i >= 0 {
		res.Objective, _ = strconv.ParseFloat(strings.TrimSpace(status[i+len("objective value"):]), 64)
	}
	choice := make([]int, len(m.Costs))
	for i := range choice {
		choice[i] = -1
	}
	line := 1
	for sc.Scan() {
		line++
		f := strings.Fields(sc.Text())
		if len(f) < 3 {
			continue
		}
		// "**" marks a value outside its bounds in some CBC builds.
		if f[0] == "**" {
			f = f[1:]
		}
		if len(f) < 3 {
			continue
		}
		v, err := strconv.ParseFloat(f[2], 64)
		if err != nil {
			return res, fmt.Errorf("cbc solution line %d: value %q: %w", line, f[2], err)
		}
		if v < 0.5 {
			continue
		}
		var w, j int
		if _, err := fmt.Sscanf(f[1], "x_%d_%d", &w, &j); err != nil || w < 0 || w >= len(choice) || j < 0 || j >= len(m.Costs[w]) {
			return res, fmt.Errorf("cbc solution line %d: unknown variable %q", line, f[1])
		}
		if choice[w] >= 0 {
			return res, fmt.Errorf("cbc solution line %d: workload %s takes two options", line, m.Workloads[w])
		}
		choice[w] = j
	}
	if err := sc.Err(); err != nil {
		return res, fmt.Errorf("cbc solution: %w", err)
	}
	for w, j := range choice {
		if j < 0 {
			if res.Status == optimizer.ExactOptimal {
				return res, fmt.Errorf("cbc solution: workload %s has no option", m.Workloads[w])
			}
			// A time-limited run without a solution.
			res.Status = optimizer.ExactUnknown
			return res, nil
		}
	}
	res.Choice = choice
	return res, nil
}

func writeFile(path string, fn func(io.Writer) error) error {
	f, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("cbc: %w", err)
	}
	if err := fn(f); err != nil {
		f.Close()
		return fmt.Errorf("cbc: writing %s: %w", path, err)
	}
	return f.Close()
}

func tail(s string, n int) string {
	if len(s) > n {
		return "…" + s[len(s)-n:]
	}
	return s
}
