package dashboard

import (
	"bytes"
	"fmt"
	"image/color"
	"math"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/font"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgsvg"

	"github.com/patcheval/patcheval/evaluate/stats"
	"github.com/patcheval/patcheval/internal/lazyre"
)

// PlotSeries is one variant's values of one (benchmark, metric).
type PlotSeries struct {
	Variant string
	Values  []float64
}

// Plot renders one benchmark metric as SVG: every sample as a point
// (spread sideways so equal values stay visible), the mean as a bar and
// its 95% confidence interval (Student's t) as whiskers, one column per
// variant. Black is written as currentColor so the plot follows the
// page's light or dark text colour.
func Plot(title, unit string, series []PlotSeries) ([]byte, error) {
	p := plot.New()
	p.Title.TextStyle.Font.Variant = "Sans"
	p.Y.Label.TextStyle.Font.Variant = "Sans"
	p.X.Tick.Label.Font.Variant = "Sans"
	p.Y.Tick.Label.Font.Variant = "Sans"
	p.Title.Text = title
	p.Title.TextStyle.Font.Size = vg.Points(10)
	p.Y.Label.Text = unit
	p.Y.Label.TextStyle.Font.Size = vg.Points(9)
	p.X.Tick.Label.Font.Size = vg.Points(8)
	p.Y.Tick.Label.Font.Size = vg.Points(8)
	p.BackgroundColor = color.Transparent
	p.Add(plotter.NewGrid())

	names := make([]string, len(series))
	var means, lo, hi []float64
	lowest, highest := math.Inf(1), math.Inf(-1)
	for i, s := range series {
		names[i] = s.Variant
		pts := make(plotter.XYs, 0, len(s.Values))
		for j, v := range s.Values {
			if math.IsNaN(v) || math.IsInf(v, 0) {
				continue
			}
			pts = append(pts, plotter.XY{X: float64(i) + jitter(j, len(s.Values)), Y: v})
			lowest, highest = math.Min(lowest, v), math.Max(highest, v)
		}
		if len(pts) > 0 {
			sc, err := plotter.NewScatter(pts)
			if err != nil {
				return nil, err
			}
			sc.GlyphStyle.Shape = draw.CircleGlyph{}
			sc.GlyphStyle.Radius = vg.Points(2)
			sc.GlyphStyle.Color = palette[i%len(palette)]
			p.Add(sc)
		}
		sum := stats.Summarize(s.Values)
		m, half := sum.Mean, 0.0
		if sum.N >= 2 {
			half = stats.TQuantile(0.975, float64(sum.N-1)) * sum.StdDev / math.Sqrt(float64(sum.N))
		}
		means, lo, hi = append(means, m), append(lo, m-half), append(hi, m+half)
	}
	for i := range series {
		if math.IsNaN(means[i]) || len(series[i].Values) == 0 {
			continue
		}
		x := float64(i) + 0.32
		ci := plotter.XYs{{X: x, Y: lo[i]}, {X: x, Y: hi[i]}}
		l, err := plotter.NewLine(ci)
		if err != nil {
			return nil, err
		}
		l.LineStyle.Width = vg.Points(1.2)
		p.Add(l)
		for _, y := range []float64{lo[i], hi[i]} {
			cap, _ := plotter.NewLine(plotter.XYs{{X: x - 0.05, Y: y}, {X: x + 0.05, Y: y}})
			cap.LineStyle.Width = vg.Points(1)
			p.Add(cap)
		}
		mean, _ := plotter.NewLine(plotter.XYs{{X: float64(i) - 0.25, Y: means[i]}, {X: x + 0.08, Y: means[i]}})
		mean.LineStyle.Width = vg.Points(1.6)
		mean.LineStyle.Color = palette[i%len(palette)]
		p.Add(mean)
		lowest, highest = math.Min(lowest, lo[i]), math.Max(highest, hi[i])
	}
	p.NominalX(names...)
	p.X.Min, p.X.Max = -0.6, float64(len(series))-0.4
	if !math.IsInf(lowest, 0) {
		pad := (highest - lowest) * 0.08
		if pad == 0 {
			pad = math.Max(math.Abs(highest)*0.01, 1e-9)
		}
		p.Y.Min, p.Y.Max = lowest-pad, highest+pad
	}
	w := vg.Length(max(280, 110*len(series)+90))
	c := vgsvg.New(w, 210)
	p.Draw(draw.New(c))
	var buf bytes.Buffer
	if _, err := c.WriteTo(&buf); err != nil {
		return nil, fmt.Errorf("plot %s: %w", title, err)
	}
	return themed(buf.Bytes()), nil
}

// palette is distinguishable in light and dark mode (Okabe-Ito).
var palette = []color.Color{
	color.RGBA{0x00, 0x72, 0xb2, 0xff}, color.RGBA{0xe6, 0x9f, 0x00, 0xff}, color.RGBA{0x00, 0x9e, 0x73, 0xff},
	color.RGBA{0xcc, 0x79, 0xa7, 0xff}, color.RGBA{0xd5, 0x5e, 0x00, 0xff}, color.RGBA{0x56, 0xb4, 0xe9, 0xff},
}

// jitter spreads n points of one column over ±0.18 deterministically.
func jitter(j, n int) float64 {
	if n <= 1 {
		return 0
	}
	return -0.18 + 0.36*float64(j)/float64(n-1)
}

