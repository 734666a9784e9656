package dashboard

import (
	"net/http"
	"net/url"
	"strconv"
	"time"
)

type eventsData struct {
	Kind, Workload, Instance string
	Window                   string
	Kinds                    []string
	Windows                  []window
	Events                   []Event
	Next                     string
	Newer                    bool
	Note                     string
}

type window struct {
	Value, Label string
	D            time.Duration
}

var windows = []window{{"1h", "last hour", time.Hour}, {"24h", "last 24 hours", 24 * time.Hour},
	{"168h", "last 7 days", 168 * time.Hour}, {"", "all time", 0}}

func (s *Server) events(w http.ResponseWriter, r *http.Request, rq request) {
	q := r.URL.Query()
	d := eventsData{Kind: q.Get("kind"), Workload: q.Get("workload"), Instance: q.Get("instance"), Window: q.Get("window"), Windows: windows}
	if s.cfg.Events == nil {
		d.Note = "This broker does not record events."
		s.render(w, r, http.StatusOK, "events", s.pageFor(rq, "Events", "events", d))
		return
	}
	eq := EventQuery{Kind: d.Kind, Workload: d.Workload, Instance: d.Instance, Limit: pageSize}
	for _, win := range windows {
		if win.Value == d.Window && win.D > 0 {
			eq.Since = s.now().Add(-win.D)
		}
	}
	if before, err := strconv.ParseInt(q.Get("before"), 10, 64); err == nil && before > 0 {
		eq.BeforeID = before
		d.Newer = true
	}
	kinds, err := s.cfg.Events.EventKinds(r.Context())
	if err != nil {
		s.internal(w, r, "the event kinds", err)
		return
	}
	d.Kinds = kinds
	evs, err := s.cfg.Events.RecentEvents(r.Context(), eq)
	if err != nil {
		s.internal(w, r, "the events", err)
		return
	}
	d.Events = evs
	if len(evs) == pageSize {
		v := url.Values{}
		for k, val := range map[string]string{"kind": d.Kind, "workload": d.Workload, "instance": d.Instance, "window": d.Window} {
			if val != "" {
				v.Set(k, val)
			}
		}
		v.Set("before", strconv.FormatInt(evs[len(evs)-1].ID, 10))
		d.Next = "/ui/events?" + v.Encode()
	}
	if len(evs) == 0 {
		d.Note = "No events match. Agents report notices, drains and benchmarks; the broker records them here."
	}
	s.render(w, r, http.StatusOK, "events", s.pageFor(rq, "Events", "events", d))
}
