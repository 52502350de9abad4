package gittree_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/patcheval/patcheval/internal/fail"
	"github.com/patcheval/patcheval/internal/gittree"
	"github.com/patcheval/patcheval/internal/gittree/gittest"
)

func TestCheckoutSmall(t *testing.T) {
	repo := gittest.NewRepo(t, map[string]string{
		"README":           "hello\n",
		"scripts/run.sh":   "100755:#!/bin/sh\necho hi\n",
		"include/link.h":   "120000:../README",
		"drivers/a/b/c.c":  "int c;\n",
		"drivers/a/keep.c": "int keep;\n",
		"old/gone.c":       "gone\n",
		"turns/dir":        "a file that becomes a directory\n",
	})
	ctx := context.Background()
	dir := filepath.Join(t.TempDir(), "co")
	st, err := gittree.Checkout(ctx, repo, "base", dir)
	if err != nil {
		t.Fatal(err)
	}
	if !st.Fresh || st.Written != 7 {
		t.Errorf("fresh checkout stats = %+v, want fresh with 7 files", st)
	}
	if d := gittest.DiffLists(gittest.LsTree(t, filepath.Join(repo, ".git"), "base"), gittest.DirListing(t, dir)); d != "" {
		t.Fatalf("fresh checkout differs from git ls-tree:\n%s", d)
	}

	// Second commit: modify, delete a directory, file -> dir, mode change,
	// symlink retarget, new file.
	os.RemoveAll(filepath.Join(repo, "old"))
	os.Remove(filepath.Join(repo, "turns/dir"))
	gittest.WriteFiles(t, repo, map[string]string{
		"drivers/a/b/c.c": "int c = 1;\n",
		"turns/dir/x.c":   "x\n",
		"include/link.h":  "120000:../scripts/run.sh",
		"new.c":           "new\n",
	})
	os.Chmod(filepath.Join(repo, "scripts/run.sh"), 0o644)
	gittest.Run(t, repo, "add", "-A")
	gittest.Run(t, repo, "commit", "-q", "-m", "second")

	keep := filepath.Join(dir, "drivers/a/keep.c")
	old := time.Now().Add(-time.Hour).Truncate(time.Second)
	os.Chtimes(keep, old, old)
	// An untracked build output stays.
	os.WriteFile(filepath.Join(dir, "drivers/a/b/c.o"), []byte("obj"), 0o644)

	st, err = gittree.Checkout(ctx, repo, "HEAD", dir)
	if err != nil {
		t.Fatal(err)
	}
	if st.Fresh || st.Written != 4 || st.Removed != 2 || st.ModeChanged != 1 {
		t.Errorf("incremental stats = %+v, want 4 written, 2 removed, 1 mode change", st)
	}
	got := gittest.DirListing(t, dir)
	want := append(gittest.LsTree(t, filepath.Join(repo, ".git"), "HEAD"), "100644 e8f8c3a4c44cf1a6b3d3fcbc24ba5b0d7b2b1d39 drivers/a/b/c.o")
	got = filterOut(got, "drivers/a/b/c.o")
	want = filterOut(want, "drivers/a/b/c.o")
	if d := gittest.DiffLists(want, got); d != "" {
		t.Fatalf("incremental checkout differs from git ls-tree:\n%s\npaths: %v", d, st.Paths)
	}
	if _, err := os.Stat(filepath.Join(dir, "drivers/a/b/c.o")); err != nil {
		t.Errorf("untracked build output was removed: %v", err)
	}
	if fi, _ := os.Stat(keep); !fi.ModTime().Equal(old) {
		t.Errorf("unchanged file rewritten: mtime %v, want %v", fi.ModTime(), old)
	}

	// Same commit again: nothing to do.
	st, err = gittree.Checkout(ctx, repo, "HEAD", dir)
	if err != nil {
		t.Fatal(err)
	}
	if st.Written+st.Removed+st.ModeChanged != 0 {
		t.Errorf("re-checkout of the same commit did work: %+v", st)
	}
	// And back to the first commit.
	if _, err := gittree.Checkout(ctx, repo, "base", dir); err != nil {
		t.Fatal(err)
	}
	if d := gittest.DiffLists(gittest.LsTree(t, filepath.Join(repo, ".git"), "base"), filterOut(gittest.DirListing(t, dir), "drivers/a/b/c.o")); d != "" {
		t.Fatalf("checkout back to base differs:\n%s", d)
	}
}

func filterOut(ls []string, path string) []string {
	var out []string
	for _, l := range ls {
		if !strings.HasSuffix(l, " "+path) {
			out = append(out, l)
		}
	}
	return out
}

func TestCheckoutRefusesForeignDir(t *testing.T) {
	repo := gittest.NewRepo(t, map[string]string{"a": "a\n"})
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "precious"), []byte("x"), 0o644)
	_, err := gittree.Checkout(context.Background(), repo, "base", dir)
	if err == nil || fail.KindOf(err) != fail.KindInput || !strings.Contains(err.Error(), "not empty") {
		t.Fatalf("checkout into a non-empty foreign dir: err = %v, want bad input 'not empty'", err)
	}
	_, err = gittree.Checkout(context.Background(), repo, "nosuchref", filepath.Join(dir, "x"))
	if err == nil || fail.KindOf(err) != fail.KindInput || !strings.Contains(err.Error(), `"nosuchref"`) {
		t.Fatalf("checkout of an unknown revision: err = %v", err)
	}
	// A checkout of another repository is refused.
	other := gittest.NewRepo(t, map[string]string{"b": "b\n"})
	co := filepath.Join(dir, "co")
	if _, err := gittree.Checkout(context.Background(), other, "base", co); err != nil {
		t.Fatal(err)
	}
	_, err = gittree.Checkout(context.Background(), repo, "base", co)
	if err == nil || !strings.Contains(err.Error(), "another repository") {
		t.Fatalf("checkout over another repository's checkout: err = %v", err)
	}
}

