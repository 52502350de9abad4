package bisect

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/patcheval/patcheval/evaluate/report"
	"github.com/patcheval/patcheval/mbox"
	"github.com/patcheval/patcheval/series/recipients"
)

// Context says what was bisected, for the report.
type Context struct {
	// Tree names the repository (URL or path); Pipeline, Variant and Arch
	// the test parameters; Params extra key=value lines.
	Tree, Pipeline, Variant, Arch string
	Params                        []string
	// Regzbot puts regzbot's commands in the culprit draft and the text
	// report (RegzbotLines): for lists whose regressions regzbot tracks.
	Regzbot bool
}

// RegzbotLines are the commands that make regzbot, the kernel's
// regression tracker, track this regression (its docs/reference.md):
// "#regzbot introduced: <commit-id>" (12 hex digits; regzbot wants at
// least 8) for a named culprit, "#regzbot introduced: <good>..<bad>" (the
// refs bisected, tags when the watch had them) when the bisection could
// not name one, then "#regzbot title: ...". Nothing for a bisection that
// did not end.
func RegzbotLines(r *Result, c Context) []string {
	var introduced string
	switch r.Status {
	case Found:
		introduced = short12(r.Culprit.Hash)
	case Ambiguous:
		good, bad := r.GoodRef, r.BadRef
		if good == "" || bad == "" {
			good, bad = short12(r.Good.Hash), short12(r.Bad.Hash)
		}
		introduced = good + ".." + bad
	default:
		return nil
	}
	title := fmt.Sprintf("%s %s %+.1f%% regression", r.Benchmark, r.Metric, r.Change)
	var on []string
	if c.Arch != "" {
		on = append(on, c.Arch)
	}
	if c.Pipeline != "" {
		on = append(on, "patcheval "+c.Pipeline)
	}
	if len(on) > 0 {
		title += " (" + strings.Join(on, ", ") + ")"
	}
	return []string{"#regzbot introduced: " + introduced, "#regzbot title: " + title}
}

func short12(h string) string {
	if len(h) > 12 {
		return h[:12]
	}
	return h
}

// Headline is "a +24.8% regression of getppid ns/op".
func (r *Result) Headline() string {
	return fmt.Sprintf("a %+.1f%% regression of %s %s", r.Change, r.Benchmark, r.Metric)
}

