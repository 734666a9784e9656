package policy

import (
	"fmt"
	"math/bits"
	"strconv"
	"strings"
	"time"
)

// Cron is a parsed cron schedule: the five standard fields (minute, hour,
// day of month, month, day of week) in UTC, or one of the shorthands
// @yearly, @annually, @monthly, @weekly, @daily, @midnight and @hourly.
// As in Vixie cron, when both day of month and day of week are restricted
// a day matches if either does.
type Cron struct {
	// Expr is the schedule as written.
	Expr string
	// one bit per allowed value
	minute, hour, dom, month, dow uint64
	domStar, dowStar              bool
}

// CronError is a schedule that does not parse; Offset is the byte offset
// in the expression of the part that is wrong, so a policy error can point
// at its column.
type CronError struct {
	Offset int
	Msg    string
}

func (e *CronError) Error() string { return e.Msg }

var cronShorthands = map[string]string{
	"@yearly":   "0 0 1 1 *",
	"@annually": "0 0 1 1 *",
	"@monthly":  "0 0 1 * *",
	"@weekly":   "0 0 * * 0",
	"@daily":    "0 0 * * *",
	"@midnight": "0 0 * * *",
	"@hourly":   "0 * * * *",
}

var monthNames = []string{"jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec"}
var dayNames = []string{"sun", "mon", "tue", "wed", "thu", "fri", "sat"}

// ParseCron parses a cron schedule. Errors are *CronError.
func ParseCron(expr string) (*Cron, error) {
	if len(expr) > 256 {
		return nil, &CronError{0, fmt.Sprintf("schedule is %d characters; a cron expression is five short fields", len(expr))}
	}
	s := expr
	lead := len(s) - len(strings.TrimLeft(s, " \t"))
	if t := strings.TrimSpace(s); strings.HasPrefix(t, "@") {
		full, ok := cronShorthands[strings.ToLower(t)]
		if !ok {
			return nil, &CronError{lead, fmt.Sprintf("unknown schedule shorthand %q; want @hourly, @daily, @weekly, @monthly or @yearly, or five fields such as \"0 2 * * *\"", t)}
		}
		c, err := ParseCron(full)
		if err != nil {
			return nil, err
		}
		c.Expr = expr
		return c, nil
	}
	// Split on blanks, remembering where each field starts.
	type fieldAt struct {
		text string
		off  int
	}
	var fs []fieldAt
	for i := 0; i < len(s); {
		if s[i] == ' ' || s[i] == '\t' {
			i++
			continue
		}
		j := i
		for j < len(s) && s[j] != ' ' && s[j] != '\t' {
			j++
		}
		fs = append(fs, fieldAt{s[i:j], i})
		i = j
	}
	if len(fs) != 5 {
		off := 0
		if len(fs) > 5 {
			off = fs[5].off
		}
		return nil, &CronError{off, fmt.Sprintf("schedule %q has %d fields; want 5 (minute hour day-of-month month day-of-week, e.g. \"0 2 * * *\" for 02:00 UTC every day) or a shorthand such as @daily", expr, len(fs))}
	}
	c := &Cron{Expr: expr}
	specs := []struct {
		dst    *uint64
		name   string
		lo, hi int
		names  []string
	}{
		{&c.minute, "minute", 0, 59, nil},
		{&c.hour, "hour", 0, 23, nil},
		{&c.dom, "day of month", 1, 31, nil},
		{&c.month, "month", 1, 12, monthNames},
		{&c.dow, "day of week", 0, 7, dayNames},
	}
	for k, sp := range specs {
		v, err := cronField(fs[k].text, sp.name, sp.lo, sp.hi, sp.names)
		if err != nil {
			err.Offset += fs[k].off
			return nil, err
		}
		*sp.dst = v
	}
	if c.dow&(1<<7) != 0 { // 7 is Sunday too
		c.dow |= 1
		c.dow &^= 1 << 7
	}
	c.domStar = fs[2].text == "*" || strings.HasPrefix(fs[2].text, "*/")
	c.dowStar = fs[4].text == "*" || strings.HasPrefix(fs[4].text, "*/")
	if st := c.Stats(); st.Runs == 0 {
		return nil, &CronError{fs[2].off, fmt.Sprintf("schedule %q never runs (no such day); check the day of month and month", expr)}
	}
	return c, nil
}

