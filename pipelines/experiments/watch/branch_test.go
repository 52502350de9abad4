package watch

import (
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/patcheval/patcheval/internal/fail"
	"github.com/patcheval/patcheval/internal/testgit"
	"github.com/patcheval/patcheval/pipelines/store"
)

// TestBranchHeadRetestedWhenItMoves: with --branch the watch re-tests
// the branch head whenever it moves (besides the tags), from the real
// remote on loopback; heads the branch moved past between two ticks are
// not built, and consecutive heads are compared like tags.
func TestBranchHeadRetestedWhenItMoves(t *testing.T) {
	f := newFixture(t)
	f.w.Branch = "master"
	if err := Validate(f.w, nil); err != nil {
		t.Fatal(err)
	}
	if err := f.st.UpdateWatch(*f.w); err != nil {
		t.Fatal(err)
	}
	setHead := func(c string) {
		testgit.Git(t, nil, nil, "--git-dir="+f.up.dir, "update-ref", "refs/heads/master", c)
	}
	testgit.Tag(t, f.up.dir, "v6.2-rc1", f.up.commit(t, 100))
	c1 := f.up.commit(t, 100)
	setHead(c1)

	res := f.tick(t)
	h1 := HeadEntry("master", c1)
	if !slices.Equal(res.New, []string{"v6.2-rc1", h1}) || !slices.Equal(res.Evaluated, []string{"v6.2-rc1", h1}) {
		t.Fatalf("first tick: new %v evaluated %v, want the tag and the head %s", res.New, res.Evaluated, h1)
	}
	if res := f.tick(t); len(res.New)+len(res.Evaluated) != 0 {
		t.Fatalf("the head did not move, yet: %+v", res)
	}

	// The head moves twice between ticks; the second move makes the
	// benchmark 30% slower.
	c2 := f.up.commit(t, 100)
	setHead(c2)
	c3 := f.up.commit(t, 130)
	setHead(c3)
	res = f.tick(t)
	h3 := HeadEntry("master", c3)
	if !slices.Equal(res.Evaluated, []string{h3}) {
		t.Fatalf("evaluated %v, want only the current head %s", res.Evaluated, h3)
	}
	if len(res.Events) != 1 || res.Events[0].From != h1 || res.Events[0].To != h3 || res.Events[0].Verdict != "regression" {
		t.Fatalf("events %+v, want one regression %s..%s", res.Events, h1, h3)
	}
	if !slices.Equal(f.ev.calls, []string{"v6.2-rc1", h1, h3}) {
		t.Fatalf("evaluations %v", f.ev.calls)
	}
	h, err := Load(f.st, f.w)
	if err != nil {
		t.Fatal(err)
	}
	var order []string
	for _, e := range h.Tags {
		order = append(order, e.Tag)
	}
	if !slices.Equal(order, []string{"v6.2-rc1", h1, h3}) {
		t.Fatalf("history %v: tags by version, then heads in the order seen", order)
	}

	// The branch moved on between listing and fetching: the listed head
	// is still what is evaluated.
	c4 := f.up.commit(t, 130)
	setHead(c4)
	got, err := FetchHead(context.Background(), f.w.Tree, f.w.Remote, "master", "refs/patcheval/test", c3)
	if err != nil || got != c3 {
		t.Fatalf("FetchHead with the branch moved on = %s, %v; want %s", got, err, c3)
	}

	// A branch the remote does not have is an input error on the watch.
	f.w.Branch = "no-such-branch"
	_, err = f.wr.Tick(context.Background(), f.w)
	if err == nil || fail.KindOf(err) != fail.KindInput || !strings.Contains(err.Error(), "no-such-branch") {
		t.Fatalf("tick of a missing branch: %v", err)
	}
	w, _ := f.st.FindWatch(f.w.Name)
	if !strings.Contains(w.LastError, "no-such-branch") {
		t.Fatalf("the watch does not show why: %+v", w)
	}
}

// TestBranchOnlyWatchAndBadBranches: a watch may follow a branch alone
// (no tag glob); a bad branch name is refused naming it.
func TestBranchOnlyWatchAndBadBranches(t *testing.T) {
	tree := t.TempDir()
	ok := store.Watch{Name: "next", Remote: "https://example.invalid/linux.git", Branch: "for-next/core", Pipeline: "p", Tree: tree}
	if err := Validate(&ok, nil); err != nil {
		t.Fatalf("branch-only watch: %v", err)
	}
	none := store.Watch{Name: "none", Remote: ok.Remote, Pipeline: "p", Tree: tree}
	if err := Validate(&none, nil); err == nil || !strings.Contains(err.Error(), "tag pattern is empty") {
		t.Fatalf("neither tags nor branch: %v", err)
	}
	for _, b := range []string{"refs/heads/master", "a..b", "x y", "-x", "master.lock"} {
		w := ok
		w.Branch = b
		if err := Validate(&w, nil); err == nil || !strings.Contains(err.Error(), "branch \""+b+"\"") {
			t.Errorf("branch %q: %v", b, err)
		}
	}
	w := &store.Watch{Branch: "master"}
	for entry, want := range map[string]bool{"master@0123456789ab": true, "master@0123456789": false,
		"v6.2-rc1": false, "master@0123456789aZ": false, "main@0123456789ab": false} {
		if IsHeadEntry(w, entry) != want {
			t.Errorf("IsHeadEntry(%q) = %v", entry, !want)
		}
	}
}
