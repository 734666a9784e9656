package dashboard

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/gpubroker/gpubroker/optimizer"
	"github.com/gpubroker/gpubroker/policy"
)

// SolvePolicy is the default PolicyPlanner: policy.Parse, then
// optimizer.Solve on the broker's catalog with the spec-sheet speeds,
// which is what `gpubroker plan -f` does.
type SolvePolicy struct {
	Offers Offers
	Now    func() time.Time
}

var _ PolicyPlanner = SolvePolicy{}

// PlanPolicy parses and plans data.
func (p SolvePolicy) PlanPolicy(_ context.Context, name string, data []byte) (*optimizer.Plan, error) {
	pol, err := policy.Parse(name, data)
	if err != nil {
		return nil, err
	}
	now := time.Now
	if p.Now != nil {
		now = p.Now
	}
	return optimizer.Solve(optimizer.Input{Catalog: p.Offers.Catalog(), Policy: pol, Speeds: optimizer.DefaultSpeeds(),
		Now: now().UTC().Truncate(time.Second)})
}

// maxPolicyUpload bounds the plan form's body: a policy file and a little.
const maxPolicyUpload = policy.MaxFileSize + 64<<10

type posError struct {
	Line, Col int
	Msg, Text string
}

type sourceLine struct {
	N      int
	Text   string
	Errors []string
}

type planView struct {
	Plan    *optimizer.Plan
	Blocked []optimizer.Blocked
	Note    string
}

type planData struct {
	Current planView
	// Tried is the result of a pasted or uploaded policy.
	Tried      *planView
	TriedName  string
	Policy     string
	Errors     []posError
	Source     []sourceLine
	FormErrors []string
}

func (s *Server) currentPlanView(ctx context.Context) (planView, error) {
	plan, err := s.cfg.Plan.CurrentPlan(ctx)
	var inf *optimizer.InfeasibleError
	switch {
	case errors.Is(err, ErrNoSource):
		return planView{Note: "No policy is loaded. Start the broker with `gpubroker serve -f policy.yaml`, or plan a policy file below."}, nil
	case errors.As(err, &inf):
		return planView{Blocked: inf.Blocked}, nil
	case err != nil:
		return planView{}, err
	}
	return planView{Plan: plan}, nil
}

func (s *Server) plan(w http.ResponseWriter, r *http.Request, rq request) {
	cur, err := s.currentPlanView(r.Context())
	if err != nil {
		s.internal(w, r, "the current plan", err)
		return
	}
	s.render(w, r, http.StatusOK, "plan", s.pageFor(rq, "Plan", "plan", planData{Current: cur}))
}

// planPolicy plans a pasted or uploaded policy file. The CSRF check in
// auth has already parsed the multipart body (bounded).
func (s *Server) planPolicy(w http.ResponseWriter, r *http.Request, rq request) {
	d := planData{}
	cur, err := s.currentPlanView(r.Context())
	if err != nil {
		s.internal(w, r, "the current plan", err)
		return
	}
	d.Current = cur
	status := http.StatusOK
	name, data, err := policyFromForm(r)
	if err != nil {
		d.FormErrors = []string{err.Error()}
		s.render(w, r, http.StatusBadRequest, "plan", s.pageFor(rq, "Plan", "plan", d))
		return
	}
	d.TriedName, d.Policy = name, string(data)
	plan, err := s.cfg.Planner.PlanPolicy(r.Context(), name, data)
	var list policy.ErrorList
	var inf *optimizer.InfeasibleError
	switch {
	case errors.As(err, &list):
		status = http.StatusUnprocessableEntity
		d.Errors, d.Source = positionErrors(list, string(data))
	case errors.As(err, &inf):
		d.Tried = &planView{Blocked: inf.Blocked}
	case err != nil:
		status = http.StatusUnprocessableEntity
		d.FormErrors = []string{err.Error()}
	default:
		d.Tried = &planView{Plan: plan}
	}
	s.render(w, r, status, "plan", s.pageFor(rq, "Plan", "plan", d))
}

// policyFromForm returns the uploaded file, or else the pasted text.
func policyFromForm(r *http.Request) (string, []byte, error) {
	if r.MultipartForm == nil {
		// An urlencoded form (no file field) from a client without
		// multipart.
		return "pasted.yaml", []byte(r.PostFormValue("policy")), nil
	}
	if fhs := r.MultipartForm.File["file"]; len(fhs) > 0 && fhs[0].Size > 0 {
		fh := fhs[0]
		if fh.Size > policy.MaxFileSize {
			return "", nil, fmt.Errorf("the file is %d bytes; a policy file is at most %d", fh.Size, policy.MaxFileSize)
		}
		f, err := fh.Open()
		if err != nil {
			return "", nil, fmt.Errorf("reading the uploaded file: %w", err)
		}
		defer f.Close()
		data, err := io.ReadAll(io.LimitReader(f, policy.MaxFileSize+1))
		if err != nil {
			return "", nil, fmt.Errorf("reading the uploaded file: %w", err)
		}
		name := filepath.Base(fh.Filename)
		if name == "." || name == "/" || !utf8.ValidString(name) {
			name = "uploaded.yaml"
		}
		return name, data, nil
	}
	text := ""
	if v := r.MultipartForm.Value["policy"]; len(v) > 0 {
		text = v[0]
	}
	if strings.TrimSpace(text) == "" {
		return "", nil, errors.New("paste a policy file into the text box or choose a file to upload")
	}
	return "pasted.yaml", []byte(text), nil
}

// maxSourceLines bounds the numbered listing shown next to errors.
const maxSourceLines = 2000

// positionErrors lists the errors with their positions and the source with
// each error under its line.
func positionErrors(list policy.ErrorList, src string) ([]posError, []sourceLine) {
	lines := strings.Split(strings.ReplaceAll(src, "\r\n", "\n"), "\n")
	if len(lines) > maxSourceLines {
		lines = lines[:maxSourceLines]
	}
	out := make([]sourceLine, len(lines))
	for i, l := range lines {
		out[i] = sourceLine{N: i + 1, Text: l}
	}
	errs := make([]posError, 0, len(list))
	for _, e := range list {
		errs = append(errs, posError{Line: e.Pos.Line, Col: e.Pos.Col, Msg: e.Msg, Text: e.Error()})
		if e.Pos.Line >= 1 && e.Pos.Line <= len(out) {
			out[e.Pos.Line-1].Errors = append(out[e.Pos.Line-1].Errors, fmt.Sprintf("column %d: %s", e.Pos.Col, e.Msg))
		}
	}
	return errs, out
}
