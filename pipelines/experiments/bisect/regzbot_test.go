package bisect

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/patcheval/patcheval/internal/testgit"
	"github.com/patcheval/patcheval/mbox"
)

// TestRegzbotLines: with Context.Regzbot, the culprit draft ends with
// regzbot's commands in a paragraph of their own, exactly as regzbot's
// reference documents them; a bisection that could not name a commit
// gives the range; without the opt-in, no line mentions regzbot.
func TestRegzbotLines(t *testing.T) {
	repo := testgit.InitBare(t, filepath.Join(t.TempDir(), "r.git"))
	good := testgit.Commit(t, repo, "", "base", "2026-11-02T09:00:00Z", map[string]string{"bench/getppid": "1000\n", "kernel/sys.c": "/* sys */\n"})
	bad := testgit.Commit(t, repo, good, "sys: slow getppid", "2026-11-02T10:01:00Z",
		map[string]string{"kernel/sys.c": "/* slow */\n", "bench/getppid": "1250\n"})
	res, err := Run(context.Background(), Options{Repo: repo, Good: good, Bad: bad, Measurer: &treeMeasurer{repo: repo, built: map[string]bool{}},
		Benchmark: "getppid", Metric: "ns/op", Deterministic: true})
	if err != nil || res.Culprit == nil {
		t.Fatalf("bisect: %+v %v", res, err)
	}
	res.GoodRef, res.BadRef = "v7.2.11", "v7.2.12"
	c := Context{Pipeline: "x86-getppid", Arch: "x86_64", Regzbot: true}
	from := mbox.Address{Name: "Tester", Email: "tester@example.org"}
	d, err := Draft(res, c, from, time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC))
	if err != nil {
		t.Fatal(err)
	}
	want := "\n\n#regzbot introduced: " + bad[:12] + "\n#regzbot title: getppid ns/op +25.0% regression (x86_64, patcheval x86-getppid)\n"
	if !strings.HasSuffix(d.Body, want) {
		t.Errorf("draft body does not end with\n%q\n---\n%s", want, d.Body)
	}
	if n := strings.Count(d.Body, "#regzbot"); n != 2 {
		t.Errorf("draft has %d regzbot commands, want 2:\n%s", n, d.Body)
	}
	// No opt-in: nothing.
	plain, _ := Draft(res, Context{Pipeline: "x86-getppid", Arch: "x86_64"}, from, time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC))
	var txt strings.Builder
	WriteText(&txt, res, Context{Pipeline: "x86-getppid"})
	if strings.Contains(plain.Body, "regzbot") || strings.Contains(txt.String(), "regzbot") {
		t.Errorf("regzbot lines without the opt-in")
	}
	// No single culprit: the refs bisected, in the text report.
	amb := *res
	amb.Status, amb.Culprit, amb.Parent = Ambiguous, nil, nil
	got := RegzbotLines(&amb, c)
	if strings.Join(got, "\n") != "#regzbot introduced: v7.2.11..v7.2.12\n#regzbot title: getppid ns/op +25.0% regression (x86_64, patcheval x86-getppid)" {
		t.Errorf("range: %q", got)
	}
	txt.Reset()
	WriteText(&txt, &amb, c)
	if !strings.Contains(txt.String(), "\n\n#regzbot introduced: v7.2.11..v7.2.12\n#regzbot title: ") {
		t.Errorf("text report of an ambiguous bisection:\n%s", txt.String())
	}
	amb.GoodRef = ""
	if got := RegzbotLines(&amb, c); got[0] != "#regzbot introduced: "+good[:12]+".."+bad[:12] {
		t.Errorf("range without refs: %q", got)
	}
}
