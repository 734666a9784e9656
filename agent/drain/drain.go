// Package drain runs the steps that tell a workload its VM is going away:
// signal a process group and wait for it, run a command, POST to a local
// HTTP endpoint. Steps run in order, each with its own timeout, all within
// one overall deadline (the notice's deadline minus a safety margin). A step
// that overruns is killed and the next one runs anyway: a hung checkpoint
// script must not stop the workload from being signalled.
//
// The package knows nothing about clouds or the broker; the agent feeds it.
package drain

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// Info describes the notice a drain answers; commands get it as environment
// variables and HTTP steps as a JSON body.
type Info struct {
	NoticeID string    `json:"notice_id"`
	Kind     string    `json:"kind"`
	Cloud    string    `json:"cloud"`
	Deadline time.Time `json:"deadline,omitzero"`
	// Early is true for a gentle drain on a warning (rebalance, maintenance).
	Early bool `json:"early"`
}

// Step is one drain action.
type Step interface {
	// Name describes the step in logs and reports ("exec /opt/ckpt.sh").
	Name() string
	// Timeout is the step's own limit.
	Timeout() time.Duration
	// Run performs the step. It must return promptly once ctx is done, and
	// leave nothing running (kill what it started).
	Run(ctx context.Context, info Info) error
}

// Status of a finished step.
type Status string

// Step outcomes.
const (
	StatusOK       Status = "ok"
	StatusFailed   Status = "failed"
	StatusTimedOut Status = "timed_out"
	StatusSkipped  Status = "skipped" // the overall deadline had passed
)

// StepResult reports one step.
type StepResult struct {
	Name     string        `json:"name"`
	Status   Status        `json:"status"`
	Error    string        `json:"error,omitempty"`
	Started  time.Time     `json:"started,omitzero"`
	Duration time.Duration `json:"duration_ns"`
}

// Result reports a whole drain.
type Result struct {
	Info     Info         `json:"info"`
	Started  time.Time    `json:"started"`
	Finished time.Time    `json:"finished"`
	Deadline time.Time    `json:"deadline,omitzero"`
	Steps    []StepResult `json:"steps"`
}

// OK reports whether every step succeeded.
func (r Result) OK() bool {
	for _, s := range r.Steps {
		if s.Status != StatusOK {
			return false
		}
	}
	return true
}

// Runner runs a list of steps.
type Runner struct {
	Steps []Step
	// Now is the clock (default time.Now).
	Now func() time.Time
	// OnStepStart, when set, is called as each step starts (the agent's
	// latency measurement hooks here).
	OnStepStart func(index int, name string, at time.Time)
}

// ErrNoSteps is returned by Run when there is nothing to do.
var ErrNoSteps = errors.New("drain: no steps configured")

// Run runs the steps in order. deadline bounds the whole drain (zero: only
// each step's timeout does). Steps still to run when the deadline has
// passed, or when ctx is cancelled, are reported as skipped. Run always
// returns a result for every step.
func (r *Runner) Run(ctx context.Context, info Info, deadline time.Time) (Result, error) {
	now := r.Now
	if now == nil {
		now = time.Now
	}
	res := Result{Info: info, Started: now(), Deadline: deadline}
	if len(r.Steps) == 0 {
		res.Finished = res.Started
		return res, ErrNoSteps
	}
	for i, s := range r.Steps {
		sr := StepResult{Name: s.Name()}
		start := now()
		left := s.Timeout()
		if !deadline.IsZero() {
			if d := deadline.Sub(start); d < left || left <= 0 {
				left = d
			}
		}
		if ctx.Err() != nil || (!deadline.IsZero() && left <= 0) {
			sr.Status, sr.Error = StatusSkipped, "overall drain deadline reached"
			if ctx.Err() != nil {
				sr.Error = "drain cancelled"
			}
			res.Steps = append(res.Steps, sr)
			continue
		}
		if r.OnStepStart != nil {
			r.OnStepStart(i, s.Name(), start)
		}
		sctx, cancel := context.WithTimeout(ctx, left)
		err := s.Run(sctx, info)
		timedOut := sctx.Err() == context.DeadlineExceeded
		cancel()
		sr.Started, sr.Duration = start, now().Sub(start)
		switch {
		case err == nil:
			sr.Status = StatusOK
		case timedOut:
			sr.Status, sr.Error = StatusTimedOut, fmt.Sprintf("overran %v: %v", left.Round(time.Millisecond), err)
		default:
			sr.Status, sr.Error = StatusFailed, err.Error()
		}
		res.Steps = append(res.Steps, sr)
	}
	res.Finished = now()
	return res, nil
}
