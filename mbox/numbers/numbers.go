// Package numbers reads the numbers a thread's messages report: stress-ng's
// own --metrics(-brief) output, tables of bogo-ops/sec like stress-ng
// users paste them, perf bench tables in
// Markdown pipes, aligned tables broken by a mail client's line wrapping,
// "1.16 us/op" and "9.75 ms -> 6.04 ms (38% improvement)" lines, and the
// same in quoted (`>`) text, attributed to the quoted author when the
// attribution line ("On ..., Name <addr> wrote:") names one. Each figure
// becomes a Number: benchmark, metric, unit, the row and column it sits
// in (kernel, variant), its value and the % change the thread gives for
// it, with where it came from (Message-ID, author, line).
//
// The entry point is Read. Quoted copies of numbers that are also in the
// thread unquoted (or quoted earlier) are dropped: a reply quoting a table
// does not report it again.
package numbers

import (
	"fmt"
	"sort"
	"strconv"
	"strings"

	"github.com/patcheval/patcheval/mbox"
)

// Number is one figure a message reports.
type Number struct {
	// Benchmark is what was run, lower case: "kill" (stress-ng --kill's
	// stressor), "syscall basic" (perf bench syscall basic), "" when the
	// message does not say.
	Benchmark string `json:"benchmark,omitempty"`
	// Tool is "stress-ng" or "perf bench" when the message names it (or
	// its unit does: bogo-ops are stress-ng's).
	Tool string `json:"tool,omitempty"`
	// Metric is the metric as the thread wrote it ("bogo-ops/sec",
	// "usec/op"), or the table column that holds the values ("Mean").
	Metric string `json:"metric,omitempty"`
	// Unit is normalised: "bogo-ops/s", "ops/s", "us/op", "ns/op", "ms",
	// "us", "ns", "s", "%" or "" (a plain count).
	Unit string `json:"unit,omitempty"`
	// Label is the row: the kernel or variant ("6.16 (eln150)",
	// "Permissive", "basic"). Column is the column when a table has
	// several value columns ("Enforcing", "Base").
	Label  string `json:"label,omitempty"`
	Column string `json:"column,omitempty"`
	// Attrs are the row's other cells ("CONFIG_PREEMPT_RCU=yes").
	Attrs []string `json:"attrs,omitempty"`
	// Caption is the line that introduces the table ("With fix:").
	Caption string `json:"caption,omitempty"`
	// Platform is the machine named by the row, caption or message
	// ("POWER10", "x86_64").
	Platform string `json:"platform,omitempty"`

	// Value is the figure in Unit; nil for a change without a value (a
	// "Delta" row, a "change %" column of its own).
	Value *float64 `json:"value,omitempty"`
	// Change is the % change the thread gives for it; Baseline what it is
	// relative to, when the thread says ("Base", "enforcing", "9.75 ms").
	Change   *float64 `json:"change_pct,omitempty"`
	Baseline string   `json:"baseline,omitempty"`
	// Approx marks a figure written with ~.
	Approx bool `json:"approx,omitempty"`

	// MessageID, Author and Line say where it came from; Author is the
	// quoted author for quoted text when the attribution names one.
	// Quoted marks a figure in quoted text; Text is its line as written,
	// without quote marks (a wrapped row's lines joined by " / ").
	MessageID string `json:"message_id"`
	Author    string `json:"author,omitempty"`
	Quoted    bool   `json:"quoted,omitempty"`
	Line      int    `json:"line"`
	Text      string `json:"text"`
	// Table numbers the tables (and figure lines) of one message from 1:
	// figures with the same MessageID and Table were written together.
	Table int `json:"table"`
}

// HigherIsBetter says which way the Number's unit improves; known is
// false when the unit does not say.
func (n Number) HigherIsBetter() (higher, known bool) { return higherIsBetter(n.Unit) }

// Subject names what the number measures: "kill bogo-ops/sec",
// "syscall basic usec/op", "Mean".
func (n Number) Subject() string {
	var p []string
	if n.Benchmark != "" && !strings.Contains(strings.ToLower(n.Metric), n.Benchmark) {
		p = append(p, n.Benchmark)
	}
	if n.Metric != "" {
		p = append(p, n.Metric)
	} else if n.Unit != "" && n.Unit != "%" {
		p = append(p, n.Unit)
	}
	return strings.Join(p, " ")
}

