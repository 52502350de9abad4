package numbers

import (
	"strings"
	"unicode/utf8"

	"github.com/patcheval/patcheval/internal/lazyre"
	"github.com/patcheval/patcheval/mbox"
)

// reader collects one message's numbers.
type reader struct {
	msg   *mbox.Message
	out   []Number
	table int
}

// tableMetric is what a table measures, from its header or caption.
type tableMetric struct {
	metric, unit, bench, tool string
}

var (
	separatorRE = lazyre.New(`^[\s|:+=-]*$`)
	unitOnlyRE  = lazyre.New(`^(?:` + unitAlt + `)$`)
	trailNoteRE = lazyre.New(`^(.*\S)\s+\([A-Za-z][\w\s,.'-]*\)$`)
	changeHdrRE = lazyre.New(`(?i)change|delta|diff|^vs\b|^%$|^\(%\)$|improvement|regression`)
	vsRE        = lazyre.New(`(?i)^vs\.?\s+(.+)$`)
	arrowRE     = lazyre.New(`->|→|=>`)
	// fromToRE is "Mean latency: 9.75 ms -> 6.04 ms (38% improvement)".
	fromToRE = lazyre.New(`^\s*[-*•]?\s*([^:]{1,60}):\s*(\S+(?:\s\S+)?)\s*(?:->|→|=>|to)\s*(\S+(?:\s\S+)?)(?:\s*\((~?\d+(?:\.\d+)?)%\s*(improvement|regression|better|worse|faster|slower|reduction|increase|decrease|less|more)?\))?`)
	// proseRE is a rate or per-op figure in running text: "took 1.16 us/op".
	proseRE = lazyre.New(`(?i)(~?[+-]?\d[\d,]*(?:\.\d+)?\s?[kKM]?)\s?(bogo-ops/sec|bogo-ops/s|ops/sec|ops/s|usecs/op|usec/op|us/op|nsecs/op|nsec/op|ns/op)\b`)
)

func isSeparator(s string) bool {
	return strings.Count(s, "-")+strings.Count(s, "=") >= 3 && separatorRE.MatchString(s)
}

func isPipe(s string) bool {
	t := strings.TrimSpace(s)
	return strings.HasPrefix(t, "|") && strings.Count(t, "|") >= 2
}

// cell is one table cell and the rune columns it spans in its line.
type cell struct {
	text       string
	start, end int
	// attached marks a value in parentheses right after another value
	// ("70,281  (-32%)"): part of that column, not one of its own.
	attached bool
}

