package report

import (
	"bytes"
	"fmt"
	"image"
	"image/color"
	"image/draw"
	"image/png"

	"golang.org/x/image/font"
	"golang.org/x/image/font/basicfont"
	"golang.org/x/image/math/fixed"
)

// Chart colours: a dark blue for spend, a light grey for the on-demand
// baseline behind it (contrast ratio against white above 3:1 for the bars).
var (
	colSpend    = color.RGBA{0x1f, 0x4e, 0x9c, 0xff}
	colBaseline = color.RGBA{0xb8, 0xc2, 0xd1, 0xff}
	colText     = color.RGBA{0x20, 0x20, 0x20, 0xff}
	colAxis     = color.RGBA{0x80, 0x80, 0x80, 0xff}
)

// SpendChart draws spend per day against the all-on-demand baseline as a
// PNG bar chart (800×360), for the report's Slack image. It returns nil
// when there is nothing to draw.
func SpendChart(r Report) ([]byte, error) {
	days := r.Spend.ByDay
	if len(days) == 0 {
		return nil, nil
	}
	const W, H = 800, 360
	const left, right, top, bottom = 70, 20, 40, 50
	img := image.NewRGBA(image.Rect(0, 0, W, H))
	draw.Draw(img, img.Bounds(), image.NewUniform(color.White), image.Point{}, draw.Src)
	maxV := 0.0
	for _, d := range days {
		maxV = max(maxV, d.OnDemand, d.Cost)
	}
	if maxV <= 0 {
		maxV = 1
	}
	plotW, plotH := W-left-right, H-top-bottom
	text(img, left, 24, fmt.Sprintf("Spend per day (blue) vs all-on-demand (grey), %s to %s UTC",
		r.From.UTC().Format("2006-01-02"), r.To.UTC().Format("2006-01-02")))
	// Axis and three gridline labels.
	fill(img, left, top, 1, plotH, colAxis)
	fill(img, left, top+plotH, plotW, 1, colAxis)
	for i := 0; i <= 2; i++ {
		v := maxV * float64(i) / 2
		y := top + plotH - int(float64(plotH)*float64(i)/2)
		text(img, 4, y+4, Money(v))
		fill(img, left-4, y, 4, 1, colAxis)
	}
	slot := plotW / len(days)
	bw := max(2, slot*2/3)
	for i, d := range days {
		x := left + i*slot + (slot-bw)/2
		hb := int(float64(plotH) * d.OnDemand / maxV)
		hs := int(float64(plotH) * d.Cost / maxV)
		fill(img, x, top+plotH-hb, bw, hb, colBaseline)
		fill(img, x+bw/4, top+plotH-hs, bw/2, hs, colSpend)
		if len(days) <= 10 || i%((len(days)+9)/10) == 0 {
			label := d.Name
			if len(label) == 10 {
				label = label[5:] // MM-DD
			}
			text(img, x, top+plotH+16, label)
		}
	}
	var buf bytes.Buffer
	if err := png.Encode(&buf, img); err != nil {
		return nil, fmt.Errorf("report: encode chart: %w", err)
	}
	return buf.Bytes(), nil
}

func fill(img *image.RGBA, x, y, w, h int, c color.Color) {
	if w <= 0 || h <= 0 {
		return
	}
	draw.Draw(img, image.Rect(x, y, x+w, y+h), image.NewUniform(c), image.Point{}, draw.Src)
}

func text(img *image.RGBA, x, y int, s string) {
	d := &font.Drawer{Dst: img, Src: image.NewUniform(colText), Face: basicfont.Face7x13,
		Dot: fixed.P(x, y)}
	d.DrawString(s)
}
