package dashboard

import (
	"fmt"
	"html/template"
	"math"
	"strconv"
	"strings"
	"time"
)

// funcs are the templates' formatting helpers. None of them returns
// template.HTML from outside data: escaping is left to html/template.
var funcs = template.FuncMap{
	"usd":     usd,
	"price":   price,
	"hours":   hours,
	"pct":     pct,
	"ago":     ago,
	"ts":      ts,
	"num":     num,
	"add":     func(a, b int) int { return a + b },
	"join":    strings.Join,
	"lower":   strings.ToLower,
	"nonzero": func(t time.Time) bool { return !t.IsZero() },
}

// usd formats dollars for a total: $1,234.56.
func usd(v float64) string {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return "—"
	}
	neg := v < 0
	s := strconv.FormatFloat(math.Abs(v), 'f', 2, 64)
	intPart, frac, _ := strings.Cut(s, ".")
	var b strings.Builder
	for i, r := range intPart {
		if i > 0 && (len(intPart)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(r)
	}
	out := "$" + b.String() + "." + frac
	if neg {
		out = "−" + out
	}
	return out
}

// price formats an hourly price with enough digits for cheap GPUs.
func price(v float64) string {
	if v <= 0 || math.IsNaN(v) || math.IsInf(v, 0) {
		return "—"
	}
	if v < 0.01 {
		return "$" + strconv.FormatFloat(v, 'f', 5, 64)
	}
	if v < 1 {
		return "$" + strconv.FormatFloat(v, 'f', 4, 64)
	}
	return "$" + strconv.FormatFloat(v, 'f', 3, 64)
}

func hours(v float64) string {
	switch {
	case v <= 0:
		return "—"
	case v < 10:
		return strconv.FormatFloat(v, 'f', 1, 64) + " h"
	default:
		return strconv.FormatFloat(v, 'f', 0, 64) + " h"
	}
}

func pct(v float64) string { return strconv.FormatFloat(v, 'f', 1, 64) + "%" }

func num(v float64) string {
	if v == math.Trunc(v) {
		return strconv.FormatFloat(v, 'f', 0, 64)
	}
	return strconv.FormatFloat(v, 'f', 2, 64)
}

func ts(t time.Time) string {
	if t.IsZero() {
		return "—"
	}
	return t.UTC().Format("2006-01-02 15:04 UTC")
}

// ago says how long before now t was, coarsely.
func ago(now, t time.Time) string {
	if t.IsZero() {
		return "never"
	}
	d := now.Sub(t)
	if d < 0 {
		return "in the future"
	}
	switch {
	case d < time.Minute:
		return fmt.Sprintf("%ds ago", int(d.Seconds()))
	case d < time.Hour:
		return fmt.Sprintf("%dm ago", int(d.Minutes()))
	case d < 48*time.Hour:
		return fmt.Sprintf("%dh ago", int(d.Hours()))
	default:
		return fmt.Sprintf("%dd ago", int(d.Hours()/24))
	}
}