// cellsAt splits a row into cells: Markdown pipes, else runs of two or
// more blanks or tabs; leading dash-only cells (a stray "---") are
// dropped, bare units join the number before them, a non-numeric "(...)"
// joins the cell before it ("6.16  (eln150)"), a value followed by a
// value in parentheses is split ("-12.5 usecs/op (-3%)") and a first
// cell "label: 1.5" is split.
func cellsAt(s string) []cell {
	if !strings.ContainsAny(s, "0123456789|\t") && !strings.Contains(s, "  ") {
		// One cell without a digit: prose (most of a thread).
		t := strings.TrimSpace(s)
		if t == "" || strings.Trim(t, "-") == "" {
			return nil
		}
		start := utf8.RuneCountInString(s[:strings.Index(s, t)])
		return []cell{{text: t, start: start, end: start + utf8.RuneCountInString(t)}}
	}
	var raw []cell
	rs := []rune(s)
	if isPipe(s) {
		start := 0
		for i, r := range rs {
			if r == '|' {
				raw = append(raw, cell{text: string(rs[start:i]), start: start, end: i})
				start = i + 1
			}
		}
		raw = append(raw, cell{text: string(rs[start:]), start: start, end: len(rs)})
	} else {
		start := -1
		for i := 0; i <= len(rs); i++ {
			gap := i == len(rs) || rs[i] == '\t' || rs[i] == ' ' && i+1 < len(rs) && (rs[i+1] == ' ' || rs[i+1] == '\t')
			if !gap && start < 0 {
				start = i
			}
			if gap && start >= 0 {
				raw = append(raw, cell{text: string(rs[start:i]), start: start, end: i})
				start = -1
			}
		}
	}
	var out []cell
	for _, c := range raw {
		c.text = strings.TrimSpace(c.text)
		if c.text == "" {
			continue
		}
		if len(out) == 0 && strings.Trim(c.text, "-") == "" {
			continue
		}
		if len(out) > 0 {
			last := &out[len(out)-1]
			_, lastNum := parseValue(last.text)
			if lastNum && unitOnlyRE.MatchString(c.text) {
				last.text += " " + c.text
				last.end = c.end
				continue
			}
			if strings.HasPrefix(c.text, "(") && strings.HasSuffix(c.text, ")") {
				if _, isNum := parseValue(c.text); !isNum {
					last.text += " " + c.text
					last.end = c.end
					continue
				}
				c.attached = lastNum
			}
		}
		if m := submatchIf(trailParenRE, c.text, ")"); m != nil {
			_, a := parseValue(m[1])
			_, b := parseValue(m[2])
			if a && b {
				k := len([]rune(m[1]))
				out = append(out, cell{text: m[1], start: c.start, end: c.start + k})
				c = cell{text: m[2], start: c.end - len([]rune(m[2])), end: c.end, attached: true}
			}
		}
		if len(out) == 0 {
			if m := submatchIf(labelValueRE, c.text, ":"); m != nil {
				if _, ok := parseValue(m[2]); ok {
					k := len([]rune(m[1])) + 1
					out = append(out, cell{text: m[1], start: c.start, end: c.start + k})
					c.text, c.start = m[2], c.start+k
				}
			}
		}
		out = append(out, c)
	}
	return out
}

var trailParenRE = lazyre.New(`^(.*\S)\s+(\([^()]*\))$`)

var labelValueRE = lazyre.New(`^([^:]*[A-Za-z][^:]*):\s+(\S.*)$`)

// value reads a cell, also with a trailing note ("~1% (noise)").
func value(c string) (cellValue, bool) {
	if v, ok := parseValue(c); ok {
		return v, true
	}
	if m := trailNoteRE.FindStringSubmatch(c); m != nil {
		if v, ok := parseValue(m[1]); ok && v.unit != "" {
			return v, true
		}
	}
	return cellValue{}, false
}

func hasValue(cs []string) bool {
	for _, c := range cs[1:] {
		if _, ok := value(c); ok {
			return true
		}
	}
	return false
}

func allValues(cs []string) bool {
	for _, c := range cs {
		if _, ok := value(c); !ok {
			return false
		}
	}
	return len(cs) > 0
}

// paragraph reads the tables and figure lines of one paragraph; prev is
// the paragraph just before it in the same voice (a caption such as
// "Results (bogo-ops/sec, higher is better):").
func (r *reader) paragraph(p paragraph, prev *paragraph, c *context) {
	ls := p.lines
	if isStressNG(ls) {
		caption := ""
		if prev != nil && len(prev.lines) <= 3 {
			if last := strings.TrimSpace(prev.lines[len(prev.lines)-1].text); strings.HasSuffix(last, ":") {
				caption = last
			}
		}
		r.stressNG(p, caption, c)
		return
	}
	first := firstRow(ls)
	if first < 0 {
		r.figures(p, c)
		return
	}
	t := tableHead(ls, first, prev)
	tm, headerMetric := tableMetricOf(t, ls[first:], c)
	t.platform = platformOf(t.caption, c)
	if tm.bench == "" && !headerMetric {
		tm.bench = c.bench
	}
	t.metric = tm
	r.table++
	r.rows(t, ls[first:], p.voice, c)
	rememberMetric(c, t, headerMetric)
}

// firstRow is the index of the first table row in ls (a line of two or
// more cells with a value that is not a header, or a row wrapped by the
// mail client), or -1.
func firstRow(ls []line) int {
	above := map[int]bool{} // the cell counts of the lines before line i
	for i, l := range ls {
		if i > 0 {
			above[len(ls[i-1].cells)] = true
		}
		if isSeparator(l.text) {
			continue
		}
		cs := l.strs()
		if len(cs) >= 2 && hasValue(cs) && !isHeaderRow(ls, i, cs) || wrappedRow(ls, i, cs, above) {
			return i
		}
	}
	return -1
}