// Figure renders the value and change: "70,281 (-32%)", "0.093 us/op",
// "-30.2%".
func (n Number) Figure() string {
	var s string
	if n.Value != nil {
		s = FormatValue(*n.Value)
		if n.Approx && n.Change == nil {
			s = "~" + s
		}
		switch {
		case n.Unit == "%":
			s += "%"
		case n.Unit != "" && n.Metric != "" && !metricNames(n.Metric, n.Unit):
			s += " " + n.Unit
		}
	}
	if n.Change == nil && n.Baseline != "" && s != "" {
		s += " (vs " + n.Baseline + ")"
	}
	if n.Change != nil {
		c := FormatChange(*n.Change)
		if n.Approx && n.Value == nil {
			c = "~" + strings.TrimPrefix(c, "+")
		}
		if n.Baseline != "" {
			c += " vs " + n.Baseline
		}
		if s == "" {
			s = c
		} else {
			s += " (" + c + ")"
		}
	}
	return s
}

// metricNames says whether the metric's words name the unit
// ("bogo-ops/s (real time)" names bogo-ops/s).
func metricNames(metric, unit string) bool {
	if normUnit(strings.ToLower(metric)) == unit {
		return true
	}
	_, u, _ := metricOf(metric)
	return u == unit
}

// String is one line: "kill bogo-ops/sec [6.16 (eln150)] 70,281 (-32%)".
func (n Number) String() string {
	var where []string
	if n.Label != "" {
		where = append(where, n.Label)
	}
	if n.Column != "" {
		where = append(where, n.Column)
	}
	s := n.Subject()
	if len(where) > 0 {
		s += " [" + strings.Join(where, ", ") + "]"
	}
	return strings.TrimSpace(s + " " + n.Figure())
}

// FormatValue renders a value with thousands separators and the digits it
// needs: 70,281, 0.093543, 9.19.
func FormatValue(v float64) string {
	s := strconv.FormatFloat(v, 'f', -1, 64)
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	ip, fp, _ := strings.Cut(s, ".")
	if len(ip) > 3 && len(ip) < 25 {
		var b strings.Builder
		for i, r := range ip {
			if i > 0 && (len(ip)-i)%3 == 0 {
				b.WriteByte(',')
			}
			b.WriteRune(r)
		}
		ip = b.String()
	}
	if fp != "" {
		ip += "." + fp
	}
	if neg {
		ip = "-" + ip
	}
	return ip
}

// FormatChange renders a % change with its sign: "-32%", "+1.6%".
func FormatChange(c float64) string {
	return fmt.Sprintf("%+g%%", c)
}

// Read returns the numbers reported in the thread's messages, in the
// thread's message order, each message's in line order. A quoted figure
// that the thread also carries unquoted, or quoted earlier, is left out.
func Read(t *mbox.Thread) []Number {
	if t == nil {
		return nil
	}
	var all []Number
	for _, m := range t.Messages {
		all = append(all, readMessage(m)...)
	}
	return dedupe(all)
}

// key identifies a figure across copies of a table: a quote may leave out
// the header, so the row, value and change are what count.
func (n Number) key() string {
	f := func(p *float64) string {
		if p == nil {
			return "-"
		}
		return strconv.FormatFloat(*p, 'g', -1, 64)
	}
	return strings.Join([]string{n.Label, n.Unit, f(n.Value), f(n.Change)}, "\x00")
}

// dedupe drops quoted figures already reported unquoted anywhere in the
// thread, or quoted before.
func dedupe(all []Number) []Number {
	own := map[string]bool{}
	for _, n := range all {
		if !n.Quoted {
			own[n.key()] = true
		}
	}
	seen := map[string]bool{}
	var out []Number
	for _, n := range all {
		k := n.key()
		if n.Quoted && (own[k] || seen[k]) {
			continue
		}
		seen[k] = true
		out = append(out, n)
	}
	return out
}

// Tables groups numbers by the table they were written in (MessageID,
// Table), in order.
func Tables(ns []Number) [][]Number {
	var out [][]Number
	idx := map[string]int{}
	for _, n := range ns {
		k := n.MessageID + "\x00" + strconv.Itoa(n.Table)
		i, ok := idx[k]
		if !ok {
			i = len(out)
			idx[k] = i
			out = append(out, nil)
		}
		out[i] = append(out[i], n)
	}
	return out
}

// sortByLine orders one message's numbers by line, keeping each line's
// order.
func sortByLine(ns []Number) {
	sort.SliceStable(ns, func(i, j int) bool { return ns[i].Line < ns[j].Line })
}
