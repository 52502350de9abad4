package watch

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"mime"
	"net/mail"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/patcheval/patcheval/evaluate/report"
	"github.com/patcheval/patcheval/evaluate/stats"
	"github.com/patcheval/patcheval/internal/fail"
	"github.com/patcheval/patcheval/internal/lazyre"
	"github.com/patcheval/patcheval/mbox"
	"github.com/patcheval/patcheval/pipelines/experiments/bisect"
	"github.com/patcheval/patcheval/pipelines/store"
)

// Fixed is what a watch with regzbot on records on a regression event it
// reported (its bisection named a culprit or a range, so regzbot was told
// "#regzbot introduced:") once a later tag shows the regression gone: the
// metric on that tag compared with the tag before the regression is no
// longer a regression by the watch's own statistics (equivalent, a
// change below the watch's threshold, or an improvement).
type Fixed struct {
	// Tag and Commit are where the metric is back; Since is the last
	// evaluated tag before it, where the regression still showed.
	Tag    string `json:"tag"`
	Commit string `json:"commit"`
	Since  string `json:"since"`
	// Verdict and Change compare the tag before the regression (the
	// event's From) with Tag.
	Verdict string  `json:"verdict"`
	Label   string  `json:"label"`
	Change  float64 `json:"change_pct"`
	Reason  string  `json:"reason"`
	// FixCommit is the commit in Since..Tag that reverts the culprit or
	// names it in a Fixes: trailer (the first to land; empty: none found,
	// or no single culprit); Subject its summary line.
	FixCommit string `json:"fix_commit,omitempty"`
	Subject   string `json:"fix_subject,omitempty"`
	// Lines are the regzbot commands: "#regzbot fix: <commit>" when
	// FixCommit is known, else "#regzbot resolve: <reason>".
	Lines []string `json:"regzbot"`
	// Report is fixed.txt next to the bisection's report; Draft is
	// fixed.eml, the reply to the culprit draft (culprit.eml), when
	// there is one.
	Report string `json:"report"`
	Draft  string `json:"draft,omitempty"`
}

// FixedLines are the regzbot commands saying a tracked regression is
// gone, in regzbot's documented syntax (its docs/reference.md, "commands
// to resolve a regzbot entry"): "#regzbot fix: <commit-id>" when the
// commit that fixed it is known (regzbot marks the entry fixed once that
// commit is in the tree the regression is in), otherwise "#regzbot
// resolve: <reason>" with the reason regzbot recommends giving: the
// metric is back, on which tag, by which test, and that the fixing
// commit was not identified.
func FixedLines(f *Fixed, ev *store.WatchEvent, pipeline string) []string {
	if f.FixCommit != "" {
		return []string{"#regzbot fix: " + short(f.FixCommit)}
	}
	how := "equivalent"
	switch {
	case f.Verdict == string(stats.Improvement):
		how = "better"
	case f.Verdict != string(stats.Equivalent):
		how = "within the threshold"
	}
	reason := fmt.Sprintf("%s %s back to %s's level on %s (%+.1f%%, %s; patcheval %s), the fixing commit not identified",
		ev.Benchmark, ev.Metric, ev.From, f.Tag, f.Change, how, pipeline)
	return []string{"#regzbot resolve: " + reason}
}

var fixesRe = lazyre.New(`(?im)^\s*(?:Fixes:\s*|This reverts commit\s+)([0-9a-f]{8,40})\b`)

// FindFix looks in the first-parent and merged commits of since..tag in
// repo (git log) for the commit that reverts culprit or names it in a
// Fixes: trailer; it returns the first to land (the oldest), "" when none.
func FindFix(ctx context.Context, repo, since, tag, culprit string) (hash, subject string, err error) {
	if len(culprit) < 8 {
		return "", "", nil
	}
	cmd := exec.CommandContext(ctx, "git", "--git-dir="+repo, "log", "--reverse", "--format=%H%x1f%s%x1f%B%x1e",
		"--grep="+culprit[:8], since+".."+tag)
	var errb bytes.Buffer
	cmd.Stderr = &errb
	out, err := cmd.Output()
	if err != nil {
		return "", "", fail.Infraf("watch: git log %s..%s in %s: %v: %s", since, tag, repo, err, strings.TrimSpace(errb.String()))
	}
	for _, rec := range strings.Split(string(out), "\x1e") {
		parts := strings.SplitN(strings.TrimLeft(rec, "\n"), "\x1f", 3)
		if len(parts) < 3 {
			continue
		}
		for _, m := range fixesRe.FindAllStringSubmatch(parts[2], -1) {
			if strings.HasPrefix(culprit, strings.ToLower(m[1])) {
				return parts[0], parts[1], nil
			}
		}
	}
	return "", "", nil
}

