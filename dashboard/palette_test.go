package dashboard

import (
	"math"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// relativeLuminance follows WCAG 2.2's definition for sRGB "#rrggbb".
func relativeLuminance(t *testing.T, hex string) float64 {
	t.Helper()
	if len(hex) != 7 || hex[0] != '#' {
		t.Fatalf("colour %q is not #rrggbb", hex)
	}
	var c [3]float64
	for i := range 3 {
		v, err := strconv.ParseUint(hex[1+2*i:3+2*i], 16, 8)
		if err != nil {
			t.Fatalf("colour %q: %v", hex, err)
		}
		s := float64(v) / 255
		if s <= 0.04045 {
			c[i] = s / 12.92
		} else {
			c[i] = math.Pow((s+0.055)/1.055, 2.4)
		}
	}
	return 0.2126*c[0] + 0.7152*c[1] + 0.0722*c[2]
}

func contrast(t *testing.T, a, b string) float64 {
	la, lb := relativeLuminance(t, a), relativeLuminance(t, b)
	return (math.Max(la, lb) + 0.05) / (math.Min(la, lb) + 0.05)
}

func TestContrastRatioKnownValues(t *testing.T) {
	for _, tc := range []struct {
		a, b string
		want float64
	}{{"#000000", "#ffffff", 21}, {"#ffffff", "#ffffff", 1}, {"#777777", "#ffffff", 4.48}} {
		if got := contrast(t, tc.a, tc.b); math.Abs(got-tc.want) > 0.01 {
			t.Errorf("contrast(%s, %s) = %.2f, want %.2f", tc.a, tc.b, got, tc.want)
		}
	}
}

// TestPaletteContrast checks WCAG AA: 4.5:1 for text, 3:1 for chart lines
// and other graphics, on the backgrounds they are drawn on.
func TestPaletteContrast(t *testing.T) {
	p := palette
	for _, tc := range []struct {
		name, fg, bg string
		min          float64
	}{
		{"text on page", p.Text, p.Background, 4.5},
		{"text on panels", p.Text, p.Surface, 4.5},
		{"muted text on page", p.Muted, p.Background, 4.5},
		{"muted text on panels", p.Muted, p.Surface, 4.5},
		{"links on page", p.Link, p.Background, 4.5},
		{"links on panels", p.Link, p.Surface, 4.5},
		{"danger text", p.Danger, p.Surface, 4.5},
		{"warning text", p.Warn, p.Surface, 4.5},
		{"ok text", p.OK, p.Surface, 4.5},
		{"white on the header", "#ffffff", p.Text, 4.5},
		{"white on buttons", "#ffffff", p.Link, 4.5},
		{"text on an error line", p.Text, "#fde8e7", 4.5},
		{"spot line", p.Spot, p.Surface, 3},
		{"on-demand line", p.OnDemand, p.Surface, 3},
		{"forecast line", p.Forecast, p.Surface, 3},
		{"aws bars", p.Cloud["aws"], p.Surface, 3},
		{"gcp bars", p.Cloud["gcp"], p.Surface, 3},
		{"azure bars", p.Cloud["azure"], p.Surface, 3},
	} {
		if got := contrast(t, tc.fg, tc.bg); got < tc.min {
			t.Errorf("%s: %s on %s has contrast %.2f:1, want at least %.1f:1", tc.name, tc.fg, tc.bg, got, tc.min)
		}
	}
}

// TestStylesheetMatchesPalette keeps app.css's custom properties equal to
// the palette the contrast test checks.
func TestStylesheetMatchesPalette(t *testing.T) {
	css, err := staticFS.ReadFile("static/app.css")
	if err != nil {
		t.Fatal(err)
	}
	vars := map[string]string{}
	for _, m := range regexp.MustCompile(`--([a-z-]+):\s*(#[0-9a-fA-F]{6})`).FindAllStringSubmatch(string(css), -1) {
		vars[m[1]] = strings.ToLower(m[2])
	}
	for name, want := range map[string]string{"background": palette.Background, "surface": palette.Surface, "text": palette.Text,
		"muted": palette.Muted, "link": palette.Link, "grid": palette.Grid, "danger": palette.Danger, "warn": palette.Warn, "ok": palette.OK} {
		if vars[name] != want {
			t.Errorf("app.css --%s = %q, palette.go has %q", name, vars[name], want)
		}
	}
	// Every colour literal in the stylesheet outside :root is white or the
	// error-line tint, both checked above.
	body := string(css)
	if i := strings.Index(body, "}"); i > 0 {
		body = body[i:]
	}
	for _, c := range regexp.MustCompile(`#[0-9a-fA-F]{6}\b`).FindAllString(body, -1) {
		if c != "#ffffff" && c != "#fde8e7" {
			t.Errorf("app.css uses colour %s outside the palette", c)
		}
	}
}
