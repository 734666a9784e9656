package dashboard

import (
	"encoding/xml"
	"strings"
	"testing"
	"time"
)

func TestAxisLabel(t *testing.T) {
	for _, tc := range []struct {
		v    float64
		unit string
		want string
	}{{0, "$", "$0"}, {12500, "$", "$12.5k"}, {0.35, "$/h", "$0.35/h"}, {8, "GPUs", "8 GPUs"}, {2.5, "", "2.50"}, {150, "$/h", "$150/h"}} {
		if got := axisLabel(tc.v, tc.unit); got != tc.want {
			t.Errorf("axisLabel(%v, %q) = %q, want %q", tc.v, tc.unit, got, tc.want)
		}
	}
}

// TestChartsAreWellFormedAndEscaped parses the SVG as XML: hostile text
// must come out as character data, never as elements.
func TestChartsAreWellFormedAndEscaped(t *testing.T) {
	at := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	charts := map[string]string{
		"line": string(LineChart{ID: `x"y`, Title: xssScript, Desc: xssImg, Unit: "$/h", Until: at.Add(48 * time.Hour), LimitLabel: xssScript,
			Series: []Series{{Name: xssImg, Color: "#000000", Step: true, Markers: true, Points: []Point{{at, 1}, {at.Add(time.Hour), 2}}}}}.SVG()),
		"empty": string(LineChart{ID: "e", Title: "t", Desc: "d"}.SVG()),
		"bars":  string(BarChart{ID: "b", Title: xssScript, Desc: xssImg, Unit: "GPUs", Bars: []Bar{{Label: xssImg, Value: 3, Color: "#000000"}}}.SVG()),
	}
	for name, svg := range charts {
		d := xml.NewDecoder(strings.NewReader(svg))
		var elems []string
		for {
			tok, err := d.Token()
			if err != nil {
				if err.Error() != "EOF" {
					t.Fatalf("%s: not well-formed: %v\n%s", name, err, svg)
				}
				break
			}
			if se, ok := tok.(xml.StartElement); ok {
				elems = append(elems, se.Name.Local)
			}
		}
		for _, e := range elems {
			switch e {
			case "svg", "title", "desc", "rect", "line", "text", "path", "circle":
			default:
				t.Errorf("%s: unexpected element <%s>", name, e)
			}
		}
		if !strings.HasPrefix(svg, "<svg") || !strings.Contains(svg, `role="img"`) || !strings.Contains(svg, "<title") {
			t.Errorf("%s: no accessible title", name)
		}
	}
	if !strings.Contains(charts["empty"], "no data recorded") {
		t.Error("an empty chart does not say so")
	}
}