// cronField parses one field: *, */n, a, a-b, a-b/n, and lists of those.
func cronField(f, name string, lo, hi int, names []string) (uint64, *CronError) {
	var set uint64
	off := 0
	for _, part := range strings.Split(f, ",") {
		if part == "" {
			return 0, &CronError{off, fmt.Sprintf("%s field %q has an empty list entry", name, f)}
		}
		rng, step := part, 1
		if i := strings.IndexByte(part, '/'); i >= 0 {
			rng = part[:i]
			n, err := strconv.Atoi(part[i+1:])
			if err != nil || n < 1 || n > hi-lo+1 {
				return 0, &CronError{off + i + 1, fmt.Sprintf("%s step %q: want a whole number from 1 to %d", name, part[i+1:], hi-lo+1)}
			}
			step = n
		}
		a, b := lo, hi
		if rng != "*" {
			var err *CronError
			if i := strings.IndexByte(rng, '-'); i > 0 {
				if a, err = cronValue(rng[:i], name, lo, hi, names, off); err != nil {
					return 0, err
				}
				if b, err = cronValue(rng[i+1:], name, lo, hi, names, off+i+1); err != nil {
					return 0, err
				}
				if b < a {
					return 0, &CronError{off, fmt.Sprintf("%s range %q runs backwards; write the smaller value first", name, rng)}
				}
			} else {
				if a, err = cronValue(rng, name, lo, hi, names, off); err != nil {
					return 0, err
				}
				b = a
				if step > 1 { // "5/15" means from 5 to the end, every 15
					b = hi
				}
			}
		}
		for v := a; v <= b; v += step {
			set |= 1 << uint(v)
		}
		off += len(part) + 1
	}
	return set, nil
}

func cronValue(s, name string, lo, hi int, names []string, off int) (int, *CronError) {
	for i, n := range names {
		if strings.EqualFold(s, n) {
			return i + lo, nil
		}
	}
	v, err := strconv.Atoi(s)
	if err != nil || v < lo || v > hi {
		hint := ""
		if names != nil {
			hint = fmt.Sprintf(" or a name (%s…)", strings.Join(names[:3], ", "))
		}
		return 0, &CronError{off, fmt.Sprintf("%s %q: want %d to %d%s", name, s, lo, hi, hint)}
	}
	return v, nil
}

// CronStats summarise a schedule over a four-year leap cycle.
type CronStats struct {
	// Runs over the cycle (2024-2027, 1,461 days).
	Runs int
	// PerMonth is the average runs per 30-day month (the budget period).
	PerMonth float64
	// MinGap is the shortest time between two consecutive runs.
	MinGap time.Duration
}

// cycleDays is 2024-01-01 to 2027-12-31: one leap cycle, so day-of-month
// and weekday schedules average out exactly.
const cycleDays = 1461

// Stats counts the runs day by day: a day matches or not, and a matching
// day runs at every allowed hour × minute.
func (c *Cron) Stats() CronStats {
	var times []int // minutes of the day, ascending
	for h := 0; h < 24; h++ {
		if c.hour&(1<<uint(h)) == 0 {
			continue
		}
		for m := 0; m < 60; m++ {
			if c.minute&(1<<uint(m)) != 0 {
				times = append(times, h*60+m)
			}
		}
	}
	st := CronStats{}
	if len(times) == 0 {
		return st
	}
	minGap := 1 << 62
	for i := 1; i < len(times); i++ {
		minGap = min(minGap, times[i]-times[i-1])
	}
	start := time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC)
	prev := -1
	days := 0
	for d := 0; d < cycleDays; d++ {
		t := start.AddDate(0, 0, d)
		if !c.dayMatches(t) {
			continue
		}
		days++
		if prev >= 0 {
			minGap = min(minGap, (d-prev)*1440+times[0]-times[len(times)-1])
		}
		prev = d
	}
	st.Runs = days * len(times)
	st.PerMonth = float64(st.Runs) * 30 / cycleDays
	if days == 1 && len(times) == 1 {
		minGap = cycleDays * 1440
	}
	st.MinGap = time.Duration(minGap) * time.Minute
	return st
}

func (c *Cron) dayMatches(t time.Time) bool {
	if c.month&(1<<uint(t.Month())) == 0 {
		return false
	}
	dom := c.dom&(1<<uint(t.Day())) != 0
	dow := c.dow&(1<<uint(t.Weekday())) != 0
	switch {
	case c.domStar && c.dowStar:
		return true
	case c.domStar:
		return dow
	case c.dowStar:
		return dom
	}
	return dom || dow
}

// Describe names common schedules ("hourly", "daily at 02:00 UTC",
// "weekly", "monthly"), else returns the expression.
func (c *Cron) Describe() string {
	one := func(x uint64) (int, bool) {
		if bits.OnesCount64(x) != 1 {
			return 0, false
		}
		return bits.TrailingZeros64(x), true
	}
	m, mOne := one(c.minute)
	h, hOne := one(c.hour)
	allMonths := c.month == 0x1ffe
	switch {
	case mOne && c.hour == 0xffffff && c.domStar && c.dowStar && allMonths:
		return "hourly"
	case mOne && hOne && c.domStar && c.dowStar && allMonths:
		return fmt.Sprintf("daily at %02d:%02d UTC", h, m)
	case mOne && hOne && c.domStar && !c.dowStar && bits.OnesCount64(c.dow) == 1 && allMonths:
		d, _ := one(c.dow)
		return fmt.Sprintf("weekly on %s at %02d:%02d UTC", strings.ToUpper(dayNames[d][:1])+dayNames[d][1:], h, m)
	case mOne && hOne && !c.domStar && c.dowStar && bits.OnesCount64(c.dom) == 1 && allMonths:
		d, _ := one(c.dom)
		return fmt.Sprintf("monthly on day %d at %02d:%02d UTC", d, h, m)
	}
	return fmt.Sprintf("%q", strings.TrimSpace(c.Expr))
}
