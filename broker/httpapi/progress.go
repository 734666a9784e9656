package httpapi

import (
	"fmt"
	"math"
	"net/http"
	"time"

	"github.com/gpubroker/gpubroker/apiv1"
	"github.com/gpubroker/gpubroker/store"
)

// maxProgressSkew is how far in the future a progress report's time may be
// (VM clocks drift); later is a broken clock, refused so it cannot shadow
// every honest report after it.
const maxProgressSkew = 5 * time.Minute

// validateProgress checks a progress report and says what is wrong.
func validateProgress(p *apiv1.ProgressReport, now time.Time) error {
	if math.IsNaN(p.Done) || p.Done < 0 || p.Done > 1 {
		return badf("done is %v; want the fraction of the work done, from 0 to 1 (e.g. 0.42)", p.Done)
	}
	if p.Step != nil && *p.Step < 0 {
		return badf("step is %d; want a step count of 0 or more", *p.Step)
	}
	if p.ETASeconds != nil && (math.IsNaN(*p.ETASeconds) || math.IsInf(*p.ETASeconds, 0) || *p.ETASeconds < 0 || *p.ETASeconds > 1e9) {
		return badf("eta_seconds is %v; want seconds to finish, 0 to 1e9", *p.ETASeconds)
	}
	if p.ReportedAt.IsZero() {
		return badf("reported_at is missing; want the RFC 3339 time the job measured its progress")
	}
	if p.ReportedAt.After(now.Add(maxProgressSkew)) {
		return badf("reported_at %s is more than %s ahead of the broker's clock (%s); check the instance's clock",
			p.ReportedAt.UTC().Format(time.RFC3339), maxProgressSkew, now.UTC().Format(time.RFC3339))
	}
	return nil
}

// progress stores the progress an agent forwards from its job, for the
// live training stage (fleet.TrainingSource).
func (s *Server) progress(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	var p apiv1.ProgressReport
	if err := decodeJSON(w, r, agentBodyLimit, &p); err != nil {
		s.fail(w, r, err)
		return
	}
	now := s.now().UTC()
	if err := validateProgress(&p, now); err != nil {
		s.fail(w, r, err)
		return
	}
	inst, err := s.store.GetInstance(r.Context(), id)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	if inst.Workload == "" {
		writeError(w, http.StatusConflict, codeConflict, fmt.Sprintf("instance %s runs no workload the broker knows of; progress is kept per workload (launch it through the fleet or register it with a workload)", id))
		return
	}
	rec := store.ProgressRecord{Workload: inst.Workload, Instance: id, Done: p.Done, ReportedAt: p.ReportedAt.UTC()}
	if p.Step != nil {
		rec.Step = *p.Step
	}
	if p.ETASeconds != nil {
		rec.ETA = time.Duration(*p.ETASeconds * float64(time.Second))
	}
	stored, err := s.store.RecordProgress(r.Context(), rec, now)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	status := "unchanged"
	if stored {
		status = "stored"
	}
	writeJSON(w, http.StatusOK, apiv1.ProgressResponse{Status: status, Workload: inst.Workload})
}
