package httpapi

import (
	"net/http"
	"time"

	"github.com/gpubroker/gpubroker/apiv1"
)

// spendGroups are the ways GET /api/v1/spend can group the ledger.
var spendGroups = map[string]bool{"cloud": true, "team": true, "workload": true, "day": true, "capacity": true}

// parseSpendQuery reads since/until (YYYY-MM-DD or RFC 3339; default: the
// calendar month to date, UTC) and by (default cloud).
func parseSpendQuery(r *http.Request, now time.Time) (apiv1.SpendQuery, error) {
	v := r.URL.Query()
	q := apiv1.SpendQuery{By: v.Get("by")}
	if q.By == "" {
		q.By = "cloud"
	}
	if !spendGroups[q.By] {
		return q, badf("by %q: want cloud, team, workload, day or capacity", q.By)
	}
	day := func(name string) (time.Time, error) {
		s := v.Get(name)
		if s == "" {
			return time.Time{}, nil
		}
		if t, err := time.Parse("2006-01-02", s); err == nil {
			return t.UTC(), nil
		}
		t, err := time.Parse(time.RFC3339, s)
		if err != nil {
			return time.Time{}, badf("%s %q: want a date like 2026-11-01 or an RFC 3339 time", name, s)
		}
		return t.UTC(), nil
	}
	var err error
	if q.Since, err = day("since"); err != nil {
		return q, err
	}
	if q.Until, err = day("until"); err != nil {
		return q, err
	}
	now = now.UTC()
	if q.Since.IsZero() {
		q.Since = time.Date(now.Year(), now.Month(), 1, 0, 0, 0, 0, time.UTC)
	}
	if q.Until.IsZero() {
		q.Until = now.Truncate(24 * time.Hour).Add(24 * time.Hour)
	}
	if !q.Until.After(q.Since) {
		return q, badf("until %s is not after since %s", q.Until.Format("2006-01-02"), q.Since.Format("2006-01-02"))
	}
	if q.Until.Sub(q.Since) > 3*366*24*time.Hour {
		return q, badf("since..until spans more than three years; ask for less")
	}
	return q, nil
}

func (s *Server) spend(w http.ResponseWriter, r *http.Request) {
	if s.spendFn == nil {
		writeError(w, http.StatusServiceUnavailable, codeUnavailable, "the spend ledger is not available in this build")
		return
	}
	q, err := parseSpendQuery(r, s.now())
	if err != nil {
		s.fail(w, r, err)
		return
	}
	out, err := s.spendFn(r.Context(), q)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, out)
}