// WriteText writes the LKP-style report.
func WriteText(w io.Writer, r *Result, c Context) error {
	var b strings.Builder
	p := func(format string, a ...any) { fmt.Fprintf(&b, format+"\n", a...) }
	switch r.Status {
	case Found:
		p("patcheval bisected %s to:", r.Headline())
		p("")
		p("commit: %s (%q)", r.Culprit.Hash, r.Culprit.Subject)
		p("author: %s <%s>", r.Culprit.Author, r.Culprit.Email)
		if r.Culprit.Link != "" {
			p("link:   %s", r.Culprit.Link)
		}
		p("parent: %s (%q)", r.Parent.Hash, r.Parent.Subject)
		if r.Confirmed {
			p("confirmed: the parent measured good and the commit bad again")
		} else if len(r.Notes) > 0 {
			p("NOT confirmed (see notes)")
		}
	default:
		p("patcheval could not name one commit for %s: %d candidate(s) remain", r.Headline(), len(r.Candidates))
		for _, cm := range r.Candidates {
			p("  %s %s", short(cm.Hash), cm.Subject)
		}
	}
	p("")
	p("tree:   %s", orDash(c.Tree, r.Repo))
	p("range:  %s (good, %s) .. %s (bad, %s), %d first-parent commit(s)", r.GoodRef, short(r.Good.Hash), r.BadRef, short(r.Bad.Hash), r.Commits)
	p("test:   pipeline %s%s%s, benchmark %s, metric %s%s", c.Pipeline, prefix(", variant ", c.Variant), prefix(", arch ", c.Arch),
		r.Benchmark, r.Metric, map[bool]string{true: ", deterministic QEMU (-icount): one boot per step", false: ", repeated boots until clear"}[r.Deterministic])
	for _, l := range c.Params {
		p("        %s", l)
	}
	p("")
	if r.Status == Found {
		pv, cv := r.valuesOf(r.Parent.Hash), r.valuesOf(r.Culprit.Hash)
		p("%14s %10s %14s %10s", short(r.Parent.Hash), "", short(r.Culprit.Hash), "")
		p("%14s %10s %14s %10s", "----------", "", "----------", "")
		p("%14.6g %9.1f%% %+9.1f%% %14.6g %9.1f%%  %s.%s", mean(pv), stddevPct(pv), r.Change, mean(cv), stddevPct(cv), r.Benchmark, r.Metric)
		p("%14s %10s %10s %14s %10s", "", "%stddev", "%change", "", "%stddev")
		if r.CILow != r.CIHigh {
			p("95%% CI of the change: [%+.1f%%, %+.1f%%]", r.CILow, r.CIHigh)
		}
		p("")
	}
	p("steps (value in %s; position 0 = good value %.6g, 1 = bad value %.6g, noise band ±%.3g):", orDash(r.Unit, r.Metric), r.GoodValue, r.BadValue, r.Band)
	p("%3s  %-12s  %-40s  %12s  %8s  %-12s  %-15s  %s", "#", "commit", "subject", "value", "position", "verdict", "role", "build")
	for _, s := range r.Steps {
		val, pos := "-", "-"
		if len(s.Values) > 0 {
			val, pos = fmt.Sprintf("%.6g", s.Mean), fmt.Sprintf("%.2f", s.Position)
			if len(s.Values) > 1 {
				val += fmt.Sprintf(" n=%d", len(s.Values))
			}
		}
		build := "cached"
		if s.Built {
			build = fmt.Sprintf("%.0fs", s.BuildSeconds)
		}
		if s.Note != "" {
			build += " " + s.Note
		}
		p("%3d  %-12s  %-40s  %12s  %8s  %-12s  %-15s  %s", s.N, short(s.Commit.Hash), clip(s.Commit.Subject, 40), val, pos, s.Verdict, s.Role, build)
		if s.Error != "" {
			p("     %s: %s", s.Reason, s.Error)
		}
	}
	p("")
	p("%s", Plot(r, 60))
	p("builds used: %d (ceil(log2(%d)) + 2 = %d); commits measured: %d; boots: %d; skipped: %d", r.Builds, r.Commits, r.Bound, r.Measured, r.Boots, r.Skipped)
	p("wall time: %s (building %s)", r.Wall.Round(time.Second), r.BuildTime.Round(time.Second))
	for _, n := range r.Notes {
		p("note: %s", n)
	}
	if lines := RegzbotLines(r, c); c.Regzbot && len(lines) > 0 {
		p("")
		p("For regzbot, in the mail that reports this regression (a paragraph of its own):")
		p("")
		for _, l := range lines {
			p("%s", l)
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// Plot is a text plot of every step's value against the step number,
// with the good and bad values as reference lines.
func Plot(r *Result, width int) string {
	var rows []string
	lo, hi := math.Min(r.GoodValue, r.BadValue), math.Max(r.GoodValue, r.BadValue)
	for _, s := range r.Steps {
		if len(s.Values) > 0 {
			lo, hi = math.Min(lo, s.Mean), math.Max(hi, s.Mean)
		}
	}
	span := hi - lo
	if span == 0 {
		span = 1
	}
	col := func(v float64) int { return int(math.Round((v - lo) / span * float64(width-1))) }
	gc, bc := col(r.GoodValue), col(r.BadValue)
	rows = append(rows, fmt.Sprintf("     %-*s", width, fmt.Sprintf("%.6g (good) .. %.6g (bad)", r.GoodValue, r.BadValue)))
	for _, s := range r.Steps {
		line := []byte(strings.Repeat(" ", width))
		line[gc], line[bc] = '|', '|'
		mark := "x"
		if len(s.Values) > 0 {
			switch s.Verdict {
			case Good:
				mark = "g"
			case Bad:
				mark = "B"
			case Inconclusive:
				mark = "?"
			}
			line[col(s.Mean)] = mark[0]
		}
		rows = append(rows, fmt.Sprintf("%3d  %s  %s", s.N, string(line), short(s.Commit.Hash)))
	}
	return strings.Join(rows, "\n")
}

// WriteMarkdown writes the report as Markdown.
func WriteMarkdown(w io.Writer, r *Result, c Context) error {
	var b strings.Builder
	p := func(format string, a ...any) { fmt.Fprintf(&b, format+"\n", a...) }
	if r.Status == Found {
		p("# Bisected: %s", r.Headline())
		p("")
		p("- **commit**: `%s` %s", r.Culprit.Hash, mdEscape(r.Culprit.Subject))
		p("- **author**: %s <%s>", mdEscape(r.Culprit.Author), r.Culprit.Email)
		p("- **parent**: `%s` %s", r.Parent.Hash, mdEscape(r.Parent.Subject))
		p("- **confirmed**: %v", r.Confirmed)
	} else {
		p("# Bisection ambiguous: %s", r.Headline())
		p("")
		for _, cm := range r.Candidates {
			p("- candidate `%s` %s", short(cm.Hash), mdEscape(cm.Subject))
		}
	}
	p("- **tree**: %s", mdEscape(orDash(c.Tree, r.Repo)))
	p("- **range**: %s .. %s, %d first-parent commits", mdEscape(r.GoodRef), mdEscape(r.BadRef), r.Commits)
	p("- **test**: pipeline `%s`, %s %s, deterministic %v", c.Pipeline, r.Benchmark, r.Metric, r.Deterministic)
	p("- **builds**: %d (bound ceil(log2(%d))+2 = %d), %d commits measured, %d boots, %d skipped", r.Builds, r.Commits, r.Bound, r.Measured, r.Boots, r.Skipped)
	p("- **wall time**: %s", r.Wall.Round(time.Second))
	p("")
	p("| # | commit | subject | value | position | verdict | role | build |")
	p("|---|---|---|---|---|---|---|---|")
	for _, s := range r.Steps {
		val := "-"
		if len(s.Values) > 0 {
			val = fmt.Sprintf("%.6g", s.Mean)
		}
		build := "cached"
		if s.Built {
			build = fmt.Sprintf("%.0f s", s.BuildSeconds)
		}
		p("| %d | `%s` | %s | %s | %.2f | %s | %s | %s |", s.N, short(s.Commit.Hash), mdEscape(s.Commit.Subject), val, s.Position, s.Verdict, s.Role, build)
	}
	for _, n := range r.Notes {
		p("")
		p("> %s", mdEscape(n))
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// WriteJSON writes the result with its context.
func WriteJSON(w io.Writer, r *Result, c Context) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(struct {
		Context Context `json:"context"`
		*Result
	}{c, r})
}

// WriteKCIDB writes KCIDB v5.3 data: the culprit's checkout, build and
// test, an issue (the regression, culprit code) and its incident on the
// culprit's test.
func WriteKCIDB(w io.Writer, r *Result, c Context) error {
	if r.Status != Found {
		return fmt.Errorf("bisect: no single culprit: no KCIDB issue")
	}
	o := report.KCIDBOrigin
	sum := sha256.Sum256([]byte(r.Culprit.Hash + r.Parent.Hash + r.Benchmark + r.Metric + c.Pipeline))
	id := hex.EncodeToString(sum[:8])
	checkout := o + ":bisect-" + id + ":checkout"
	build := o + ":bisect-" + id + ":build"
	test := o + ":bisect-" + id + ":test"
	issue := o + ":bisect-" + id
	path := kcidbPath(r.Benchmark) + "." + kcidbPath(r.Metric)
	cv := r.valuesOf(r.Culprit.Hash)
	co := map[string]any{
		"id": checkout, "origin": o, "git_commit_hash": r.Culprit.Hash, "valid": true,
		"comment": r.Culprit.Subject, "misc": map[string]any{"tree": orDash(c.Tree, r.Repo), "parent": r.Parent.Hash},
	}
	if strings.HasPrefix(c.Tree, "https://") || strings.HasPrefix(c.Tree, "git://") {
		co["git_repository_url"] = c.Tree
	}
	if !r.Started.IsZero() {
		co["start_time"] = r.Started.UTC().Format("2006-01-02T15:04:05.000000+00:00")
	}
	data := map[string]any{
		"version":   map[string]int{"major": 5, "minor": 3},
		"checkouts": []map[string]any{co},
		"builds": []map[string]any{{
			"id": build, "checkout_id": checkout, "origin": o, "status": "PASS", "architecture": c.Arch,
			"comment": c.Pipeline + " " + c.Variant,
		}},
		"tests": []map[string]any{{
			"id": test, "build_id": build, "origin": o, "path": "patcheval." + path, "status": "FAIL",
			"number":  map[string]any{"value": mean(cv), "unit": r.Unit},
			"comment": fmt.Sprintf("%s vs parent %s", r.Headline(), short(r.Parent.Hash)),
		}},
		"issues": []map[string]any{{
			"id": issue, "version": 1, "origin": o,
			"report_subject": fmt.Sprintf("%s: %s", short(r.Culprit.Hash), r.Headline()),
			"culprit":        map[string]bool{"code": true, "tool": false, "harness": false},
			"test_status":    "FAIL",
			"comment":        fmt.Sprintf("bisected %s..%s (%d commits, %d builds); confirmed %v", r.GoodRef, r.BadRef, r.Commits, r.Builds, r.Confirmed),
			"misc": map[string]any{"change_pct": r.Change, "ci_low_pct": r.CILow, "ci_high_pct": r.CIHigh,
				"culprit": r.Culprit.Hash, "parent": r.Parent.Hash},
		}},
		"incidents": []map[string]any{{
			"id": issue + ":incident", "origin": o, "issue_id": issue, "issue_version": 1, "test_id": test, "present": true,
		}},
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(data)
}

func kcidbPath(s string) string {
	s = strings.ReplaceAll(s, "/", "_per_")
	var b strings.Builder
	for _, r := range s {
		if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '_' || r == '-' {
			b.WriteRune(r)
		} else {
			b.WriteByte('_')
		}
	}
	return b.String()
}

// Draft is the mail to the culprit's author, Cc the maintainers of the
// files it changes (its parent's MAINTAINERS, recipients.ForCommit) and
// the mailing lists MAINTAINERS names for them (Commit.Lists), never the
// commit's own Cc trailers; it replies to the message its Link: names
// when that is a lore link. It is never sent.
func Draft(r *Result, c Context, from mbox.Address, now time.Time) (*report.Draft, error) {
	if r.Status != Found {
		return nil, fmt.Errorf("bisect: no single culprit: no reply draft")
	}
	if now.IsZero() {
		now = time.Now()
	}
	author := mbox.Address{Name: r.Culprit.Author, Email: r.Culprit.Email}
	d := &report.Draft{From: from, Date: now, To: []mbox.Address{author},
		Subject: fmt.Sprintf("[bisected] %s: %s", clip(r.Culprit.Subject, 60), r.Headline())}
	var left string
	if ms, err := recipients.ForCommit(r.Repo, r.Culprit.Hash); err == nil {
		a := recipients.Resolve(recipients.Policy{}, author, ms, true)
		d.To, d.Cc = a.To, a.Cc
	} else {
		left = "The culprit's maintainers are not addressed: " + err.Error() + "\n"
	}
	for _, l := range r.Culprit.Lists {
		if !slices.ContainsFunc(append(d.To, d.Cc...), func(a mbox.Address) bool { return strings.EqualFold(a.Email, l) }) {
			d.Cc = append(d.Cc, mbox.Address{Email: l})
		}
	}
	sum := sha256.Sum256([]byte(r.Culprit.Hash + now.String()))
	domain := "patcheval.local"
	if _, dom, ok := strings.Cut(from.Email, "@"); ok && dom != "" {
		domain = dom
	}
	d.MessageID = "bisect-" + hex.EncodeToString(sum[:8]) + "@" + domain
	if id := loreMsgID(r.Culprit.Link); id != "" {
		d.InReplyTo, d.References = id, []string{id}
	}
	var b strings.Builder
	name := r.Culprit.Author
	if f, _, ok := strings.Cut(name, " "); ok {
		name = f
	}
	fmt.Fprintf(&b, "Hi %s,\n\n", name)
	fmt.Fprintf(&b, "patcheval found %s and bisected it to your commit\n\n", r.Headline())
	fmt.Fprintf(&b, "  %s (\"%s\")\n\n", short(r.Culprit.Hash), r.Culprit.Subject)
	var txt strings.Builder
	plain := c
	plain.Regzbot = false // the draft carries the commands once, below
	_ = WriteText(&txt, r, plain)
	for _, l := range strings.Split(strings.TrimRight(txt.String(), "\n"), "\n") {
		if len(l) > report.MaxBodyWidth+40 {
			l = l[:report.MaxBodyWidth+40]
		}
		b.WriteString(l + "\n")
	}
	b.WriteString("\nThe measurement is reproducible: the same command rebuilds the same\nkernels and, in deterministic QEMU, gives the same values.\n")
	b.WriteString(left)
	if c.Regzbot {
		// regzbot reads its commands from a paragraph of their own.
		b.WriteString("\n" + strings.Join(RegzbotLines(r, c), "\n") + "\n")
	}
	d.Body = b.String()
	return d, nil
}

// loreMsgID extracts the message id of a lore link
// (https://lore.kernel.org/r/<id> or .../<list>/<id>/).
func loreMsgID(link string) string {
	if !strings.Contains(link, "lore.kernel.org/") {
		return ""
	}
	parts := strings.Split(strings.TrimRight(link, "/"), "/")
	id := parts[len(parts)-1]
	if strings.Contains(id, "@") {
		return id
	}
	return ""
}

func (r *Result) valuesOf(hash string) []float64 {
	var out []float64
	for _, s := range r.Steps {
		if s.Commit.Hash == hash {
			out = append(out, s.Values...)
		}
	}
	return out
}

func mean(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := 0.0
	for _, x := range xs {
		s += x
	}
	return s / float64(len(xs))
}

func stddevPct(xs []float64) float64 {
	if len(xs) < 2 {
		return 0
	}
	m := mean(xs)
	ss := 0.0
	for _, x := range xs {
		ss += (x - m) * (x - m)
	}
	if m == 0 {
		return 0
	}
	return 100 * math.Sqrt(ss/float64(len(xs)-1)) / math.Abs(m)
}

func orDash(a, b string) string {
	if a != "" {
		return a
	}
	if b != "" {
		return b
	}
	return "-"
}

func prefix(p, s string) string {
	if s == "" {
		return ""
	}
	return p + s
}

func clip(s string, n int) string {
	if len([]rune(s)) <= n {
		return s
	}
	return string([]rune(s)[:n-1]) + "…"
}

func mdEscape(s string) string {
	return strings.NewReplacer("|", "\\|", "*", "\\*", "_", "\\_", "`", "\\`", "<", "&lt;", ">", "&gt;").Replace(s)
}