// fixes checks, on a watch with regzbot on, every regression event whose
// bisection named a culprit or a range and that is not known fixed yet:
// when tag (just evaluated) shows the metric back, it writes what says so
// (fixed.txt, and fixed.eml in reply to culprit.eml) and records it on
// the event, once (store.SetEventFixed).
func (wr *Watcher) fixes(ctx context.Context, w *store.Watch, tag string) ([]*Fixed, error) {
	if !w.Regzbot {
		return nil, nil
	}
	h, err := Load(wr.Store, w)
	if err != nil {
		return nil, err
	}
	pos := map[string]int{}
	for i, t := range h.Tags {
		pos[t.Tag] = i
	}
	idx, ok := pos[tag]
	if !ok {
		return nil, nil
	}
	opts, minChange := wr.statsOptions(w)
	var out []*Fixed
	for _, ev := range h.Events {
		if ev.Verdict != string(stats.Regression) || len(ev.Fixed) > 0 || len(ev.Bisect) == 0 {
			continue
		}
		var bs BisectState
		if json.Unmarshal(ev.Bisect, &bs) != nil || (bs.Status != bisect.Found && bs.Status != bisect.Ambiguous) {
			continue // regzbot was told nothing (yet)
		}
		from, ok1 := pos[ev.From]
		to, ok2 := pos[ev.To]
		if !ok1 || !ok2 || idx <= to {
			continue
		}
		s := h.find(ev.Variant, ev.Benchmark, ev.Metric)
		if s == nil || len(s.Values[from].samples) == 0 || len(s.Values[idx].samples) == 0 {
			continue
		}
		o := opts
		o.HigherIsBetter = s.HigherIsBetter
		c := stats.CompareWith(s.Values[from].samples, s.Values[idx].samples, o)
		gone := c.Verdict == stats.Equivalent || c.Verdict == stats.Improvement ||
			c.Verdict == stats.Regression && minChange > 0 && c.BelowThreshold
		if !gone {
			continue
		}
		since := ev.To
		for i := idx - 1; i > to; i-- {
			if h.Tags[i].Status == store.TagDone {
				since = h.Tags[i].Tag
				break
			}
		}
		f := &Fixed{Tag: tag, Commit: h.Tags[idx].Commit, Since: since, Verdict: string(c.Verdict), Label: c.Label(),
			Change: c.Change, Reason: c.Reason}
		if bs.Status == bisect.Found && bs.Culprit != nil {
			if f.FixCommit, f.Subject, err = FindFix(ctx, w.Tree, h.Tags[pos[since]].Commit, f.Commit, bs.Culprit.Hash); err != nil {
				return out, err
			}
		}
		f.Lines = FixedLines(f, ev, w.Pipeline)
		if err := writeFixed(f, ev, &bs); err != nil {
			return out, err
		}
		set, err := wr.Store.SetEventFixed(ev.ID, f)
		if err != nil {
			return out, err
		}
		if set {
			wr.logf("watch %s: the %s %s %s regression of %s..%s is gone on %s: %s", w.Name, ev.Variant, ev.Benchmark, ev.Metric,
				ev.From, ev.To, tag, strings.Join(f.Lines, "; "))
			out = append(out, f)
		}
	}
	return out, nil
}

// statsOptions are the comparison options of a watch's events and the
// practical threshold (0: none).
func (wr *Watcher) statsOptions(w *store.Watch) (stats.Options, float64) {
	opts := stats.Options{}
	minChange := 0.0
	if wr.Deterministic != nil && wr.Deterministic(w) {
		minChange = wr.MinChange
		if minChange == 0 {
			minChange = stats.DefaultDeterministicThreshold
		}
		opts.Threshold = minChange
	}
	return opts, minChange
}

// find is the series of (variant, benchmark, metric), nil when none.
func (h *History) find(variant, benchmark, metric string) *Series {
	for i := range h.Series {
		if s := &h.Series[i]; s.Variant == variant && s.Benchmark == benchmark && s.Metric == metric {
			return s
		}
	}
	return nil
}