// tableHead is the table whose first row is ls[first], with its header
// and caption from the lines before that row: caption, then the header
// (from the last line of two or more cells, with the wrapped lines after
// it). Without a caption of its own, a short paragraph prev just before
// that ends in ":" or names a metric or unit is the caption.
func tableHead(ls []line, first int, prev *paragraph) table {
	var pre []line
	for _, l := range ls[:first] {
		if !isSeparator(l.text) {
			pre = append(pre, l)
		}
	}
	h := -1
	for i := len(pre) - 1; i >= 0; i-- {
		if len(pre[i].cells) >= 2 {
			h = i
			break
		}
	}
	t := table{pipe: isPipe(ls[first].text)}
	var caption []string
	if h >= 0 {
		for _, l := range pre[h:] {
			t.header = append(t.header, l.cells...)
		}
		t.positional = len(pre[h:]) == 1 && !t.pipe
		pre = pre[:h]
	}
	for _, l := range pre {
		caption = append(caption, strings.TrimSpace(l.text))
	}
	if len(caption) == 0 && prev != nil && len(prev.lines) <= 3 {
		last := strings.TrimSpace(prev.lines[len(prev.lines)-1].text)
		if strings.HasSuffix(last, ":") || metricRE.MatchString(last) || unitInParensRE.MatchString(last) {
			for _, l := range prev.lines {
				caption = append(caption, strings.TrimSpace(l.text))
			}
		}
	}
	t.caption = strings.Join(caption, " ")
	return t
}

// tableMetricOf is what t's rows measure, from its caption, else its
// header (headerMetric), else (plain numbers under neither) the voice's
// last table.
func tableMetricOf(t table, rows []line, c *context) (tm tableMetric, headerMetric bool) {
	tm = tableMetric{tool: toolIn(t.caption)}
	tm.metric, tm.unit, tm.bench = metricOf(t.caption)
	if tm.bench == "" {
		if m := benchRE.FindStringSubmatch(t.caption); m != nil {
			tm.bench = m[1] + m[2]
		}
	}
	if tm.tool == "" {
		tm.tool = c.tool
	}
	for _, hc := range t.header {
		if m, u, b := metricOf(hc.text); m != "" || u != "" {
			headerMetric = true
			if tm.bench == "" {
				tm.bench = b
			}
		}
	}
	if tm.metric == "" && tm.unit == "" && !headerMetric && plainValues(rows) {
		// A table with neither caption metric nor one in its header and
		// plain numbers continues the voice's last table (the x86_64 rows
		// after the POWER10 table).
		tm.metric, tm.unit = c.last.metric, c.last.unit
		if tm.bench == "" {
			tm.bench = c.last.bench
		}
		if c.last.tool != "" {
			tm.tool = c.last.tool
		}
	}
	return tm, headerMetric
}

// rows reads t's rows (a row the mail client wrapped joined to its next
// line; a line without two cells and a value read as figures).
func (r *reader) rows(t table, rows []line, v voice, c *context) {
	for i := 0; i < len(rows); i++ {
		l := rows[i]
		if isSeparator(l.text) {
			continue
		}
		cs := append([]cell(nil), l.cells...)
		text := strings.TrimSpace(l.text)
		// A row wrapped by the mail client: its cells go on on the next
		// line.
		if len(t.header) > 0 && columns(cs) < len(t.header) && i+1 < len(rows) && !isSeparator(rows[i+1].text) {
			next := rows[i+1].cells
			if columns(cs)+columns(next) == len(t.header) {
				cs = append(cs, next...)
				text += " / " + strings.TrimSpace(rows[i+1].text)
				i++
			}
		}
		if len(cs) < 2 || !hasValue(texts(cs)) {
			r.figures(paragraph{lines: []line{l}, voice: v}, c)
			continue
		}
		r.row(t, cs, v, l.no, text)
	}
}

