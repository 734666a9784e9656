package refresh

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
	"sync"
	"text/tabwriter"
	"time"

	"github.com/gpubroker/gpubroker/pricing"
	"github.com/gpubroker/gpubroker/providers"
)

// IsTerminal reports whether f is a character device (a terminal), where
// progress bars make sense; pipes and files get log lines instead.
func IsTerminal(f *os.File) bool {
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}

// Bars draws one progress bar per cloud on a terminal, redrawing them in
// place with ANSI cursor movement.
type Bars struct {
	mu    sync.Mutex
	w     io.Writer
	order []pricing.Cloud
	state map[pricing.Cloud]*barState
	drawn int // lines drawn so far, to move back over
	width int
}

type barState struct {
	total, done, offers, changes, failed int
	status                               string
}

// NewBars returns bars for clouds, drawn on w.
func NewBars(w io.Writer, clouds []pricing.Cloud) *Bars {
	b := &Bars{w: w, order: clouds, state: make(map[pricing.Cloud]*barState), width: 30}
	for _, c := range clouds {
		b.state[c] = &barState{status: "waiting"}
	}
	return b
}

// CloudStarted implements Progress.
func (b *Bars) CloudStarted(c pricing.Cloud, regions int) {
	b.update(c, func(s *barState) { s.total, s.status = regions, "fetching" })
	// Regions advance together once the cloud has answered: one call
	// fetches them all.
}

// RegionDone implements Progress.
func (b *Bars) RegionDone(r RegionResult) {
	b.update(r.Cloud, func(s *barState) {
		s.done++
		s.offers += r.Offers
		s.changes += r.Saved.PriceChanges
		if r.Status == Failed {
			s.failed++
		}
	})
}

// CloudDone implements Progress.
func (b *Bars) CloudDone(c CloudResult) {
	b.update(c.Cloud, func(s *barState) {
		switch c.Status {
		case Skipped:
			s.status = "skipped: " + SkipReason(c)
		case Failed:
			if c.Err != nil {
				s.status = "failed: " + firstLine(c.Err)
			} else {
				s.status = "done with failures"
			}
		default:
			s.status = "done"
		}
	})
}

func (b *Bars) update(c pricing.Cloud, fn func(*barState)) {
	b.mu.Lock()
	defer b.mu.Unlock()
	s, ok := b.state[c]
	if !ok {
		s = &barState{}
		b.state[c] = s
		b.order = append(b.order, c)
	}
	fn(s)
	b.draw()
}

// draw moves up over the previous drawing and rewrites every line.
func (b *Bars) draw() {
	var sb strings.Builder
	if b.drawn > 0 {
		fmt.Fprintf(&sb, "\x1b[%dA", b.drawn)
	}
	for _, c := range b.order {
		s := b.state[c]
		filled := 0
		if s.total > 0 {
			filled = b.width * s.done / s.total
		}
		bar := strings.Repeat("=", filled) + strings.Repeat(" ", b.width-filled)
		fmt.Fprintf(&sb, "\r\x1b[K%-6s [%s] %2d/%-2d regions  %5d offers  %3d price changes", c, bar, s.done, s.total, s.offers, s.changes)
		if s.failed > 0 {
			fmt.Fprintf(&sb, "  %d failed", s.failed)
		}
		// A wrapped line would break the cursor arithmetic: keep it short.
		fmt.Fprintf(&sb, "  %s\n", truncate(s.status, 60))
	}
	b.drawn = len(b.order)
	_, _ = io.WriteString(b.w, sb.String())
}

func truncate(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:n-1]) + "…"
}

// LogProgress reports a refresh as log lines, for pipes, files and the
// daemon.
type LogProgress struct {
	Log *slog.Logger
	// QuietSkips leaves skipped clouds out of the log, for callers whose
	// report says them (catalog refresh prints one line per skipped cloud).
	QuietSkips bool
}

// CloudStarted implements Progress.
func (p LogProgress) CloudStarted(c pricing.Cloud, regions int) {
	p.Log.Debug("refreshing", "cloud", c, "regions", regions)
}

// RegionDone implements Progress.
func (p LogProgress) RegionDone(r RegionResult) {
	attrs := []any{"cloud", r.Cloud, "region", r.Region, "status", r.Status, "offers", r.Offers, "took", r.Took.Round(time.Millisecond)}
	switch r.Status {
	case Refreshed:
		p.Log.Info("region refreshed", append(attrs, "price_changes", r.Saved.PriceChanges, "new", r.Saved.Inserted)...)
	case Empty:
		p.Log.Warn("region returned no offers; keeping the stored ones", append(attrs, "kept", r.Kept)...)
	default:
		p.Log.Warn("region failed; keeping the stored offers", append(attrs, "kept", r.Kept, "err", r.Err)...)
	}
}

