package gittree_test

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/patcheval/patcheval/internal/gittree"
	"github.com/patcheval/patcheval/internal/gittree/gittest"
)

// An exclusive lock excludes a second one (the wait ends with the context
// and says so) but not after release; shared locks coexist.
func TestLockFile(t *testing.T) {
	p := filepath.Join(t.TempDir(), "sub", "x.lock")
	un, err := gittree.LockFile(context.Background(), p, syscall.LOCK_EX, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	waited := false
	_, err = gittree.LockFile(ctx, p, syscall.LOCK_SH, func() { waited = true })
	if !errors.Is(err, gittree.ErrWaitInterrupted) || !errors.Is(err, context.Canceled) || !waited {
		t.Fatalf("second lock while the first is held: %v (waiting called: %v)", err, waited)
	}
	un()
	s1, err := gittree.LockFile(context.Background(), p, syscall.LOCK_SH, nil)
	if err != nil {
		t.Fatal(err)
	}
	s2, err := gittree.LockFile(ctx, p, syscall.LOCK_SH, nil)
	if err != nil {
		t.Fatalf("two shared locks: %v", err)
	}
	s1()
	s2()
}

// Resolve names the tree and the revision; CheckedOut follows Checkout.
func TestResolveAndCheckedOut(t *testing.T) {
	repo := gittest.NewRepo(t, map[string]string{"a.c": "a\n"})
	c, err := gittree.Resolve(repo, "base")
	if err != nil || c.Message != "base\n" {
		t.Fatalf("Resolve(base) = %v, %v", c, err)
	}
	if _, err := gittree.Resolve(repo, "nosuch"); err == nil || !strings.Contains(err.Error(), repo) || !strings.Contains(err.Error(), `"nosuch"`) {
		t.Errorf("Resolve(nosuch): %v", err)
	}
	if _, err := gittree.Resolve(t.TempDir(), "HEAD"); err == nil {
		t.Error("Resolve in a plain directory succeeded")
	}
	dir := filepath.Join(t.TempDir(), "co")
	if got := gittree.CheckedOut(dir); got != "" {
		t.Errorf("CheckedOut(empty) = %q", got)
	}
	if _, err := gittree.Checkout(context.Background(), repo, "base", dir); err != nil {
		t.Fatal(err)
	}
	if got := gittree.CheckedOut(dir); got != c.Hash.String() {
		t.Errorf("CheckedOut = %q, want %s", got, c.Hash)
	}
}