// writeFixed writes fixed.txt next to the bisection's report and, when
// the bisection wrote a culprit draft, fixed.eml replying to it (same
// sender and recipients, a Message-ID derived from the draft's and the
// tag, so that writing it again gives the same file).
func writeFixed(f *Fixed, ev *store.WatchEvent, bs *BisectState) error {
	if bs.Report == "" {
		return nil
	}
	dir := filepath.Dir(bs.Report)
	var b strings.Builder
	fmt.Fprintf(&b, "The %s %s %s regression of %s..%s (%+.1f%%) is gone on %s (%s):\n",
		ev.Variant, ev.Benchmark, ev.Metric, ev.From, ev.To, ev.Change, f.Tag, short(f.Commit))
	fmt.Fprintf(&b, "%s against %s: %s, %+.1f%%. %s\n", f.Tag, ev.From, f.Label, f.Change, f.Reason)
	if f.FixCommit != "" {
		fmt.Fprintf(&b, "Fixed by %s (\"%s\"), in %s..%s.\n", short(f.FixCommit), f.Subject, f.Since, f.Tag)
	} else {
		fmt.Fprintf(&b, "No commit in %s..%s reverts the culprit or names it in a Fixes: trailer.\n", f.Since, f.Tag)
	}
	fmt.Fprintf(&b, "\nFor regzbot, in a reply to the mail that reported this regression (a paragraph of its own):\n\n%s\n",
		strings.Join(f.Lines, "\n"))
	f.Report = filepath.Join(dir, "fixed.txt")
	if err := os.WriteFile(f.Report, []byte(b.String()), 0o644); err != nil {
		return fail.Infra(err)
	}
	culprit := filepath.Join(dir, "culprit.eml")
	raw, err := os.ReadFile(culprit)
	if os.IsNotExist(err) {
		return nil
	} else if err != nil {
		return fail.Infra(err)
	}
	d, err := fixedDraft(raw, f, ev)
	if err != nil {
		return fmt.Errorf("watch: %s: %w", culprit, err)
	}
	var eml bytes.Buffer
	if err := report.WriteDraft(&eml, *d); err != nil {
		return err
	}
	f.Draft = filepath.Join(dir, "fixed.eml")
	if err := os.WriteFile(f.Draft, eml.Bytes(), 0o644); err != nil {
		return fail.Infra(err)
	}
	return nil
}

// fixedDraft is the reply to the culprit draft raw saying the regression
// is gone, its regzbot commands in a paragraph of their own (regzbot reads
// commands in replies to the report).
func fixedDraft(raw []byte, f *Fixed, ev *store.WatchEvent) (*report.Draft, error) {
	m, err := mail.ReadMessage(bytes.NewReader(raw))
	if err != nil {
		return nil, fail.Inputf("not a mail: %v", err)
	}
	addrs := func(k string) []mbox.Address {
		l, _ := m.Header.AddressList(k)
		var out []mbox.Address
		for _, a := range l {
			out = append(out, mbox.Address{Name: a.Name, Email: a.Address})
		}
		return out
	}
	from := addrs("From")
	if len(from) == 0 {
		return nil, fail.Inputf("no From")
	}
	dec := new(mime.WordDecoder)
	subject, err := dec.DecodeHeader(m.Header.Get("Subject"))
	if err != nil {
		subject = m.Header.Get("Subject")
	}
	id := strings.Trim(m.Header.Get("Message-ID"), "<> ")
	sum := sha256.Sum256([]byte(id + "\x00fixed\x00" + f.Tag))
	domain := "patcheval.local"
	if _, dom, ok := strings.Cut(from[0].Email, "@"); ok && dom != "" {
		domain = dom
	}
	d := &report.Draft{From: from[0], To: addrs("To"), Cc: addrs("Cc"), Subject: "Re: " + strings.TrimPrefix(subject, "Re: "),
		Date: time.Now(), MessageID: "fixed-" + hex.EncodeToString(sum[:8]) + "@" + domain, InReplyTo: id}
	for _, r := range strings.Fields(m.Header.Get("References")) {
		d.References = append(d.References, strings.Trim(r, "<>"))
	}
	if id != "" {
		d.References = append(d.References, id)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "The %s %s regression reported above (%s..%s, %+.1f%%)\nis gone on %s: ",
		ev.Benchmark, ev.Metric, ev.From, ev.To, ev.Change, f.Tag)
	fmt.Fprintf(&b, "against %s, %s (%+.1f%%).\n", ev.From, f.Label, f.Change)
	if f.FixCommit != "" {
		fmt.Fprintf(&b, "\nIt was fixed by\n\n  %s (\"%s\")\n", short(f.FixCommit), f.Subject)
	} else {
		fmt.Fprintf(&b, "\nNo commit in %s..%s reverts the culprit or names it in a\nFixes: trailer; the fixing commit is not identified.\n", f.Since, f.Tag)
	}
	b.WriteString("\n" + strings.Join(f.Lines, "\n") + "\n")
	d.Body = b.String()
	return d, nil
}
