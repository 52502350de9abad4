package watch

import (
	"context"
	"encoding/json"
	"fmt"
	"mime"
	"net/mail"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/patcheval/patcheval/internal/testgit"
	"github.com/patcheval/patcheval/mbox"
	"github.com/patcheval/patcheval/pipelines"
	"github.com/patcheval/patcheval/pipelines/experiments/bisect"
	"github.com/patcheval/patcheval/pipelines/store"
)

// gitMeasurer is the bisection's measurer here: bench/getppid of the
// commit in the watch's local tree, as treeEval reads it.
type gitMeasurer struct{ repo string }

func (m gitMeasurer) Measure(ctx context.Context, commit string, boots int) (*bisect.Measurement, error) {
	s, err := testgit.Blob(m.repo, commit, "bench/getppid")
	if err != nil {
		return nil, err
	}
	v, err := strconv.ParseFloat(strings.TrimSpace(s), 64)
	if err != nil {
		return nil, err
	}
	out := &bisect.Measurement{Unit: "ns", Built: true}
	for i := 0; i < boots; i++ {
		out.Values = append(out.Values, v)
	}
	return out, nil
}

// commitMsg adds a commit with a message of its own whose measurement is
// value.
func (u *upstream) commitMsg(t *testing.T, msg string, value int) string {
	u.n++
	u.head = testgit.Commit(t, u.dir, u.head, msg, fmt.Sprintf("2026-11-02T10:%02d:00Z", u.n), map[string]string{
		"bench/getppid": strconv.Itoa(value) + "\n",
		"kernel/sys.c":  fmt.Sprintf("/* revision %d */\n", u.n),
	})
	return u.head
}

// regzbotFixture is a watch with bisect and regzbot on whose v7.2.12
// has a 25% getppid regression bisected to "sys: slow getppid" (culprit
// draft written), still there on v7.2.13.
func regzbotFixture(t *testing.T) (f *fixture, culprit string) {
	f = newFixture(t)
	pipeline, _ := filepath.Abs("testdata/retest-x86-getppid.toml")
	f.w.Bisect, f.w.Regzbot, f.w.Pipeline, f.w.Tags = true, true, pipeline, "v7.2.*"
	if err := f.st.UpdateWatch(*f.w); err != nil {
		t.Fatal(err)
	}
	out := t.TempDir()
	b := &Bisection{Eval: &PipelineEvaluator{OutDir: out}, From: mbox.Address{Name: "Tester", Email: "tester@example.org"}, Logf: t.Logf,
		NewMeasurer: func(p *pipelines.Pipeline, w *store.Watch, ev *store.WatchEvent, dir string) (bisect.Measurer, error) {
			return gitMeasurer{repo: w.Tree}, nil
		}}
	f.wr.Bisect = b.Bisect
	testgit.Tag(t, f.up.dir, "v7.2.11", f.up.commit(t, 1000))
	f.tick(t)
	f.up.commit(t, 1000)
	culprit = f.up.commitMsg(t, "sys: slow getppid", 1250)
	testgit.Tag(t, f.up.dir, "v7.2.12", f.up.commit(t, 1250))
	if res := f.tick(t); len(res.Bisected) != 1 || len(res.Fixed) != 0 {
		t.Fatalf("v7.2.12: bisected %v, fixed %v", res.Bisected, res.Fixed)
	}
	testgit.Tag(t, f.up.dir, "v7.2.13", f.up.commit(t, 1250))
	if res := f.tick(t); len(res.Fixed) != 0 {
		t.Fatalf("v7.2.13 still regressed, but fixed %+v", res.Fixed[0])
	}
	return f, culprit
}

func (f *fixture) storedFixed(t *testing.T) *Fixed {
	t.Helper()
	evs, err := f.st.WatchEvents(f.w.ID)
	if err != nil || len(evs) == 0 {
		t.Fatalf("events %v %v", evs, err)
	}
	if len(evs[0].Fixed) == 0 {
		return nil
	}
	var fx Fixed
	if err := json.Unmarshal(evs[0].Fixed, &fx); err != nil {
		t.Fatal(err)
	}
	return &fx
}

