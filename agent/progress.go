package agent

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"time"

	"github.com/gpubroker/gpubroker/agent/broker"
	"github.com/gpubroker/gpubroker/apiv1"
)

// DefaultProgressInterval is how often the progress file is checked.
const DefaultProgressInterval = 30 * time.Second

// maxProgressFile bounds the progress file; the format needs a few bytes.
const maxProgressFile = 64 << 10

// Progress is what a job writes to its progress file (docs/agent.md,
// "Progress"): {"done": 0.42} with an optional "step" and "eta_seconds".
type Progress struct {
	Done       float64  `json:"done"`
	Step       *int64   `json:"step,omitempty"`
	ETASeconds *float64 `json:"eta_seconds,omitempty"`
}

// ParseProgress reads a progress file's text; name is used in error
// positions (name:line:col: what is wrong, and what would be right).
func ParseProgress(name string, b []byte) (Progress, error) {
	if len(b) > maxProgressFile {
		return Progress{}, fmt.Errorf("%s: %d bytes; a progress file is one small JSON object like {\"done\": 0.42} (at most %d bytes)", name, len(b), maxProgressFile)
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	var raw struct {
		Done       *float64 `json:"done"`
		Step       *int64   `json:"step"`
		ETASeconds *float64 `json:"eta_seconds"`
	}
	if err := dec.Decode(&raw); err != nil {
		return Progress{}, progressErr(name, b, dec.InputOffset(), err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return Progress{}, posErr(name, b, dec.InputOffset(), "text after the JSON object; want exactly one object like {\"done\": 0.42}")
	}
	if raw.Done == nil {
		return Progress{}, posErr(name, b, 0, "no \"done\"; want the fraction of the work done, e.g. {\"done\": 0.42}")
	}
	p := Progress{Done: *raw.Done, Step: raw.Step, ETASeconds: raw.ETASeconds}
	if p.Done < 0 || p.Done > 1 {
		return Progress{}, posErr(name, b, fieldOffset(b, "done"), fmt.Sprintf("done is %v; want a fraction from 0 to 1 (0.42 is 42%%)", p.Done))
	}
	if p.Step != nil && *p.Step < 0 {
		return Progress{}, posErr(name, b, fieldOffset(b, "step"), fmt.Sprintf("step is %d; want 0 or more", *p.Step))
	}
	if e := p.ETASeconds; e != nil && (*e < 0 || *e > 1e9 || math.IsNaN(*e)) {
		return Progress{}, posErr(name, b, fieldOffset(b, "eta_seconds"), fmt.Sprintf("eta_seconds is %v; want seconds to finish, 0 to 1e9", *e))
	}
	return p, nil
}

// progressErr turns a decoding error into a positioned message.
func progressErr(name string, b []byte, off int64, err error) error {
	var se *json.SyntaxError
	var te *json.UnmarshalTypeError
	switch {
	case errors.As(err, &se):
		return posErr(name, b, se.Offset, "not JSON: "+se.Error()+"; want an object like {\"done\": 0.42}")
	case errors.As(err, &te):
		want := "a number"
		if te.Field == "step" {
			want = "a whole number"
		}
		return posErr(name, b, te.Offset, fmt.Sprintf("%s is a JSON %s; want %s", te.Field, te.Value, want))
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
		return posErr(name, b, int64(len(b)), "the file is empty or cut short; want an object like {\"done\": 0.42}")
	}
	return posErr(name, b, off, err.Error()+"; known fields: done, step, eta_seconds")
}

// fieldOffset is where "key" first appears, for positions of checks made
// after decoding (0 when not found).
func fieldOffset(b []byte, key string) int64 {
	if i := bytes.Index(b, []byte(`"`+key+`"`)); i >= 0 {
		return int64(i)
	}
	return 0
}

func posErr(name string, b []byte, off int64, msg string) error {
	line, col := 1, 1
	for i := int64(0); i < off && i < int64(len(b)); i++ {
		if b[i] == '\n' {
			line, col = line+1, 1
		} else {
			col++
		}
	}
	return fmt.Errorf("%s:%d:%d: %s", name, line, col, msg)
}

// progress watches the progress file and forwards each new version of it
// to the broker, dated by the file's modification time: an unchanged file
// is not sent again, and a retried report is a duplicate the broker
// ignores.
func (a *Agent) progress(ctx context.Context) {
	c := a.o.Config.Progress
	if c.File == "" || a.reporter == nil {
		return
	}
	every := c.Interval
	if every <= 0 {
		every = DefaultProgressInterval
	}
	var last time.Time
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		if at, ok := a.readProgress(c.File, last); ok {
			last = at
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// readProgress forwards the file when it changed since last; it returns
// the modification time it handled.
func (a *Agent) readProgress(path string, last time.Time) (time.Time, bool) {
	st, err := os.Stat(path)
	if err != nil {
		if !errors.Is(err, os.ErrNotExist) {
			a.log.Warn("progress file unreadable", "file", path, "err", err)
		}
		return last, false
	}
	at := st.ModTime().UTC()
	if !at.After(last) {
		return last, false
	}
	b, err := os.ReadFile(path)
	if err != nil {
		a.log.Warn("progress file unreadable", "file", path, "err", err)
		return last, false
	}
	p, err := ParseProgress(path, b)
	if err != nil {
		// Logged once per version of the file; a job mid-write gets its
		// next version read at the next check.
		a.log.Warn("progress file not understood; ignoring this version", "err", err)
		return at, true
	}
	a.report(broker.KindProgress, "progress-"+at.Format(time.RFC3339Nano), ProgressReport(p, at))
	return at, true
}

// ProgressReport is the broker message for progress p measured at at.
func ProgressReport(p Progress, at time.Time) apiv1.ProgressReport {
	return apiv1.ProgressReport{Done: p.Done, Step: p.Step, ETASeconds: p.ETASeconds, ReportedAt: at.UTC()}
}
