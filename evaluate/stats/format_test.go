package stats

import "testing"

// TestFormatConf: a corrected alpha's confidence level reads as a short
// percentage (the layout test's report printed "99.85714285714286% CI").
func TestFormatConf(t *testing.T) {
	for _, c := range []struct {
		in   float64
		want string
	}{
		{0.95, "95%"}, {0.99, "99%"}, {0.999, "99.9%"}, {0.9, "90%"},
		{1 - 0.05/35, "99.86%"}, {1 - 0.05/3, "98.33%"}, {1 - 0.01/3, "99.67%"},
		{1 - 0.05/10000, "99.9995%"}, {1 - 0.05/1000, "99.995%"},
	} {
		if got := FormatConf(c.in); got != c.want {
			t.Errorf("FormatConf(%v) = %q, want %q", c.in, got, c.want)
		}
	}
	for _, c := range []struct {
		in   float64
		want string
	}{{0.05, "0.05"}, {0.01, "0.01"}, {0.05 / 35, "0.00143"}, {0.05 / 3, "0.0167"}} {
		if got := FormatAlpha(c.in); got != c.want {
			t.Errorf("FormatAlpha(%v) = %q, want %q", c.in, got, c.want)
		}
	}
}
