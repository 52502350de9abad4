package report

import (
	"fmt"
	"strings"
)

// Table is a table of the series' thread reproduced in its own shape
// (pipelines' [[table]]): one row per benchmark and metric, the mean of
// each of Columns (Variants), and the change column ChangeName, one of
// the Comparisons with its confidence interval (seed 002's "Enforcing,
// Permissive, Disabled, SELinux tax"; a perf bench "Base, test, change %").
type Table struct {
	Name       string     `json:"name"`
	Columns    []string   `json:"columns"`
	ChangeName string     `json:"change_name,omitempty"`
	Rows       []TableRow `json:"rows"`
}

// TableRow is one benchmark and metric of a Table. Means[i] is the mean
// of Columns[i] over N[i] samples (N[i] = 0: no samples, Means[i] 0).
type TableRow struct {
	Benchmark      string      `json:"benchmark"`
	Metric         string      `json:"metric"`
	Unit           string      `json:"unit,omitempty"`
	Source         string      `json:"source,omitempty"`
	HigherIsBetter bool        `json:"higher_is_better"`
	Means          []float64   `json:"means"`
	N              []int       `json:"n"`
	Change         *Comparison `json:"change,omitempty"`
}

// AddTable appends a Table over r.Benchmarks (call it after AddResults):
// a row for every benchmark and metric with samples of at least one of
// columns, only the benchmarks whose name starts with one of only when
// only is set; change, when set, names the Comparison of its column.
func (r *Report) AddTable(name string, columns, only []string, changeName string, change *Pair) {
	t := Table{Name: name, Columns: append([]string(nil), columns...), ChangeName: changeName}
	for _, b := range r.Benchmarks {
		if len(only) > 0 && !hasPrefix(b.Name, only) {
			continue
		}
		row := TableRow{Benchmark: b.Name, Metric: b.Metric, Unit: b.Unit, Source: b.Source, HigherIsBetter: b.HigherIsBetter,
			Means: make([]float64, len(columns)), N: make([]int, len(columns))}
		any := false
		for i, c := range columns {
			for _, s := range b.Rows {
				if s.Variant == c && s.N > 0 {
					row.Means[i], row.N[i], any = s.Mean, s.N, true
				}
			}
		}
		if !any {
			continue
		}
		if change != nil {
			for i := range b.Comparisons {
				if c := b.Comparisons[i]; c.Base == change.Base && c.Other == change.Other {
					row.Change = &c
				}
			}
		}
		t.Rows = append(t.Rows, row)
	}
	r.Tables = append(r.Tables, t)
}

// label names a row: "kill [agent loop]", "stress-ng --kill 1 -t 5".
func (row TableRow) label() string {
	if row.Source == "agent loop" {
		return row.Benchmark + " [agent loop]"
	}
	return row.Benchmark
}

// unitText is "ns/op" or "bogo-ops/s (real time)": the metric, with the
// unit when it says more.
func (row TableRow) unitText() string {
	return Benchmark{Metric: row.Metric, Unit: row.Unit}.unitLabel()
}

// grid renders t as a table: benchmark, metric, the columns' means and
// the change with its CI.
func (t Table) grid() *table {
	g := &table{head: []string{"Benchmark", "Metric"}, right: []bool{false, false}}
	for _, c := range t.Columns {
		g.head = append(g.head, c)
		g.right = append(g.right, true)
	}
	if t.ChangeName != "" {
		g.head = append(g.head, t.ChangeName, "95% CI")
		g.right = append(g.right, true, false)
	}
	for _, row := range t.Rows {
		cells := []string{row.label(), row.unitText()}
		var vals []float64
		for i := range row.Means {
			if row.N[i] > 0 {
				vals = append(vals, row.Means[i])
			}
		}
		dec := decimalsFor(vals...)
		for i := range row.Means {
			if row.N[i] == 0 {
				cells = append(cells, "-")
			} else {
				cells = append(cells, Num(row.Means[i], dec))
			}
		}
		if t.ChangeName != "" {
			if c := row.Change; c != nil {
				cells = append(cells, Pct(c.Change), ciText(c.Comparison))
			} else {
				cells = append(cells, "-", "")
			}
		}
		g.rows = append(g.rows, cells)
	}
	return g
}

// caption says what the table's numbers are.
func (t Table) caption() string {
	lo, hi := 0, 0
	for _, row := range t.Rows {
		for _, n := range row.N {
			if n > 0 && (lo == 0 || n < lo) {
				lo = n
			}
			hi = max(hi, n)
		}
	}
	n := fmt.Sprint(lo)
	if hi != lo {
		n = fmt.Sprintf("%d-%d", lo, hi)
	}
	s := fmt.Sprintf("means of %s samples per column", n)
	if len(t.Rows) > 0 && t.Rows[0].Change != nil {
		c := t.Rows[0].Change
		s += fmt.Sprintf("; %s = %s over %s (%s)", t.ChangeName, c.Other, c.Base, strings.TrimSpace(c.Label()))
	}
	return s
}

func hasPrefix(s string, prefixes []string) bool {
	for _, p := range prefixes {
		if strings.HasPrefix(s, p) {
			return true
		}
	}
	return false
}