// TestRegzbotFixedByRevert: a watch with regzbot on that reported a
// bisected regression re-tests a new tag where the metric is back within
// the noise of the tag before the regression: a revert of the culprit
// landed in between, so the reply to the culprit draft says
// "#regzbot fix: <revert>" (regzbot's documented command, the commit
// that fixed it) in a paragraph of its own, recorded on the event; a
// later tag, a re-run of the re-test and a restart say nothing again.
func TestRegzbotFixedByRevert(t *testing.T) {
	f, culprit := regzbotFixture(t)
	f.up.commit(t, 1250)
	revert := f.up.commitMsg(t, "Revert \"sys: slow getppid\"\n\nThis reverts commit "+culprit+".\n\nIt made getppid 25% slower.", 1000)
	testgit.Tag(t, f.up.dir, "v7.2.14", f.up.commitMsg(t, "sys: other work", 1002)) // +0.2%: under 0.5%
	res := f.tick(t)
	if len(res.Fixed) != 1 {
		t.Fatalf("v7.2.14: fixed %+v, want the regression of v7.2.11..v7.2.12", res.Fixed)
	}
	fx := res.Fixed[0]
	want := "#regzbot fix: " + revert[:12]
	if len(fx.Lines) != 1 || fx.Lines[0] != want || fx.Since != "v7.2.13" || fx.FixCommit != revert {
		t.Fatalf("fixed %+v, want %q", fx, want)
	}
	eml, err := os.ReadFile(fx.Draft)
	if err != nil {
		t.Fatal(err)
	}
	culpritEml, _ := os.ReadFile(filepath.Join(filepath.Dir(fx.Draft), "culprit.eml"))
	cid := header(string(culpritEml), "Message-ID")
	if cid == "" || header(string(eml), "In-Reply-To") != cid {
		t.Errorf("fixed.eml does not reply to culprit.eml (%s):\n%s", cid, eml)
	}
	if !strings.HasPrefix(header(string(eml), "Subject"), "Re: [bisected] sys: slow getppid") ||
		!strings.Contains(header(string(eml), "To"), "author@patcheval.invalid") {
		t.Errorf("fixed.eml headers:\n%s", eml)
	}
	if !strings.HasSuffix(string(eml), "\n\n"+want+"\n") || strings.Count(string(eml), "#regzbot") != 1 {
		t.Errorf("fixed.eml does not end with the command in a paragraph of its own:\n%s", eml)
	}
	txt, _ := os.ReadFile(fx.Report)
	if !strings.HasSuffix(string(txt), "(a paragraph of its own):\n\n"+want+"\n") {
		t.Errorf("fixed.txt:\n%s", txt)
	}
	if got := f.storedFixed(t); got == nil || got.Tag != "v7.2.14" || got.Lines[0] != want {
		t.Fatalf("stored %+v", got)
	}
	h, _ := Load(f.st, f.w)
	var show strings.Builder
	WriteText(&show, h)
	if !strings.Contains(show.String(), "    gone on v7.2.14 (regression, below ±0.5% against v7.2.11): "+want+"\n") {
		t.Errorf("watch show:\n%s", show.String())
	}
	// Once: re-testing v7.2.14 again and a later good tag say nothing.
	tags, _ := f.st.WatchTags(f.w.ID)
	for _, tg := range tags {
		if tg.Tag == "v7.2.14" {
			r, err := f.wr.Retest(context.Background(), f.w, tg)
			if err != nil || len(r.Fixed) != 0 {
				t.Fatalf("re-run of the re-test: fixed %v, %v", r.Fixed, err)
			}
		}
	}
	testgit.Tag(t, f.up.dir, "v7.2.15", f.up.commit(t, 1000))
	if res := f.tick(t); len(res.Fixed) != 0 {
		t.Fatalf("v7.2.15: said again: %+v", res.Fixed[0])
	}
}