func TestCheckoutResumesInterrupted(t *testing.T) {
	repo := gittest.NewRepo(t, map[string]string{"a.c": "a\n", "b/b.c": "b\n", "c.c": "c\n"})
	gittest.WriteFiles(t, repo, map[string]string{"a.c": "a2\n", "b/b.c": "b2\n", "d.c": "d\n"})
	os.Remove(filepath.Join(repo, "c.c"))
	gittest.Run(t, repo, "add", "-A")
	gittest.Run(t, repo, "commit", "-q", "-m", "second")
	ctx := context.Background()
	dir := filepath.Join(t.TempDir(), "co")
	if _, err := gittree.Checkout(ctx, repo, "base", dir); err != nil {
		t.Fatal(err)
	}
	// Simulate an update to HEAD killed after writing a.c only.
	s, err := gittree.ReadState(dir)
	if err != nil {
		t.Fatal(err)
	}
	s.PendingCommit = strings.TrimSpace(gittest.Run(t, repo, "rev-parse", "HEAD"))
	s.PendingTree = strings.TrimSpace(gittest.Run(t, repo, "rev-parse", "HEAD^{tree}"))
	if err := gittree.WriteState(dir, s); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(dir, "a.c"), []byte("a2\n"), 0o644)
	// Back to base: the half-done update is finished first, then undone.
	if _, err := gittree.Checkout(ctx, repo, "base", dir); err != nil {
		t.Fatal(err)
	}
	if d := gittest.DiffLists(gittest.LsTree(t, filepath.Join(repo, ".git"), "base"), gittest.DirListing(t, dir)); d != "" {
		t.Fatalf("after an interrupted update, checkout of base differs:\n%s", d)
	}
	// An interrupted fresh checkout is redone.
	dir2 := filepath.Join(t.TempDir(), "co2")
	os.MkdirAll(filepath.Join(dir2, "b"), 0o755)
	os.WriteFile(filepath.Join(dir2, "b/b.c"), []byte("partial"), 0o644)
	gittree.WriteState(dir2, &gittree.CheckoutState{PendingCommit: "x", PendingTree: strings.TrimSpace(gittest.Run(t, repo, "rev-parse", "HEAD^{tree}"))})
	if _, err := gittree.Checkout(ctx, repo, "HEAD", dir2); err != nil {
		t.Fatal(err)
	}
	if d := gittest.DiffLists(gittest.LsTree(t, filepath.Join(repo, ".git"), "HEAD"), gittest.DirListing(t, dir2)); d != "" {
		t.Fatalf("interrupted fresh checkout not redone:\n%s", d)
	}
}

func TestLinkCloneThenUpdateLeavesTheSeed(t *testing.T) {
	repo := gittest.NewRepo(t, map[string]string{
		"README":          "hello\n",
		"scripts/run.sh":  "100755:#!/bin/sh\necho hi\n",
		"include/link.h":  "120000:../README",
		"drivers/a/b/c.c": "int c;\n",
		"old/gone.c":      "gone\n",
	})
	ctx := context.Background()
	root := t.TempDir()
	seed, clone := filepath.Join(root, "seed"), filepath.Join(root, "clone")
	if _, err := gittree.Checkout(ctx, repo, "base", seed); err != nil {
		t.Fatal(err)
	}
	base := gittest.LsTree(t, filepath.Join(repo, ".git"), "base")

	st, err := gittree.LinkClone(ctx, seed, clone)
	if err != nil {
		t.Fatal(err)
	}
	if !st.Fresh || st.Written != 5 {
		t.Errorf("clone stats %+v, want 5 entries", st)
	}
	if d := gittest.DiffLists(base, gittest.DirListing(t, clone)); d != "" {
		t.Fatalf("clone differs from the commit:\n%s", d)
	}

	// The clone moves on (content change, mode flip, delete, new file);
	// the seed must still be the base commit, modes included.
	os.RemoveAll(filepath.Join(repo, "old"))
	gittest.WriteFiles(t, repo, map[string]string{"drivers/a/b/c.c": "int c = 1;\n", "new.c": "new\n"})
	os.Chmod(filepath.Join(repo, "scripts/run.sh"), 0o644)
	gittest.Run(t, repo, "add", "-A")
	gittest.Run(t, repo, "commit", "-q", "-m", "second")
	st, err = gittree.Checkout(ctx, repo, "HEAD", clone)
	if err != nil {
		t.Fatal(err)
	}
	if st.Fresh || st.Previous == "" || st.ModeChanged != 1 {
		t.Errorf("update of the clone: %+v, want incremental with one mode change", st)
	}
	if d := gittest.DiffLists(gittest.LsTree(t, filepath.Join(repo, ".git"), "HEAD"), gittest.DirListing(t, clone)); d != "" {
		t.Fatalf("updated clone differs from HEAD:\n%s", d)
	}
	if d := gittest.DiffLists(base, gittest.DirListing(t, seed)); d != "" {
		t.Fatalf("updating the clone changed the seed:\n%s", d)
	}

	// Not into a non-empty directory; not from something that is not a
	// finished checkout.
	if _, err := gittree.LinkClone(ctx, seed, clone); err == nil {
		t.Error("gittree.LinkClone into a checkout succeeded")
	}
	if _, err := gittree.LinkClone(ctx, filepath.Join(repo, "drivers"), filepath.Join(root, "x")); err == nil {
		t.Error("gittree.LinkClone from a plain directory succeeded")
	}
}
