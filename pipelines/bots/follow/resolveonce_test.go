package follow

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/patcheval/patcheval/internal/testgit"
	"github.com/patcheval/patcheval/pipelines/runner"
	"github.com/patcheval/patcheval/pipelines/store"
	"github.com/patcheval/patcheval/series"
)

// TestSubmitResolvesOnce: the follower resolves a complete series it
// submits through the service once (issue 33): ServiceSubmitter resolves
// it as the evaluation stores it (runner.Resolve of the thread Submit
// stores), the follower filters that series and Submit stores it
// without resolving the thread again (decide's series.Resolve and
// Submit's: 2 before; the poll's grouping of the touched threads is not
// the evaluation's and is not counted). The series stored is the one
// Submit stores from the thread alone, byte for byte, and the evaluation
// is the same one.
func TestSubmitResolvesOnce(t *testing.T) {
	var _ ResolvingSubmitter = ServiceSubmitter{}
	root := t.TempDir()
	srv := testgit.Serve(t, root)
	tree := filepath.Join(root, "tree")
	env := []string{"GIT_AUTHOR_NAME=a", "GIT_AUTHOR_EMAIL=a@example.org", "GIT_COMMITTER_NAME=a", "GIT_COMMITTER_EMAIL=a@example.org"}
	testgit.Git(t, nil, nil, "init", "-q", "-b", "master", tree)
	os.MkdirAll(filepath.Join(tree, "mm"), 0o755)
	os.WriteFile(filepath.Join(tree, "mm/slab.c"), []byte("line\n"), 0o644)
	testgit.Git(t, env, nil, "-C", tree, "add", ".")
	testgit.Git(t, env, nil, "-C", tree, "commit", "-q", "-m", "base")
	g := &gen{t0: time.Now()}
	e0 := newEpoch(t, root, 0)
	for _, m := range g.series("rrr", "Ron <ron@example.org>", "mm: resolved once", 1, 2, []string{"mm/slab.c"}, "") {
		e0.add("m", m)
	}
	st, err := store.Open(filepath.Join(root, "db"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	l := List{Name: "list", URL: srv.URL() + "/list", Pipeline: "ppc-preempt-dynamic", Tree: tree, Base: "tree",
		IncompleteAfter: time.Hour, Since: time.Now().Add(-time.Hour)}
	f := &Follower{Store: st, Lists: []List{l}, Submit: ServiceSubmitter{Service: runnerService{st}}, Dir: filepath.Join(root, "mirrors")}
	var submitted *series.Series
	f.Submitted = func(_ List, s *series.Series, _ int64) error { submitted = s; return nil }
	count, restore := runner.CountResolutions()
	defer restore()
	if err := f.Poll(context.Background()); err != nil {
		t.Fatal(err)
	}
	if n := count(); n != 1 {
		t.Errorf("the follower and Submit resolved the series %d times, want once", n)
	}
	fs := seriesBy(t, st)["rrr v1"]
	if fs == nil || fs.Status != store.SeriesSubmitted || submitted == nil || submitted.Title != "mm: resolved once" {
		t.Fatalf("series: %+v, submitted %+v", fs, submitted)
	}
	got, err := st.ResolvedSeries(fs.EvaluationID)
	if err != nil {
		t.Fatal(err)
	}
	// The series filtered and submitted is the one stored: its messages
	// are those of the thread Submit stores (its sources name that
	// thread's lines), not the follower's own (named after the list).
	if src := submitted.First().Source; !strings.Contains(src, ":") || !bytes.Contains(got, []byte(`"source":"`+src+`"`)) {
		t.Errorf("the series submitted (first message from %q) is not the one stored", src)
	}

	// The same series submitted with only its thread, as Submit did it.
	th, err := threadOf(st, l, fs.Root)
	if err != nil {
		t.Fatal(err)
	}
	other, err := store.Open(filepath.Join(root, "db2"))
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	id, err := ServiceSubmitter{Service: runnerService{other}}.Submit(context.Background(), l, submitted, th)
	if err != nil {
		t.Fatal(err)
	}
	want, err := other.ResolvedSeries(id)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) == 0 || !bytes.Equal(got, want) {
		t.Errorf("the series stored (%d bytes) is not the one Submit stores from the thread (%d bytes):\n%.400s\nvs\n%.400s", len(got), len(want), got, want)
	}
	a, _ := st.Evaluation(fs.EvaluationID)
	b, _ := other.Evaluation(id)
	if a == nil || b == nil || a.Key != b.Key {
		t.Errorf("evaluation %+v, from the thread alone %+v", a, b)
	}
}