// rememberMetric keeps t's metric (or its header's first) as the voice's
// last table's, for a table after it without one.
func rememberMetric(c *context, t table, headerMetric bool) {
	tm := t.metric
	if tm.metric != "" || tm.unit != "" {
		c.last = tm
	} else if headerMetric {
		for _, hc := range t.header {
			if m, u, b := metricOf(hc.text); m != "" {
				c.last = tableMetric{metric: m, unit: u, bench: b, tool: tm.tool}
				if b == "" {
					c.last.bench = tm.bench
				}
				break
			}
		}
	}
}

// table is what a table's rows share.
type table struct {
	header     []cell
	pipe       bool
	positional bool // header cells' columns line up with the rows'
	caption    string
	platform   string
	metric     tableMetric
}

func texts(cs []cell) []string {
	out := make([]string, len(cs))
	for i, c := range cs {
		out[i] = c.text
	}
	return out
}

// columns counts the cells that are columns of their own.
func columns(cs []cell) int {
	n := 0
	for _, c := range cs {
		if !c.attached {
			n++
		}
	}
	return n
}

// headerOf maps each row cell to its header cell ("" when none): by order
// when the row has as many columns as the header (misaligned columns
// keep their order), else by where the cells are (a "Delta" row that
// leaves columns empty).
func (t table) headerOf(cs []cell) []string {
	out := make([]string, len(cs))
	if len(t.header) == 0 {
		return out
	}
	k := -1
	exact := columns(cs) == len(t.header)
	for i, c := range cs {
		if c.attached && i > 0 {
			out[i] = out[i-1]
			continue
		}
		k++
		switch {
		case exact || t.pipe:
			if k < len(t.header) {
				out[i] = t.header[k].text
			}
		case t.positional:
			best, bestOv, bestDist := -1, 0, 1<<30
			for j, h := range t.header {
				ov := min(c.end, h.end) - max(c.start, h.start)
				mid := (c.start+c.end)/2 - (h.start+h.end)/2
				if mid < 0 {
					mid = -mid
				}
				if ov > bestOv || bestOv == 0 && ov <= 0 && mid < bestDist {
					best, bestDist = j, mid
					if ov > 0 {
						bestOv = ov
					}
				}
			}
			if best >= 0 {
				out[i] = t.header[best].text
			}
		default:
			j := len(t.header) - (columns(cs) - k)
			if j >= 0 && j < len(t.header) {
				out[i] = t.header[j].text
			}
		}
	}
	return out
}

// wrappedRow says whether line i is a row whose values a mail client
// wrapped onto the next line: the two lines together have as many cells
// as a line above (the header; above holds the cell counts of the lines
// before i) and the next holds values only. Looking the lines above up
// again for each line made a paragraph of such pairs quadratic (256 KiB
// of "a  b" / "1" lines took 4 s, found by FuzzRead's slowness).
func wrappedRow(ls []line, i int, cs []string, above map[int]bool) bool {
	if len(cs) < 2 || i+1 >= len(ls) {
		return false
	}
	next := ls[i+1].strs()
	return allValues(next) && above[len(cs)+len(next)]
}

// isHeaderRow says whether a line of numbers only is the header of the
// rows after it ("          1         2         3       4" above
// "median: 37249.5   31540.5   15765   22480").
func isHeaderRow(ls []line, i int, cs []string) bool {
	if !allValues(cs) || !strings.HasPrefix(ls[i].text, "  ") || i+1 >= len(ls) {
		return false
	}
	return len(ls[i+1].cells) == len(cs)+1
}

// plainValues says whether the rows hold numbers without a unit, or
// signed % changes (they need the metric from elsewhere); unsigned
// percentages are values of their own (a perf profile's shares).
func plainValues(ls []line) bool {
	plain := false
	for _, l := range ls {
		cs := l.strs()
		for i, c := range cs {
			if v, ok := value(c); ok && i > 0 {
				switch {
				case v.unit == "" || v.percent && v.signed:
					plain = true
				case !v.percent:
					return false
				}
			}
		}
	}
	return plain
}

