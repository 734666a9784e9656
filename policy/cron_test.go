package policy

import (
	"errors"
	"math"
	"strings"
	"testing"
	"time"
)

func TestCronStats(t *testing.T) {
	tests := []struct {
		expr     string
		perMonth float64
		gap      time.Duration
		describe string
	}{
		{"0 2 * * *", 30, 24 * time.Hour, "daily at 02:00 UTC"},
		{"@daily", 30, 24 * time.Hour, "daily at 00:00 UTC"},
		{"@hourly", 720, time.Hour, "hourly"},
		{"30 * * * *", 720, time.Hour, "hourly"},
		{"0 3 * * 1", 209 * 30.0 / 1461, 7 * 24 * time.Hour, "weekly on Mon at 03:00 UTC"},
		{"0 3 * * sun", 208 * 30.0 / 1461, 7 * 24 * time.Hour, "weekly on Sun at 03:00 UTC"},
		{"0 3 * * 7", 208 * 30.0 / 1461, 7 * 24 * time.Hour, "weekly on Sun at 03:00 UTC"},
		{"0 0 1 * *", 48 * 30.0 / 1461, 28 * 24 * time.Hour, "monthly on day 1 at 00:00 UTC"},
		{"0 */6 * * *", 120, 6 * time.Hour, `"0 */6 * * *"`},
		{"0 9-17 * * mon-fri", 9 * 30 * 1045.0 / 1461, time.Hour, `"0 9-17 * * mon-fri"`},
		{"0 0 29 2 *", 30.0 / 1461, 1461 * 24 * time.Hour, `"0 0 29 2 *"`},
		// Both day fields restricted: either matches (Vixie cron).
		{"0 0 1 * mon", 248 * 30.0 / 1461, 24 * time.Hour, `"0 0 1 * mon"`},
	}
	for _, tt := range tests {
		c, err := ParseCron(tt.expr)
		if err != nil {
			t.Errorf("%q: %v", tt.expr, err)
			continue
		}
		st := c.Stats()
		if math.Abs(st.PerMonth-tt.perMonth) > 0.01 {
			t.Errorf("%q: %.4f runs/month, want %.4f", tt.expr, st.PerMonth, tt.perMonth)
		}
		if st.MinGap != tt.gap {
			t.Errorf("%q: min gap %v, want %v", tt.expr, st.MinGap, tt.gap)
		}
		if d := c.Describe(); d != tt.describe {
			t.Errorf("%q: describe %q, want %q", tt.expr, d, tt.describe)
		}
	}
}

func TestCronErrors(t *testing.T) {
	tests := []struct {
		expr   string
		offset int
		want   string
	}{
		{"0 2 * *", 0, "has 4 fields"},
		{"0 2 * * * *", 10, "has 6 fields"},
		{"60 * * * *", 0, "minute \"60\""},
		{"0 24 * * *", 2, "hour \"24\""},
		{"0 0 0 * *", 4, "day of month \"0\""},
		{"0 0 * 13 *", 6, "month \"13\""},
		{"0 0 * * 8", 8, "day of week \"8\""},
		{"0 0 * * 1,,2", 10, "empty list entry"},
		{"*/x * * * *", 2, "minute step"},
		{"0 5-1 * * *", 2, "runs backwards"},
		{"0 0 30 2 *", 4, "never runs"},
		{"@often", 0, "unknown schedule shorthand"},
		{"", 0, "has 0 fields"},
		{strings.Repeat("1", 300), 0, "300 characters"},
	}
	for _, tt := range tests {
		_, err := ParseCron(tt.expr)
		var ce *CronError
		if !errors.As(err, &ce) {
			t.Errorf("%q: err %v, want a CronError", tt.expr, err)
			continue
		}
		if ce.Offset != tt.offset || !strings.Contains(ce.Msg, tt.want) {
			t.Errorf("%q: offset %d %q, want offset %d and %q", tt.expr, ce.Offset, ce.Msg, tt.offset, tt.want)
		}
	}
}

// FuzzParseCron: no input panics; an accepted schedule runs at least once
// in the cycle, its offsets stay inside the expression, and its gap is
// positive.
//
//	go test ./policy -run '^$' -fuzz FuzzParseCron -fuzztime 20s
func FuzzParseCron(f *testing.F) {
	for _, s := range []string{"0 2 * * *", "@weekly", "*/15 9-17 * * mon-fri", "0 0 1,15 * *", "5/10 * * * *", "0 0 29 2 *", "0 0 31 2 *", "* * * * 0-7", "1-2/0 * * * *", "0 0 * jan-dec *", " 0 2 * * * "} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		c, err := ParseCron(s)
		if err != nil {
			var ce *CronError
			if !errors.As(err, &ce) || ce.Offset < 0 || ce.Offset > len(s) || ce.Msg == "" {
				t.Fatalf("%q: bad error %#v", s, err)
			}
			return
		}
		st := c.Stats()
		if st.Runs < 1 || st.MinGap <= 0 || st.PerMonth <= 0 {
			t.Fatalf("%q accepted with stats %+v", s, st)
		}
		_ = c.Describe()
	})
}