var (
	blackRE  = lazyre.New(`#000000`)
	headerRE = lazyre.New(`(?s)^(<\?xml[^>]*>\s*)?(<!DOCTYPE[^>]*>\s*)?(<!--.*?-->\s*)?`)
	gridRE   = lazyre.New(`#808080`)
	// vgsvg writes a transparent colour as "#-8000...": not CSS.
	transpRE = lazyre.New(`fill:#-[-0-9]+`)
	fontRE   = lazyre.New(`font-family:Liberation Sans`)
)

// themed makes the SVG inline-ready (no XML prologue), draws black (lines
// and text) in currentColor, the grid faintly, and names the font with
// fallbacks (gonum laid the text out with Liberation Sans, which Arial
// and Arimo match in width).
func themed(svg []byte) []byte {
	svg = headerRE.ReplaceAll(svg, nil)
	svg = blackRE.ReplaceAll(svg, []byte("currentColor"))
	svg = gridRE.ReplaceAll(svg, []byte("rgba(128,128,128,0.35)"))
	svg = transpRE.ReplaceAll(svg, []byte("fill:none"))
	svg = fontRE.ReplaceAll(svg, []byte("font-family:'Liberation Sans',Arimo,Arial,sans-serif"))
	return bytes.Replace(svg, []byte("<svg "), []byte(`<svg fill="currentColor" `), 1)
}

// TrendSeries is one comparison's change over a trend's evaluations.
type TrendSeries struct {
	Name   string
	Points []TrendPoint // one per label; OK false where it has none
}

// TrendPoint is a change in percent and, when Bounded, its confidence
// interval.
type TrendPoint struct {
	OK, Bounded   bool
	Value, Lo, Hi float64
}

// TrendPlot renders values over evaluations as SVG, drawn as Plot
// draws: per series its values joined by a line, each with its interval
// as whiskers, the evaluations named along the x axis in the given
// order. With change (the values are changes in percent) zero is always
// in view and marked by a dashed line (no change).
func TrendPlot(title, unit string, labels []string, series []TrendSeries, change bool) ([]byte, error) {
	p := plot.New()
	for _, f := range []*font.Variant{&p.Title.TextStyle.Font.Variant, &p.Y.Label.TextStyle.Font.Variant,
		&p.X.Tick.Label.Font.Variant, &p.Y.Tick.Label.Font.Variant, &p.Legend.TextStyle.Font.Variant} {
		*f = "Sans"
	}
	p.Title.Text, p.Y.Label.Text = title, unit
	p.Title.TextStyle.Font.Size = vg.Points(10)
	p.Y.Label.TextStyle.Font.Size = vg.Points(9)
	p.X.Tick.Label.Font.Size, p.Y.Tick.Label.Font.Size = vg.Points(8), vg.Points(8)
	p.Legend.TextStyle.Font.Size = vg.Points(8)
	p.Legend.Top = true
	p.BackgroundColor = color.Transparent
	p.Add(plotter.NewGrid())
	lowest, highest := math.Inf(1), math.Inf(-1)
	if change {
		lowest, highest = 0, 0 // zero is always shown
	}
	for i, s := range series {
		col := palette[i%len(palette)]
		dx := (float64(i) - float64(len(series)-1)/2) * 0.08 // whiskers side by side
		var pts plotter.XYs
		for j, pt := range s.Points {
			if !pt.OK || math.IsNaN(pt.Value) || math.IsInf(pt.Value, 0) {
				continue
			}
			x := float64(j) + dx
			pts = append(pts, plotter.XY{X: x, Y: pt.Value})
			lowest, highest = math.Min(lowest, pt.Value), math.Max(highest, pt.Value)
			if !pt.Bounded {
				continue
			}
			wh, err := plotter.NewLine(plotter.XYs{{X: x, Y: pt.Lo}, {X: x, Y: pt.Hi}})
			if err != nil {
				return nil, err
			}
			wh.LineStyle.Color, wh.LineStyle.Width = col, vg.Points(1)
			p.Add(wh)
			lowest, highest = math.Min(lowest, pt.Lo), math.Max(highest, pt.Hi)
		}
		if len(pts) == 0 {
			continue
		}
		l, sc, err := plotter.NewLinePoints(pts)
		if err != nil {
			return nil, err
		}
		l.LineStyle.Color, l.LineStyle.Width = col, vg.Points(1.2)
		sc.GlyphStyle.Shape, sc.GlyphStyle.Radius, sc.GlyphStyle.Color = draw.CircleGlyph{}, vg.Points(2.2), col
		p.Add(l, sc)
		p.Legend.Add(s.Name, l, sc)
	}
	if change {
		zero, err := plotter.NewLine(plotter.XYs{{X: -0.5, Y: 0}, {X: float64(len(labels)) - 0.5, Y: 0}})
		if err != nil {
			return nil, err
		}
		zero.LineStyle.Dashes = []vg.Length{vg.Points(3), vg.Points(3)}
		p.Add(zero)
	}
	if math.IsInf(lowest, 0) { // nothing to plot
		lowest, highest = 0, 0
	}
	p.NominalX(labels...)
	p.X.Min, p.X.Max = -0.5, float64(len(labels))-0.5
	pad := math.Max((highest-lowest)*0.1, 0.5)
	if !change {
		pad = math.Max((highest-lowest)*0.1, math.Abs(highest)*0.001)
	}
	p.Y.Min, p.Y.Max = lowest-pad, highest+pad*2.5 // room for the legend
	c := vgsvg.New(vg.Length(max(360, 46*len(labels)+120)), 240)
	p.Draw(draw.New(c))
	var buf bytes.Buffer
	if _, err := c.WriteTo(&buf); err != nil {
		return nil, fmt.Errorf("plot %s: %w", title, err)
	}
	return themed(buf.Bytes()), nil
}
