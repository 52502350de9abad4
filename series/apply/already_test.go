package apply

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/patcheval/patcheval/internal/fail"
)

// TestApplyAlreadyInBase: a patch the base already has is not a failure
// to apply. Alone it is an AlreadyError (bad input) that says so and
// points to the revert experiment; beside a patch that applies it is
// skipped with a note and the other is applied. A patch that neither
// applies nor reverses is still a Failure.
func TestApplyAlreadyInBase(t *testing.T) {
	repo := newRepo(t, map[string]string{"kernel/rcu/tree.c": numbered(30), "lib/x.c": numbered(10)})
	fix := diffOf(t, repo, "base", "rcu: report the quiescent state", map[string]string{
		"kernel/rcu/tree.c": strings.Replace(numbered(30), "line 12\n", "line 12\nline 12a\n", 1)})
	// The base moves on with the fix merged, tagged like a release.
	writeFiles(t, repo, map[string]string{"kernel/rcu/tree.c": strings.Replace(numbered(30), "line 12\n", "line 12\nline 12a\n", 1)})
	gitRun(t, repo, "commit", "-q", "-am", "the fix, merged")
	gitRun(t, repo, "tag", "v7.2.13")

	opt := pinned("test/already")
	opt.Base = "v7.2.13"
	_, err := Apply(context.Background(), repo, []Commit{fix}, opt)
	var ae *AlreadyError
	if !errors.As(err, &ae) || fail.KindOf(err) != fail.KindInput {
		t.Fatalf("Apply: %v (%T), want an AlreadyError", err, err)
	}
	want := "1/1 is already in v7.2.13: the reverse applies cleanly (rcu: report the quiescent state); nothing to apply: " +
		"to measure it on this base, pass --revert-if-merged (lore --pipeline, submit; the API's revert_if_merged: this base against this base with the series reverted), or pick a base before it with --base"
	if err.Error() != want {
		t.Errorf("error\n%s\nwant\n%s", err, want)
	}
	// InBase finds the same, writing nothing.
	if ib, err := InBase(context.Background(), repo, "v7.2.13", []Commit{fix}); err != nil || ib == nil || ib.Error() != want {
		t.Errorf("InBase: %v %v", ib, err)
	}
	if ib, err := InBase(context.Background(), repo, "base", []Commit{fix}); err != nil || ib != nil {
		t.Errorf("InBase before the fix: %v %v, want nil (it applies)", ib, err)
	}
	// Named by its tag also without --base.
	gitRun(t, repo, "checkout", "-q", "v7.2.13")
	if _, err := Apply(context.Background(), repo, []Commit{fix}, pinned("test/already-head")); err == nil || !strings.Contains(err.Error(), "already in v7.2.13") {
		t.Errorf("without --base: %v", err)
	}

	other := diffOf(t, repo, "base", "lib: tidy", map[string]string{"lib/x.c": strings.Replace(numbered(10), "line 3\n", "line three\n", 1)})
	other.Label = "2/2 lib: tidy"
	fix.Label = "1/2 rcu: report the quiescent state"
	res, err := Apply(context.Background(), repo, []Commit{fix, other}, opt)
	if err != nil {
		t.Fatalf("Apply of 2: %v", err)
	}
	if len(res.Commits) != 1 || res.Commits[0].Label != "2/2 lib: tidy" || len(res.Already) != 1 || res.Already[0].Patch != 1 ||
		!strings.Contains(strings.Join(res.Notes, "\n"), "1/2 is already in v7.2.13: the reverse applies cleanly") {
		t.Errorf("result %+v", res)
	}

	// Neither applies nor reverses: a failure to apply, as before.
	bad := diffOf(t, repo, "base", "rcu: something else", map[string]string{
		"kernel/rcu/tree.c": strings.Replace(numbered(30), "line 12\n", "line twelve\n", 1)})
	writeFiles(t, repo, map[string]string{"kernel/rcu/tree.c": strings.Replace(numbered(30), "line 12\n", "line 12b\n", 1)})
	gitRun(t, repo, "commit", "-q", "-am", "conflicting change")
	gitRun(t, repo, "tag", "conflict")
	opt.Base = "conflict"
	_, err = Apply(context.Background(), repo, []Commit{bad}, opt)
	var f *Failure
	if !errors.As(err, &f) || errors.As(err, &ae) {
		t.Errorf("conflicting patch: %v (%T), want a Failure", err, err)
	}
}

// TestApplyAlreadyInHistory: a patch merged and then changed by a later
// commit neither applies nor reverses on the base, but the commit that
// merged it (with other whitespace and other surroundings) is in the
// base's history: it is recognised by patch-id, not called a failure to
// apply. A patch dated after that commit is not looked for before it.
func TestApplyAlreadyInHistory(t *testing.T) {
	orig := numbered(30)
	repo := newRepo(t, map[string]string{"kernel/rcu/tree.c": orig, "lib/x.c": numbered(10)})
	fix := diffOf(t, repo, "base", "rcu: report the quiescent state", map[string]string{
		"kernel/rcu/tree.c": strings.Replace(orig, "line 12\n", "line 12\n\tline 12a\n", 1)})
	// Merged onto other surroundings, with other whitespace ...
	moved := strings.Replace(orig, "line 2\n", "line 2\nline 2b\n", 1)
	writeFiles(t, repo, map[string]string{"kernel/rcu/tree.c": moved})
	gitRun(t, repo, "commit", "-q", "-am", "rcu: unrelated")
	merged := strings.Replace(moved, "line 12\n", "line 12\n    line 12a\n", 1)
	writeFiles(t, repo, map[string]string{"kernel/rcu/tree.c": merged})
	gitRun(t, repo, "commit", "-q", "-am", "rcu: report the quiescent state (merged)")
	mergedHash := strings.TrimSpace(gitRun(t, repo, "rev-parse", "HEAD"))
	// ... then its surroundings changed: neither the patch nor its
	// reverse applies any more.
	later := strings.Replace(strings.Replace(merged, "line 11\n", "line eleven\n", 1), "line 13\n", "line thirteen\n", 1)
	writeFiles(t, repo, map[string]string{"kernel/rcu/tree.c": later, "lib/x.c": numbered(11)})
	gitRun(t, repo, "commit", "-q", "-am", "rcu: rename lines")
	gitRun(t, repo, "tag", "v7.2.13")

	opt := pinned("test/history")
	opt.Base = "v7.2.13"
	_, err := Apply(context.Background(), repo, []Commit{fix}, opt)
	var ae *AlreadyError
	if !errors.As(err, &ae) || fail.KindOf(err) != fail.KindInput {
		t.Fatalf("Apply: %v (%T), want an AlreadyError", err, err)
	}
	want := "1/1 is already in v7.2.13: commit " + mergedHash[:12] +
		" in its history has the same patch-id (rcu: report the quiescent state (merged)) (rcu: report the quiescent state)"
	if !strings.HasPrefix(err.Error(), want) {
		t.Errorf("error\n%s\nwant it to start with\n%s", err, want)
	}

	// Written after every commit of the history: not looked for there.
	fix.AuthorDate = time.Date(2026, 6, 1, 0, 0, 0, 0, time.UTC)
	_, err = Apply(context.Background(), repo, []Commit{fix}, opt)
	var f *Failure
	if !errors.As(err, &f) || errors.As(err, &ae) {
		t.Errorf("patch dated after the history: %v (%T), want a Failure", err, err)
	}
}