// TestRegzbotResolvedWithoutFixCommit: the metric comes back on a tag
// with no commit that reverts or Fixes: the culprit: regzbot's
// "#regzbot resolve: <reason>" with the reason, exact.
func TestRegzbotResolvedWithoutFixCommit(t *testing.T) {
	f, _ := regzbotFixture(t)
	f.up.commitMsg(t, "sys: rework the syscall entry\n\nFixes: 0123456789ab (\"unrelated\")", 1000)
	tip := f.up.commit(t, 1000)
	testgit.Tag(t, f.up.dir, "v7.2.14", tip)
	res := f.tick(t)
	if len(res.Fixed) != 1 {
		t.Fatalf("v7.2.14: fixed %+v", res.Fixed)
	}
	pipeline, _ := filepath.Abs("testdata/retest-x86-getppid.toml")
	want := "#regzbot resolve: getppid ns/op back to v7.2.11's level on v7.2.14 (+0.0%, equivalent; patcheval " + pipeline +
		"), the fixing commit not identified"
	if fx := res.Fixed[0]; len(fx.Lines) != 1 || fx.Lines[0] != want || fx.FixCommit != "" {
		t.Fatalf("lines %q, want %q", fx.Lines, want)
	}
	eml, _ := os.ReadFile(res.Fixed[0].Draft)
	if !strings.HasSuffix(string(eml), "\n\n"+want+"\n") {
		t.Errorf("fixed.eml:\n%s", eml)
	}
}

// TestRegzbotFixedNeedsOptIn: the same history on a watch without
// regzbot records and writes nothing.
func TestRegzbotFixedNeedsOptIn(t *testing.T) {
	f, _ := regzbotFixture(t)
	f.w.Regzbot = false
	if err := f.st.UpdateWatch(*f.w); err != nil {
		t.Fatal(err)
	}
	testgit.Tag(t, f.up.dir, "v7.2.14", f.up.commit(t, 1000))
	if res := f.tick(t); len(res.Fixed) != 0 || f.storedFixed(t) != nil {
		t.Fatalf("fixed without the opt-in: %+v", res.Fixed)
	}
}

// TestFixedLinesGolden: the exact lines for a range (an ambiguous
// bisection: never a fix: commit) and for a better-than-before value.
func TestFixedLinesGolden(t *testing.T) {
	ev := &store.WatchEvent{From: "v7.2.11", To: "v7.2.12", Variant: "base", Benchmark: "kill", Metric: "ns/op", Change: 15}
	for _, c := range []struct {
		f    Fixed
		want string
	}{
		{Fixed{Tag: "v7.2.14", Verdict: "improvement", Change: -3.25}, "#regzbot resolve: kill ns/op back to v7.2.11's level on v7.2.14 (-3.2%, better; patcheval ppc-preempt-dynamic), the fixing commit not identified"},
		{Fixed{Tag: "v7.2.14", Verdict: "regression", Change: 0.3}, "#regzbot resolve: kill ns/op back to v7.2.11's level on v7.2.14 (+0.3%, within the threshold; patcheval ppc-preempt-dynamic), the fixing commit not identified"},
		{Fixed{Tag: "v7.2.14", FixCommit: "0123456789abcdef0123456789abcdef01234567"}, "#regzbot fix: 0123456789ab"},
	} {
		if got := FixedLines(&c.f, ev, "ppc-preempt-dynamic"); len(got) != 1 || got[0] != c.want {
			t.Errorf("%+v: %q, want %q", c.f, got, c.want)
		}
	}
}

// header is header k of a mail, decoded.
func header(eml, k string) string {
	m, err := mail.ReadMessage(strings.NewReader(eml))
	if err != nil {
		return ""
	}
	v, err := new(mime.WordDecoder).DecodeHeader(m.Header.Get(k))
	if err != nil {
		return ""
	}
	return v
}
