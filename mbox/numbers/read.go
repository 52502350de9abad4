package numbers

import (
	"strings"

	"github.com/patcheval/patcheval/internal/lazyre"
	"github.com/patcheval/patcheval/mbox"
)

// line is one body line with its quote depth and the text without quote
// marks.
type line struct {
	no    int // 1-based line in the body
	depth int
	text  string
	skip  bool   // diff, diffstat or signature: not read
	cells []cell // the text split into table cells
}

// strs is the line's cells' texts.
func (l line) strs() []string { return texts(l.cells) }

// maxDepth bounds the quote depth taken into account (deeper is deeper).
const maxDepth = 32

func splitLines(body string) []line {
	raw := strings.Split(strings.ReplaceAll(body, "\r", ""), "\n")
	out := make([]line, 0, len(raw))
	inDiff := map[int]bool{}
	sig := false
	for i, r := range raw {
		d, text := unquote(r)
		for k := range inDiff {
			if k > d {
				delete(inDiff, k)
			}
		}
		l := line{no: i + 1, depth: d, text: strings.TrimRight(text, " \t")}
		switch {
		case d == 0 && r == "-- ":
			sig = true
		case strings.HasPrefix(strings.TrimSpace(text), "diff --git "):
			inDiff[d] = true
		}
		l.skip = sig && d == 0 || inDiff[d] ||
			(strings.Contains(l.text, "|") || strings.Contains(l.text, " changed")) && diffstatRE.MatchString(l.text)
		if !l.skip {
			l.cells = cellsAt(l.text)
		}
		out = append(out, l)
	}
	return out
}

var diffstatRE = lazyre.New(`^\s*\S+\s+\|\s+\d+\s*[+-]*$|^\s*\d+ files? changed`)

// unquote strips leading quote marks ("> > ", ">>", " > ") and returns
// the depth.
func unquote(s string) (int, string) {
	d := 0
	for {
		t := strings.TrimLeft(s, " ")
		if len(s)-len(t) > 3 || !strings.HasPrefix(t, ">") {
			break
		}
		s = t[1:]
		d++
	}
	if d > maxDepth {
		d = maxDepth
	}
	if d > 0 {
		s = strings.TrimPrefix(s, " ")
	}
	return d, s
}

// voice is who wrote a run of lines: the sender (depth 0) or a quoted
// author.
type voice struct {
	depth  int
	start  int // index of the run's first line (0 for depth 0)
	author string
}

// voices assigns each line its voice: for quoted lines, the maximal run
// of lines quoted at least as deep, attributed by the "... wrote:" lines
// just before it.
func voices(ls []line, sender string) []voice {
	out := make([]voice, len(ls))
	for i := range ls {
		out[i] = voice{author: sender}
	}
	var starts [maxDepth + 1]int
	var last [maxDepth + 1]string // the last attributed author per depth
	for i, l := range ls {
		for d := 1; d <= l.depth; d++ {
			if i == 0 || ls[i-1].depth < d {
				starts[d] = i
			}
		}
		if l.depth > 0 {
			s := starts[l.depth]
			out[i] = voice{depth: l.depth, start: s}
			if i == s || out[i-1].start != s || out[i-1].depth != l.depth {
				out[i].author = attribution(ls, s, l.depth)
				if out[i].author == "" {
					// An interleaved reply: the quoted author is the
					// one named above.
					out[i].author = last[l.depth]
				}
				last[l.depth] = out[i].author
			} else {
				out[i].author = out[i-1].author
			}
		}
	}
	return out
}

// attribution finds "On ..., Name <addr> wrote:" in the (up to three,
// wrapped) lines at depth-1 just before line s.
func attribution(ls []line, s, depth int) string {
	var parts []string
	for j := s - 1; j >= 0 && j >= s-3; j-- {
		if ls[j].depth != depth-1 {
			break
		}
		t := strings.TrimSpace(ls[j].text)
		if t == "" {
			if len(parts) > 0 {
				break
			}
			continue
		}
		parts = append([]string{t}, parts...)
	}
	return attributionName(strings.Join(parts, " "))
}

