package httpapi

import (
	"context"
	"net/http"
	"unicode/utf8"

	"github.com/gpubroker/gpubroker/apiv1"
)

// Fleet is what the fleet routes need; the broker adapts the fleet
// package's Service to it.
type Fleet interface {
	// Status is the fleet as stored: slots, instances, agent health,
	// blocked pools, the kill switch.
	Status(ctx context.Context) (apiv1.FleetStatus, error)
	// Diff is what the next reconcile pass would do; it writes nothing.
	Diff(ctx context.Context) (apiv1.FleetReport, error)
	// SetPaused turns the kill switch on or off; by names who did.
	SetPaused(ctx context.Context, paused bool, by string) (apiv1.FleetPause, error)
	// Replace asks the leader to replace one of the fleet's instances;
	// store.ErrNotFound (wrapped) when it is not a slot's instance.
	Replace(ctx context.Context, id, reason, by string) (apiv1.FleetReplace, error)
}

func (s *Server) fleetRoutes() {
	s.handle("GET "+apiv1.PathFleet, adminOnly, s.fleetStatus)
	s.handle("GET "+apiv1.PathFleetDiff, adminOnly, s.fleetDiff)
	s.handle("POST "+apiv1.PathFleetPause, adminOnly, s.fleetPause(true))
	s.handle("POST "+apiv1.PathFleetResume, adminOnly, s.fleetPause(false))
	s.handle("POST "+apiv1.PathFleetReplace, adminOnly, s.fleetReplace)
}

// maxReplaceReason bounds the reason of a replacement request.
const maxReplaceReason = 500

// decodeReplace reads the optional body of a replacement request and
// returns its reason.
func decodeReplace(w http.ResponseWriter, r *http.Request) (string, error) {
	var body apiv1.FleetReplaceRequest
	if r.ContentLength != 0 {
		if err := decodeJSON(w, r, 4<<10, &body); err != nil {
			return "", err
		}
	}
	if n := utf8.RuneCountInString(body.Reason); n > maxReplaceReason {
		return "", badf("reason is %d characters; at most %d", n, maxReplaceReason)
	}
	return body.Reason, nil
}

func (s *Server) fleetReplace(w http.ResponseWriter, r *http.Request) {
	if s.noFleet(w) {
		return
	}
	reason, err := decodeReplace(w, r)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	by := principalFrom(r.Context()).subject
	if by == "" {
		by = "admin"
	}
	v, err := s.fleet.Replace(r.Context(), r.PathValue("id"), reason, "api:"+by)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	s.metrics.EventRecorded("fleet.replace_requested")
	writeJSON(w, http.StatusAccepted, v)
}

func (s *Server) noFleet(w http.ResponseWriter) bool {
	if s.fleet != nil {
		return false
	}
	writeError(w, http.StatusServiceUnavailable, codeUnavailable,
		"the fleet is not configured on this broker; add a fleet section to the broker configuration (docs/fleet.md)")
	return true
}

func (s *Server) fleetStatus(w http.ResponseWriter, r *http.Request) {
	if s.noFleet(w) {
		return
	}
	v, err := s.fleet.Status(r.Context())
	if err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, v)
}

func (s *Server) fleetDiff(w http.ResponseWriter, r *http.Request) {
	if s.noFleet(w) {
		return
	}
	v, err := s.fleet.Diff(r.Context())
	if err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, v)
}

func (s *Server) fleetPause(paused bool) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if s.noFleet(w) {
			return
		}
		by := principalFrom(r.Context()).subject
		if by == "" {
			by = "admin"
		}
		v, err := s.fleet.SetPaused(r.Context(), paused, "api:"+by)
		if err != nil {
			s.fail(w, r, err)
			return
		}
		kind := "fleet.resumed"
		if paused {
			kind = "fleet.paused"
		}
		s.metrics.EventRecorded(kind)
		s.log.InfoContext(r.Context(), kind, "by", by)
		writeJSON(w, http.StatusOK, v)
	}
}