var changeLabelRE = lazyre.New(`(?i)^(delta|diff|change|difference)\b`)

// row turns one table row into Numbers.
func (r *reader) row(t table, cs []cell, v voice, no int, text string) {
	// The label: the first cell, or with no header every leading cell
	// that is not a number.
	n := 1
	if len(t.header) == 0 {
		for n < len(cs) {
			if _, ok := value(cs[n].text); ok {
				break
			}
			n++
		}
	}
	label := strings.TrimSuffix(strings.Join(texts(cs[:n]), " "), ":")
	hdrs := t.headerOf(cs)
	changeRow := arrowRE.MatchString(label) || changeLabelRE.MatchString(label)
	platform := t.platform
	if p := platformIn(label); p != "" {
		platform = p
	}
	tm := t.metric
	header0 := ""
	if len(t.header) > 0 {
		header0 = t.header[0].text
	}
	var attrs []string
	var row []int // indexes into r.out of this row's numbers with a value
	start := len(r.out)
	for i := n; i < len(cs); i++ {
		h := hdrs[i]
		cv, ok := value(cs[i].text)
		changeCol := h != "" && changeHdrRE.MatchString(h) && metricRE.FindString(h) == ""
		if !ok {
			if h != "" {
				attrs = append(attrs, h+"="+cs[i].text)
			} else {
				attrs = append(attrs, cs[i].text)
			}
			continue
		}
		if changeCol && !cv.percent && cv.unit == "" {
			cv.percent, cv.unit = true, "%"
		}
		nb := Number{Benchmark: tm.bench, Tool: tm.tool, Metric: tm.metric, Unit: tm.unit, Label: label,
			Caption: t.caption, Platform: platform, MessageID: r.msg.PublicID(), Author: v.author,
			Quoted: v.depth > 0, Line: no, Text: text, Table: r.table}
		colMetric, colUnit, colBench := metricOf(h)
		if colMetric != "" {
			nb.Metric, nb.Unit = colMetric, colUnit
			if colBench != "" {
				nb.Benchmark = colBench
			}
		} else if h != "" && !changeCol {
			if colUnit != "" {
				nb.Unit = colUnit
			}
			nb.Column = strings.TrimSpace(unitInParensRE.ReplaceAllString(h, ""))
		}
		if nb.Tool == "" && strings.Contains(strings.ToLower(nb.Metric), "bogo") {
			nb.Tool = "stress-ng"
		}
		if nb.Benchmark != "" && (strings.EqualFold(header0, nb.Benchmark) || nb.Tool == "perf bench" && colMetric == "" && !strings.Contains(nb.Benchmark, " ")) {
			nb.Benchmark += " " + strings.ToLower(label)
		}
		nb.Approx = cv.approx
		val := cv.v
		if cv.percent {
			// A change: of the value before it in this row ("(-32%)",
			// a "change %" or "vs X" column), or of its own.
			if len(row) > 0 && (cs[i].attached || changeCol && hdrs[i-1] != h) && r.out[row[len(row)-1]].Change == nil {
				prev := &r.out[row[len(row)-1]]
				prev.Change = &val
				prev.Approx = prev.Approx || cv.approx
				if m := vsRE.FindStringSubmatch(h); m != nil {
					prev.Baseline = m[1]
				} else if b := r.out[row[0]]; len(row) > 1 && b.Column != "" && b.Unit == prev.Unit && b.Column != prev.Column {
					prev.Baseline = b.Column
				}
				continue
			}
			if changeRow || changeCol || cv.signed || cv.paren {
				if h != "" && colMetric == "" {
					nb.Column = h
				}
				nb.Change = &val
				r.out = append(r.out, nb)
				continue
			}
			nb.Unit, nb.Metric = "%", ""
		} else if cv.unit != "" {
			nb.Unit = cv.unit
			if colMetric == "" && normUnit(strings.ToLower(nb.Metric)) != cv.unit {
				nb.Metric = ""
			}
		}
		if cs[i].attached && len(row) > 0 && nb.Unit == r.out[row[len(row)-1]].Unit {
			// "(0.5)" after a value in the same unit: not a figure of its own.
			continue
		}
		nb.Value = &val
		row = append(row, len(r.out))
		r.out = append(r.out, nb)
	}
	if len(attrs) > 0 {
		for i := start; i < len(r.out); i++ {
			r.out[i].Attrs = attrs
		}
	}
}

