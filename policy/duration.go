package policy

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
)

// Day is 24 hours; policy durations accept "d" as a unit ("3d", "1d12h").
const Day = 24 * time.Hour

// ParseDuration parses a policy duration: Go duration syntax ("72h", "90m",
// "1h30m") plus days ("3d", "1.5d", "1d12h"). A sign is rejected: policy
// durations are lengths of time, and a negative one is always a mistake.
func ParseDuration(s string) (time.Duration, error) {
	in := s
	if s == "" {
		return 0, errors.New("empty duration; write e.g. 72h, 90m or 3d")
	}
	if s[0] == '-' {
		return 0, fmt.Errorf("duration %q is negative; want a length of time such as %s", in, s[1:])
	}
	if s[0] == '+' {
		return 0, fmt.Errorf("duration %q must not have a sign; write %s", in, s[1:])
	}
	if _, err := strconv.ParseFloat(s, 64); err == nil && s != "0" {
		return 0, fmt.Errorf("duration %q has no unit; write e.g. %sh or %sm", in, s, s)
	}
	var total time.Duration
	for s != "" {
		// One number and its unit at a time, so days can mix with Go units.
		i := 0
		for i < len(s) && (s[i] == '.' || ('0' <= s[i] && s[i] <= '9')) {
			i++
		}
		j := i
		for j < len(s) && !(s[j] == '.' || ('0' <= s[j] && s[j] <= '9')) {
			j++
		}
		if i == 0 || (j == i && s[:i] != "0") {
			return 0, fmt.Errorf("invalid duration %q; write e.g. 72h, 90m, 3d or 1d12h", in)
		}
		num, unit := s[:i], s[i:j]
		var d time.Duration
		if unit == "d" {
			f, err := strconv.ParseFloat(num, 64)
			if err != nil {
				return 0, fmt.Errorf("invalid duration %q; write e.g. 72h, 90m, 3d or 1d12h", in)
			}
			h := f * float64(Day)
			if h >= math.MaxInt64 {
				return 0, fmt.Errorf("duration %q is too long", in)
			}
			d = time.Duration(h)
		} else {
			var err error
			d, err = time.ParseDuration(num + unit)
			if err != nil {
				if strings.Contains(err.Error(), "unknown unit") {
					return 0, fmt.Errorf("duration %q has unknown unit %q; use ns, us, ms, s, m, h or d", in, unit)
				}
				return 0, fmt.Errorf("invalid duration %q; write e.g. 72h, 90m, 3d or 1d12h", in)
			}
		}
		if total > math.MaxInt64-d {
			return 0, fmt.Errorf("duration %q is too long", in)
		}
		total += d
		s = s[j:]
	}
	return total, nil
}

// FormatDuration writes a duration the way a policy would: whole days as
// "3d", otherwise Go syntax without trailing zero units ("1h30m", "72h" stays
// "3d").
func FormatDuration(d time.Duration) string {
	if d > 0 && d%Day == 0 {
		return strconv.FormatInt(int64(d/Day), 10) + "d"
	}
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = s[:len(s)-2]
	}
	if strings.HasSuffix(s, "h0m") {
		s = s[:len(s)-2]
	}
	return s
}