// CloudDone implements Progress.
func (p LogProgress) CloudDone(c CloudResult) {
	switch c.Status {
	case Skipped:
		// One short line (what to set); the SDK's whole chain is for
		// debugging only.
		if !p.QuietSkips {
			p.Log.Info("cloud skipped", "cloud", c.Cloud, "reason", SkipReason(c))
		}
		p.Log.Debug("cloud skipped: details", "cloud", c.Cloud, "err", firstLine(c.Err))
	case Failed:
		if c.Err != nil {
			p.Log.Error("cloud failed", "cloud", c.Cloud, "err", c.Err)
		}
	}
}

// regionErrText is a region's error without the "cloud region:" prefix a
// *providers.RegionError adds, since the table already shows both.
func regionErrText(rr RegionResult) string {
	var re *providers.RegionError
	if errors.As(rr.Err, &re) && re.Region == rr.Region && re.Err != nil {
		return firstLine(re.Err)
	}
	return firstLine(rr.Err)
}

func firstLine(err error) string {
	if err == nil {
		return ""
	}
	s, _, _ := strings.Cut(err.Error(), "\n")
	return s
}

// credentialHints say how to give each cloud credentials, in the skipped
// line of the report.
var credentialHints = map[pricing.Cloud]string{
	pricing.AWS:   "set AWS_PROFILE, or AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY",
	pricing.GCP:   "run 'gcloud auth application-default login' or set GOOGLE_APPLICATION_CREDENTIALS",
	pricing.Azure: "set AZURE_SUBSCRIPTION_ID and sign in with 'az login'",
}

// SkipReason is one short line on why a cloud was skipped: for missing
// credentials, what to set, not the SDK's chain of errors.
func SkipReason(c CloudResult) string {
	if errors.Is(c.Err, providers.ErrNoCredentials) {
		if h, ok := credentialHints[c.Cloud]; ok {
			return "no credentials; " + h
		}
		return "no credentials"
	}
	s := firstLine(c.Err)
	if len(s) > 160 {
		s = s[:157] + "..."
	}
	return s
}

// Write prints the report: a table with one line per region, one short
// line per skipped cloud, a line per failed cloud, then totals.
func (r *Report) Write(w io.Writer) error {
	var skipped []CloudResult
	rows := 0
	for _, c := range r.Clouds {
		if c.Status == Skipped && len(c.Regions) == 0 {
			skipped = append(skipped, c)
		} else {
			rows++
		}
	}
	for _, c := range skipped {
		fmt.Fprintf(w, "%s: skipped: %s\n", c.Cloud, SkipReason(c))
	}
	if rows == 0 {
		return r.writeTotals(w)
	}
	if len(skipped) > 0 {
		fmt.Fprintln(w)
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "CLOUD\tREGION\tRESULT\tDETAIL")
	for _, c := range r.Clouds {
		if c.Status == Skipped && len(c.Regions) == 0 {
			continue
		}
		if len(c.Regions) == 0 {
			fmt.Fprintf(tw, "%s\t-\t%s\t%s\n", c.Cloud, c.Status, firstLine(c.Err))
			continue
		}
		for _, rr := range c.Regions {
			var detail string
			switch rr.Status {
			case Refreshed:
				detail = fmt.Sprintf("%d offers (%d new), %d price changes", rr.Offers, rr.Saved.Inserted, rr.Saved.PriceChanges)
			case Empty:
				detail = fmt.Sprintf("no offers returned; kept %d stored offers", rr.Kept)
			case Failed:
				detail = fmt.Sprintf("%s; kept %d stored offers", regionErrText(rr), rr.Kept)
			}
			if rr.Dropped > 0 {
				detail += fmt.Sprintf("; dropped %d invalid offers", rr.Dropped)
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", rr.Cloud, rr.Region, rr.Status, detail)
		}
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	return r.writeTotals(w)
}

func (r *Report) writeTotals(w io.Writer) error {
	_, err := fmt.Fprintf(w, "\n%s refreshed, %d empty, %d failed; %s skipped; took %s.\n",
		countNoun(r.Count(Refreshed), "region"), r.Count(Empty), r.Count(Failed), countNoun(r.skipped(), "cloud"),
		r.Finished.Sub(r.Started).Round(time.Millisecond))
	return err
}

func countNoun(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}

func (r *Report) skipped() int {
	n := 0
	for _, c := range r.Clouds {
		if c.Status == Skipped {
			n++
		}
	}
	return n
}
