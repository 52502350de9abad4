package service

import (
	"encoding/json"
	"fmt"
	"math"
	"sort"
	"strings"
	"testing"
)

// reportDiff is where two report.json files of the same evaluation differ
// (TestFarmRealKernel: the farm's against one machine's).
type reportDiff struct {
	// Path is the JSON path ("benchmarks[0].comparisons[1].verdict").
	Path string
	A, B string
	// Class is diffMeasured (what was measured differs: a sample, a
	// mean, a verdict, a count), diffStatistic (a statistic of the
	// difference between two variants' samples, which moves by much more
	// than the samples do when that difference is near zero) or
	// diffCircumstance (where or when the evaluation ran).
	Class string
}

const (
	diffMeasured     = "measured"
	diffStatistic    = "statistic"
	diffCircumstance = "circumstance"
)

func (d reportDiff) String() string {
	return fmt.Sprintf("%s (%s): %s | %s", d.Path, d.Class, d.A, d.B)
}

// circumstances are the report fields, as paths without list indices,
// that say where and when an evaluation ran: the report's id and date,
// the stages' wall times and the build's, the paths of the kernel's files
// (its build directory) and the QEMU command lines that name them, the
// host, the samples' clock times. A pattern with a leading "." matches a
// path's end, otherwise the whole path.
var circumstances = []string{"id", "generated", "timings", ".build_seconds", ".kernel.image", ".kernel.system_map",
	".kernel.config", ".qemu_args", ".host", "target.command", "tree.path", "benchmarks.runs.time"}

// statistics are the fields computed from the difference between two
// variants' samples (stats.Comparison), and the spread: with two
// variants that measure the same (both TestFarmRealKernel's variants
// boot one kernel) a change of 0.01% in one sample moves them by any
// amount. The verdict drawn from them is compared (diffMeasured).
var statistics = []string{".stddev", ".diff", ".change_pct", ".ci_low_pct", ".ci_high_pct", ".welch_t", ".welch_df", ".welch_p",
	".mann_whitney_u", ".mann_whitney_p", ".resolution_pct", ".reason"}

// diffClass is the class of a difference at (index-free) path p.
func diffClass(p string) string {
	match := func(pats []string) bool {
		for _, pat := range pats {
			if p == strings.TrimPrefix(pat, ".") || strings.HasPrefix(pat, ".") && strings.HasSuffix(p, pat) ||
				strings.HasPrefix(p, strings.TrimPrefix(pat, ".")+".") || strings.HasPrefix(pat, ".") && strings.Contains(p, pat+".") {
				return true
			}
		}
		return false
	}
	switch {
	case match(circumstances):
		return diffCircumstance
	case match(statistics):
		return diffStatistic
	}
	return diffMeasured
}

// diffReports compares report.json a with b. Numbers agree when within
// rel of each other (relative to the larger); everything else must be
// equal.
func diffReports(a, b []byte, rel float64) ([]reportDiff, error) {
	var x, y any
	if err := json.Unmarshal(a, &x); err != nil {
		return nil, fmt.Errorf("report a: %w", err)
	}
	if err := json.Unmarshal(b, &y); err != nil {
		return nil, fmt.Errorf("report b: %w", err)
	}
	var out []reportDiff
	add := func(path, norm string, x, y any) {
		jx, _ := json.Marshal(x)
		jy, _ := json.Marshal(y)
		out = append(out, reportDiff{Path: path, A: string(jx), B: string(jy), Class: diffClass(norm)})
	}
	var walk func(path, norm string, x, y any)
	walk = func(path, norm string, x, y any) {
		switch xv := x.(type) {
		case map[string]any:
			yv, ok := y.(map[string]any)
			if !ok {
				add(path, norm, x, y)
				return
			}
			keys := map[string]bool{}
			for k := range xv {
				keys[k] = true
			}
			for k := range yv {
				keys[k] = true
			}
			var ks []string
			for k := range keys {
				ks = append(ks, k)
			}
			sort.Strings(ks)
			for _, k := range ks {
				p, n := k, k
				if path != "" {
					p, n = path+"."+k, norm+"."+k
				}
				walk(p, n, xv[k], yv[k])
			}
		case []any:
			yv, ok := y.([]any)
			if !ok || len(xv) != len(yv) {
				add(path, norm, x, y)
				return
			}
			for i := range xv {
				walk(fmt.Sprintf("%s[%d]", path, i), norm, xv[i], yv[i])
			}
		case float64:
			yv, ok := y.(float64)
			if !ok || math.Abs(xv-yv) > rel*math.Max(math.Abs(xv), math.Abs(yv)) {
				add(path, norm, x, y)
			}
		default:
			if fmt.Sprint(x) != fmt.Sprint(y) || (x == nil) != (y == nil) {
				add(path, norm, x, y)
			}
		}
	}
	walk("", "", x, y)
	return out, nil
}

// TestDiffReports: diffReports finds a changed verdict, a sample out of
// tolerance, a changed requested config, a shorter list; it tells a
// statistic of the difference between variants (which moves freely when
// that difference is near zero) and where/when the evaluation ran (a
// build directory, a date) from what was measured.
func TestDiffReports(t *testing.T) {
	a := `{"id":"1","generated":"2026-12-02T08:00:00Z",
		"variants":[{"name":"base","config":["PREEMPT=y"],"kernel":{"image":"/w1/builds/x/bzImage","config":"/w1/builds/x/config","commit":"abc"},"boots":3}],
		"benchmarks":[{"name":"kill","runs":[{"value":512.3,"time":"2026-12-02T08:00:01Z"}],
			"comparisons":[{"verdict":"equivalent","diff":-0.008,"welch_p":0.96,"base":{"mean":512.3,"stddev":0.3}}]}],"notes":["a","b"]}`
	b := strings.NewReplacer(`"1"`, `"2"`, "08:00", "09:00", "/w1/builds/x", "/c/builds/y", `512.3,`, `512.31,`,
		`-0.008`, `0.004`, `0.96`, `0.98`, `0.3}`, `0.31}`).Replace(a)
	classes := func(a, b string) string {
		t.Helper()
		ds, err := diffReports([]byte(a), []byte(b), 1e-3)
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, d := range ds {
			got = append(got, d.Path+":"+d.Class)
		}
		return strings.Join(got, " ")
	}
	if got, want := classes(a, b), "benchmarks[0].comparisons[0].base.stddev:statistic benchmarks[0].comparisons[0].diff:statistic "+
		"benchmarks[0].comparisons[0].welch_p:statistic benchmarks[0].runs[0].time:circumstance generated:circumstance id:circumstance "+
		"variants[0].kernel.config:circumstance variants[0].kernel.image:circumstance"; got != want {
		t.Errorf("differences\n%s\nwant\n%s", got, want)
	}

	c := strings.NewReplacer(`"verdict":"equivalent"`, `"verdict":"regression"`, `"value":512.3`, `"value":513.3`,
		`"mean":512.3`, `"mean":513.3`, `"boots":3`, `"boots":2`, `,"b"]`, `]`, `PREEMPT=y`, `PREEMPT=n`).Replace(a)
	if got, want := classes(a, c), "benchmarks[0].comparisons[0].base.mean:measured benchmarks[0].comparisons[0].verdict:measured "+
		"benchmarks[0].runs[0].value:measured notes:measured variants[0].boots:measured variants[0].config[0]:measured"; got != want {
		t.Errorf("differences\n%s\nwant\n%s", got, want)
	}
	if _, err := diffReports([]byte(a), []byte("{"), 1e-3); err == nil {
		t.Error("a report that is not JSON: no error")
	}
}
