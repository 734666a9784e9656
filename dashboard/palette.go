package dashboard

// palette holds the dashboard's colours. static/app.css declares the same
// values as CSS custom properties; a test checks that the two agree and
// that text and chart colours reach WCAG contrast (4.5:1 for text, 3:1 for
// chart lines) against the backgrounds they are drawn on.
var palette = struct {
	Background, Surface, Text, Muted, Link, Grid string
	Danger, Warn, OK                             string
	Spot, OnDemand, Forecast                     string
	Cloud                                        map[string]string
}{
	Background: "#f6f7f9",
	Surface:    "#ffffff",
	Text:       "#1b1f24",
	Muted:      "#57606a",
	Link:       "#0b57b0",
	Grid:       "#d8dee4",
	Danger:     "#b42318",
	Warn:       "#8a5300",
	OK:         "#1a7f37",
	Spot:       "#0b57b0",
	OnDemand:   "#8a3ffc",
	Forecast:   "#b42318",
	Cloud: map[string]string{
		"aws":   "#b35900",
		"gcp":   "#1a7f37",
		"azure": "#0b57b0",
	},
}

// cloudColor is a cloud's chart colour (text colour for unknown clouds).
func cloudColor(c string) string {
	if v, ok := palette.Cloud[c]; ok {
		return v
	}
	return palette.Text
}