var (
	emailRE = lazyre.New(`<[^<>]*>|\[email[^\]]*\]|\S+@\S+\.\S+`)
	timeRE  = lazyre.New(`\d{1,2}:\d{2}(?::\d{2})?[\s\x{202f}\x{00a0}]*(?:[AaPp]\.?[Mm]\.?)?(?:\s*[+-]\d{4})?(?:\s*\([A-Za-z]+\))?\s*,?`)
)

// attributionName reads the quoted author's name out of an attribution
// line; "" when the line is none.
func attributionName(s string) string {
	i := strings.LastIndex(s, " wrote:")
	if i < 0 {
		i = strings.LastIndex(s, " writes:")
	}
	if i < 0 {
		return ""
	}
	s = s[:i]
	email := ""
	if m := emailRE.FindString(s); m != "" && strings.Contains(m, "@") && !strings.Contains(m, "[email") {
		email = strings.Trim(m, "<>")
	}
	s = emailRE.ReplaceAllString(s, "")
	if strings.HasPrefix(s, "On ") || strings.HasPrefix(s, "on ") {
		if locs := timeRE.FindAllStringIndex(s, -1); len(locs) > 0 {
			s = s[locs[len(locs)-1][1]:]
		} else if j := strings.LastIndex(s, ", "); j >= 0 {
			s = s[j+2:]
		} else {
			s = ""
		}
	}
	s = strings.Trim(s, " ,\"'\t")
	if s == "" || len(s) > 80 {
		return email
	}
	return s
}

// paragraph is a run of non-blank lines at one depth in one voice.
type paragraph struct {
	lines []line
	voice voice
}

// context is what a voice says about all its tables: the tool and the
// machine, and the last metric (for tables that continue one).
type context struct {
	text     string
	b        strings.Builder
	tool     string
	bench    string   // what the writer says was run ("synchronize_rcu")
	perf     string   // the perf bench whose output is being read ("syscall basic")
	cpus     []string // the CPU models the writer names, in order
	platform string
	last     tableMetric
}

func readMessage(m *mbox.Message) []Number {
	ls := splitLines(m.Body)
	sender := m.From.Name
	if sender == "" {
		sender = m.From.Email
	}
	vs := voices(ls, sender)
	var paras []paragraph
	type ctxKey struct {
		depth  int
		author string
	}
	ctxs := map[ctxKey]*context{}
	var cur *paragraph
	for i, l := range ls {
		v := vs[i]
		k := ctxKey{v.depth, v.author}
		c := ctxs[k]
		if c == nil {
			c = &context{}
			ctxs[k] = c
		}
		if !l.skip {
			c.b.WriteString(l.text)
			c.b.WriteByte('\n')
		}
		if l.skip || strings.TrimSpace(l.text) == "" {
			cur = nil
			continue
		}
		if cur == nil || cur.voice != v {
			paras = append(paras, paragraph{voice: v})
			cur = &paras[len(paras)-1]
		}
		cur.lines = append(cur.lines, l)
	}
	for _, c := range ctxs {
		c.text = c.b.String()
		c.tool = toolIn(c.text)
		if containsAny(c.text, cpuWords) {
			c.cpus = cpuRE.FindAllString(c.text, -1)
		}
		if len(c.cpus) > 0 {
			c.platform = platformIn(c.cpus[0]) // platformIn(c.text) without a second scan
		} else {
			c.platform = archRE.FindString(c.text)
		}
		if m := submatchIf(benchRE, c.text, "()"); m != nil {
			c.bench = m[1] + m[2]
		}
	}
	r := &reader{msg: m}
	for i, p := range paras {
		var prev *paragraph
		if i > 0 && paras[i-1].voice == p.voice && p.lines[0].no-paras[i-1].lines[len(paras[i-1].lines)-1].no <= 3 {
			prev = &paras[i-1]
		}
		c := ctxs[ctxKey{p.voice.depth, p.voice.author}]
		r.paragraph(p, prev, c)
	}
	sortByLine(r.out)
	return r.out
}

