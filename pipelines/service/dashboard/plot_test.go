package dashboard

import (
	"bytes"
	"encoding/xml"
	"slices"
	"strings"
	"testing"
)

func TestPlotSVG(t *testing.T) {
	svg, err := Plot("kill ns/op", "ns/op", []PlotSeries{
		{Variant: "voluntary", Values: []float64{100, 101, 102, 100.5}},
		{Variant: "voluntary+dyn", Values: []float64{120, 121, 119}},
		{Variant: "full", Values: []float64{130}},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("SVG: %d bytes", len(svg))
	if !bytes.HasPrefix(bytes.TrimSpace(svg), []byte("<svg")) {
		t.Errorf("SVG does not start with <svg: %.80q", svg)
	}
	// Well-formed XML, and the variant names are drawn as tick labels.
	d := xml.NewDecoder(bytes.NewReader(svg))
	var text strings.Builder
	for {
		tok, err := d.Token()
		if err != nil {
			if err.Error() != "EOF" {
				t.Fatalf("SVG is not well-formed: %v", err)
			}
			break
		}
		if cd, ok := tok.(xml.CharData); ok {
			text.Write(cd)
		}
	}
	for _, want := range []string{"voluntary", "voluntary+dyn", "full", "kill ns/op"} {
		if !strings.Contains(text.String(), want) {
			t.Errorf("SVG text lacks %q", want)
		}
	}
	if !bytes.Contains(svg, []byte(`<svg fill="currentColor"`)) {
		t.Errorf("SVG text is not drawn in currentColor")
	}
	if bytes.Contains(svg, []byte("#000000")) || bytes.Contains(svg, []byte("#-8000")) {
		t.Errorf("SVG still draws in fixed black (dark mode would hide it)")
	}
	if len(svg) > 64<<10 {
		t.Errorf("SVG is %d bytes, want < 64 KiB", len(svg))
	}
}

// TestTrendPlotSVG: the trend plot is well-formed SVG naming its title,
// its evaluations and its comparisons (the legend), drawn in
// currentColor, with a dashed line at zero.
func TestTrendPlotSVG(t *testing.T) {
	svg, err := TrendPlot("kill ns/op", "change %", []string{"#3", "#7", "#9"}, []TrendSeries{
		{Name: "voluntary → voluntary+dyn", Points: []TrendPoint{{OK: true, Bounded: true, Value: 14.9, Lo: 14.7, Hi: 15.1},
			{OK: true, Bounded: true, Value: 6, Lo: 5.8, Hi: 6.3}, {OK: true, Value: 7}}},
		{Name: "voluntary → full", Points: []TrendPoint{{OK: true, Bounded: true, Value: 1, Lo: 0.9, Hi: 1.2}, {}, {OK: true, Bounded: true, Value: -0.5, Lo: -1, Hi: 0}}},
	}, true)
	if err != nil {
		t.Fatal(err)
	}
	d := xml.NewDecoder(bytes.NewReader(svg))
	var text strings.Builder
	paths := 0
	for {
		tok, err := d.Token()
		if err != nil {
			if err.Error() != "EOF" {
				t.Fatalf("SVG is not well-formed: %v", err)
			}
			break
		}
		switch x := tok.(type) {
		case xml.CharData:
			text.Write(x)
		case xml.StartElement:
			if x.Name.Local == "path" {
				paths++
			}
		}
	}
	for _, want := range []string{"kill ns/op", "change %", "#3", "#7", "#9", "voluntary → voluntary+dyn", "voluntary → full"} {
		if !strings.Contains(text.String(), want) {
			t.Errorf("SVG text lacks %q", want)
		}
	}
	if !bytes.Contains(svg, []byte(`<svg fill="currentColor"`)) || bytes.Contains(svg, []byte("#000000")) {
		t.Errorf("the trend plot is not drawn in currentColor")
	}
	if !bytes.Contains(svg, []byte("stroke-dasharray")) {
		t.Errorf("no dashed zero line")
	}
	if paths == 0 {
		t.Errorf("no paths drawn")
	}
}

// TestTrendPlotValues: plotted as values (not changes) the axis fits
// the values (zero is not forced into view) and there is no zero line.
func TestTrendPlotValues(t *testing.T) {
	svg, err := TrendPlot("kill ns/op", "ns", []string{"#3", "#7"}, []TrendSeries{
		{Name: "voluntary", Points: []TrendPoint{{OK: true, Bounded: true, Value: 1480, Lo: 1476, Hi: 1484}, {OK: true, Value: 1490}}},
	}, false)
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(svg, []byte("stroke-dasharray")) {
		t.Errorf("a zero line on a plot of values")
	}
	d := xml.NewDecoder(bytes.NewReader(svg))
	var texts []string
	for {
		tok, err := d.Token()
		if err != nil {
			break
		}
		if x, ok := tok.(xml.CharData); ok && strings.TrimSpace(string(x)) != "" {
			texts = append(texts, strings.TrimSpace(string(x)))
		}
	}
	if slices.Contains(texts, "0") || !slices.ContainsFunc(texts, func(s string) bool { return strings.HasPrefix(s, "14") }) {
		t.Errorf("the axis does not fit 1476-1490: labels %v", texts)
	}
}
