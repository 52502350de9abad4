package gittree_test

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

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
	// Resolve closed its storage: reading the tree says so, rather than
	// "object not found" (which sent CI after a missing object).
	if _, err := c.Tree(); err == nil || !strings.Contains(err.Error(), "storage is closed") {
		t.Errorf("tree of a commit from Resolve: %v, want the closed-storage error", err)
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

// A checkout waiting for another process's lock on its directory gives up
// when its context ends, saying so (it used to wait in flock(2) forever,
// deaf to SIGINT); once the lock is free it checks out.
func TestCheckoutWaitEndsWithTheContext(t *testing.T) {
	repo := gittest.NewRepo(t, map[string]string{"a.c": "a\n"})
	dir := t.TempDir()
	release, err := gittree.LockFile(context.Background(), filepath.Join(dir, gittree.LockName), syscall.LOCK_EX, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	done := make(chan error, 1)
	go func() {
		_, err := gittree.Checkout(ctx, repo, "base", dir)
		done <- err
	}()
	select {
	case err := <-done:
		if !errors.Is(err, gittree.ErrWaitInterrupted) || !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("checkout of a locked dir: %v, want the wait interrupted by the deadline", err)
		}
	case <-time.After(10 * time.Second):
		release()
		<-done
		t.Fatal("checkout of a locked dir did not give up when its context ended")
	}
	release()
	if _, err := gittree.Checkout(context.Background(), repo, "base", dir); err != nil {
		t.Fatalf("checkout after release: %v", err)
	}
}