var (
	// benchRE is a function the writer says was measured: "I benchmarked
	// 100 synchronize_rcu() calls", "synchronize_rcu() latency".
	benchRE    = lazyre.New(`\b([a-z_][a-z0-9_]*)\(\)\s+(?:calls|latency|loop)|(?i:benchmark(?:ed)?|measured)\s+(?:\d+\s+)?([a-z_][a-z0-9_]*)\(\)`)
	toolRE     = lazyre.New(`(?i)\b(stress-ng|perf bench)\b`)
	cpuRE      = lazyre.New(`\b(POWER\d+|Power\d+|EPYC \w+|Ampere(?: Altra(?: Max)?)?|Xeon(?: [\w-]+)?|Graviton\d?|Neoverse[- ]\w+)`)
	archRE     = lazyre.New(`\b(ppc64le|ppc64|x86_64|aarch64|arm64|riscv64|s390x|ppc32)\b`)
	bogoUnitRE = lazyre.New(`(?i)bogo[- ]ops`)
)

func toolIn(s string) string {
	if m := toolRE.FindString(s); m != "" {
		return strings.ToLower(m)
	}
	if bogoUnitRE.MatchString(s) {
		return "stress-ng"
	}
	return ""
}

// platformOf names the machine of a table: a CPU model in its caption,
// else the one its writer names elsewhere when the caption names no other
// arch ("POWER10" for a table captioned "... on ppc64le:"), else an arch.
func platformOf(caption string, c *context) string {
	if m := cpuRE.FindString(caption); m != "" {
		return platformIn(m)
	}
	arch := archRE.FindString(caption)
	for _, m := range c.cpus {
		if arch == "" || cpuArch(m) == archFamily(arch) {
			return platformIn(m)
		}
	}
	if arch != "" {
		return arch
	}
	return c.platform
}

func archFamily(a string) string {
	switch a {
	case "ppc64le", "ppc64", "ppc32":
		return "powerpc"
	case "aarch64", "arm64":
		return "arm64"
	}
	return a
}

func cpuArch(cpu string) string {
	switch {
	case strings.HasPrefix(strings.ToUpper(cpu), "POWER"):
		return "powerpc"
	case strings.HasPrefix(cpu, "EPYC"), strings.HasPrefix(cpu, "Xeon"):
		return "x86_64"
	}
	return "arm64"
}

// cpuWords are words every cpuRE match holds, platformWords those every
// cpuRE or archRE match holds.
var (
	cpuWords      = []string{"POWER", "Power", "EPYC", "Ampere", "Xeon", "Graviton", "Neoverse"}
	platformWords = append([]string{"ppc", "x86_64", "arch64", "arm64", "riscv64", "s390x"}, cpuWords...)
)

// containsAny says whether s holds one of words. The regexps here start
// with \b or (?i) and so cannot skip ahead to a literal; checking for a
// word they need first is what keeps the reader fast on mail that names
// no machine (most of it).
func containsAny(s string, words []string) bool {
	for _, w := range words {
		if strings.Contains(s, w) {
			return true
		}
	}
	return false
}

// submatchIf is re.FindStringSubmatch(s) for a re whose every match
// holds need, without running re when s does not.
func submatchIf(re *lazyre.Regexp, s, need string) []string {
	if !strings.Contains(s, need) {
		return nil
	}
	return re.FindStringSubmatch(s)
}

// platformIn names the machine: a CPU model first, else an arch.
func platformIn(s string) string {
	if !containsAny(s, platformWords) {
		return "" // neither cpuRE nor archRE can match
	}
	if m := cpuRE.FindString(s); m != "" {
		if strings.HasPrefix(m, "Power") {
			m = strings.ToUpper(m)
		}
		return m
	}
	return archRE.FindString(s)
}