// figures reads the figure lines of a paragraph that holds no table:
// "Mean latency: 9.75 ms -> 6.04 ms (38% improvement)" and rates or
// per-op times in running text ("1.16 us/op").
func (r *reader) figures(p paragraph, c *context) {
	started := false
	for i := 0; i < len(p.lines); i++ {
		l := p.lines[i]
		text := strings.TrimSpace(l.text)
		// "Mean latency: 9.75 ms ->" wrapped before "6.04 ms (38% ...)".
		if i+1 < len(p.lines) && (strings.HasSuffix(text, "->") || strings.HasSuffix(text, "→") ||
			strings.HasPrefix(strings.TrimSpace(p.lines[i+1].text), "->")) && !fromToRE.MatchString(text) {
			joined := text + " " + strings.TrimSpace(p.lines[i+1].text)
			if fromToRE.MatchString(joined) {
				text = joined
				i++
			}
		}
		if m := perfRunRE.FindStringSubmatch(text); m != nil {
			c.perf = m[1] + " " + m[2]
		}
		if !strings.ContainsAny(text, "0123456789") {
			continue
		}
		base := Number{Benchmark: c.bench, Tool: c.tool, Platform: c.platform, MessageID: r.msg.PublicID(), Author: p.voice.author,
			Quoted: p.voice.depth > 0, Line: l.no, Text: text}
		if pl := platformIn(text); pl != "" {
			base.Platform = pl
		}
		if m := submatchIf(fromToRE, text, ":"); m != nil {
			a, aok := parseValue(m[2])
			b, bok := parseValue(m[3])
			if aok && bok && !a.percent && (a.unit == b.unit || b.unit == "") {
				if !started {
					r.table++
					started = true
				}
				nb := base
				nb.Table = r.table
				nb.Label = strings.TrimSpace(m[1])
				nb.Unit = a.unit
				var bench string
				nb.Metric, _, bench = metricOf(text)
				if bench != "" {
					nb.Benchmark = bench
				}
				bv := b.v
				nb.Value = &bv
				nb.Baseline = strings.TrimSpace(m[2])
				if m[4] != "" {
					ch, _ := parseValue(strings.TrimPrefix(m[4], "~"))
					pct := ch.v
					if b.v < a.v {
						pct = -pct
					}
					nb.Change = &pct
					nb.Approx = strings.HasPrefix(m[4], "~")
				}
				r.out = append(r.out, nb)
				continue
			}
		}
		var prose [][]int
		if strings.Contains(text, "/") { // every unit proseRE reads has one
			prose = proseRE.FindAllStringSubmatchIndex(text, -1)
		}
		for _, m := range prose {
			num := text[m[2]:m[3]]
			cv, ok := parseValue(num + " " + text[m[4]:m[5]])
			if !ok {
				continue
			}
			if !started {
				r.table++
				started = true
			}
			nb := base
			nb.Table = r.table
			nb.Label = strings.Trim(strings.TrimSpace(text[:m[0]]), ":,(- ")
			if rs := []rune(nb.Label); len(rs) > 60 {
				nb.Label = "..." + string(rs[len(rs)-57:])
			}
			nb.Unit = cv.unit
			nb.Metric = text[m[4]:m[5]]
			if c.perf != "" {
				// perf bench's own output: "       3.939920 usecs/op".
				nb.Benchmark, nb.Tool = c.perf, "perf bench"
			}
			v := cv.v
			nb.Value = &v
			nb.Approx = cv.approx
			r.out = append(r.out, nb)
		}
	}
	if started {
		c.perf = ""
	}
}

// perfRunRE is perf bench's "# Running 'syscall/basic' benchmark:".
var perfRunRE = lazyre.New(`Running '([\w-]+)/([\w-]+)' benchmark`)
