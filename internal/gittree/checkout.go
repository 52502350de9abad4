package gittree

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/filemode"
	"github.com/go-git/go-git/v5/plumbing/object"

	"github.com/patcheval/patcheval/internal/fail"
)

// StateFile is the file inside a checkout directory that records which
// commit the directory holds. It is not part of any tree.
const StateFile = ".patcheval-checkout"

// CheckedOut returns the commit a finished Checkout or LinkClone left in
// dir, or "" (no checkout there, or one interrupted midway).
func CheckedOut(dir string) string {
	s, err := readState(dir)
	if err != nil || s == nil || s.PendingTree != "" {
		return ""
	}
	return s.Commit
}

// LockName is the lock file (in the checkout directory) that serialises
// checkouts into it.
const LockName = StateFile + ".lock"

// CheckoutStats says what Checkout did.
type CheckoutStats struct {
	Commit string `json:"commit"`
	Tree   string `json:"tree"`
	// Previous is the commit the directory held before ("" for a fresh
	// checkout).
	Previous string `json:"previous,omitempty"`
	Fresh    bool   `json:"fresh"`
	// Written counts files (and symlinks) written, Removed the paths
	// removed (a removed directory counts once), ModeChanged the files
	// whose exec bit was flipped in place.
	Written     int `json:"written"`
	Removed     int `json:"removed"`
	ModeChanged int `json:"mode_changed,omitempty"`
	// Paths lists the written, removed and mode-changed paths of an
	// incremental checkout (empty for a fresh one), sorted as visited.
	Paths    []string      `json:"paths,omitempty"`
	Duration time.Duration `json:"duration_ns"`
}

// checkoutState is the JSON kept in StateFile.
type checkoutState struct {
	Repo   string `json:"repo"`
	Commit string `json:"commit"`
	Tree   string `json:"tree"`
	// Pending is set while an update to another commit is in progress; an
	// interrupted update is finished first on the next run.
	PendingCommit string `json:"pending_commit,omitempty"`
	PendingTree   string `json:"pending_tree,omitempty"`
}

// Checkout materialises commit (any revision: hash, tag, branch) of the
// repository at repoPath into dir, a plain directory without .git.
//
// A fresh checkout needs dir to be absent or empty. When dir holds a
// checkout made by Checkout (StateFile), the two trees are compared at tree
// level (recursing only into subtrees whose hashes differ) and only the
// changed files are rewritten or removed; untracked files such as build
// outputs are left alone. Files changed by hand in dir are not noticed.
//
// dir holds StateFile and its lock file besides the tree. Checkouts into
// one directory are serialised with the lock; an interrupted checkout is
// completed by the next one (StateFile records the pending commit).
func Checkout(ctx context.Context, repoPath, commit, dir string) (*CheckoutStats, error) {
	start := time.Now()
	// The object cache holds the delta bases the blob decoders share.
	repo, st, dirs, err := Open(repoPath, 48)
	if err != nil {
		return nil, err
	}
	defer st.Close()
	c, err := ResolveIn(repo, commit)
	if err != nil {
		return nil, err
	}
	dir, err = filepath.Abs(dir)
	if err != nil {
		return nil, fail.Inputf("checkout dir %s: %v", dir, err)
	}
	stats := &CheckoutStats{Commit: c.Hash.String(), Tree: c.TreeHash.String()}

	// One checkout of dir at a time (two builds sharing a directory).
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fail.Infraf("checkout dir %s: %w", dir, err)
	}
	lock, err := lockDir(ctx, dir, syscall.LOCK_EX)
	if err != nil {
		return nil, err
	}
	defer lock.Close()

	state, err := readState(dir)
	if err != nil {
		return nil, err
	}
	co := &checkouter{
		ctx:      ctx,
		repoPath: repoPath,
		st:       st,
		dirs:     dirs,
		stats:    stats,
	}
	if state == nil {
		if err := requireEmpty(dir); err != nil {
			return nil, err
		}
		stats.Fresh = true
		newState := &checkoutState{Repo: dirs.CommonDir, PendingCommit: stats.Commit, PendingTree: stats.Tree}
		if err := writeState(dir, newState); err != nil {
			return nil, err
		}
		if err := co.run(func() error { return co.writeTree(c.TreeHash, dir) }); err != nil {
			return nil, err
		}
	} else {
		stats.Previous = state.Commit
		if state.PendingTree != "" && state.PendingTree != stats.Tree {
			// An update to another commit was interrupted: finish it first
			// so that the directory matches a known tree again.
			if err := co.update(dir, state, plumbing.NewHash(state.PendingTree), state.PendingCommit); err != nil {
				return nil, err
			}
			state = &checkoutState{Repo: state.Repo, Commit: state.PendingCommit, Tree: state.PendingTree}
			stats.Written, stats.Removed, stats.ModeChanged, stats.Paths = 0, 0, 0, nil
		}
		if err := co.update(dir, state, c.TreeHash, stats.Commit); err != nil {
			return nil, err
		}
	}
	if err := writeState(dir, &checkoutState{Repo: dirs.CommonDir, Commit: stats.Commit, Tree: stats.Tree}); err != nil {
		return nil, err
	}
	stats.Duration = time.Since(start)
	return stats, nil
}

// update moves dir from state's tree to the tree newTree.
func (co *checkouter) update(dir string, state *checkoutState, newTree plumbing.Hash, newCommit string) error {
	oldTree := plumbing.NewHash(state.Tree)
	if oldTree.IsZero() {
		// interrupted fresh checkout: everything is (re)written
	} else if _, err := object.GetTree(co.st, oldTree); err != nil {
		return fail.Inputf("checkout dir %s holds tree %s (commit %s) which is not in %s: it was checked out from another repository; remove the directory or use another one",
			dir, ShortHash(oldTree), state.Commit, co.repoPath)
	}
	pending := &checkoutState{Repo: state.Repo, Commit: state.Commit, Tree: state.Tree, PendingCommit: newCommit, PendingTree: newTree.String()}
	if oldTree == newTree {
		return nil
	}
	if err := writeState(dir, pending); err != nil {
		return err
	}
	co.incremental = true
	return co.run(func() error { return co.diffTree(oldTree, newTree, dir, "") })
}

func requireEmpty(dir string) error {
	f, err := os.Open(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fail.Infraf("checkout dir %s: %w", dir, err)
	}
	defer f.Close()
	names, err := f.Readdirnames(3)
	if err != nil && err != io.EOF {
		return fail.Inputf("checkout dir %s: %v", dir, err)
	}
	var other []string
	for _, n := range names {
		if n != LockName && n != StateFile+".tmp" {
			other = append(other, n)
		}
	}
	if len(other) > 0 {
		return fail.Inputf("checkout dir %s is not empty and holds no %s: refusing to overwrite it (use an empty or new directory)", dir, StateFile)
	}
	return nil
}

func readState(dir string) (*checkoutState, error) {
	b, err := os.ReadFile(filepath.Join(dir, StateFile))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fail.Infraf("checkout dir %s: %w", dir, err)
	}
	var s checkoutState
	if err := json.Unmarshal(b, &s); err != nil {
		return nil, fail.Inputf("checkout dir %s: bad %s: %v", dir, StateFile, err)
	}
	if s.Tree == "" {
		if s.PendingTree == "" {
			return nil, fail.Inputf("checkout dir %s: %s names no tree", dir, StateFile)
		}
		// An interrupted fresh checkout: start over from the empty tree by
		// treating every path as new; writes are idempotent.
		s.Tree = plumbing.ZeroHash.String()
	}
	return &s, nil
}

func writeState(dir string, s *checkoutState) error {
	b, _ := json.MarshalIndent(s, "", "  ")
	tmp := filepath.Join(dir, StateFile+".tmp")
	if err := os.WriteFile(tmp, append(b, '\n'), 0o644); err != nil {
		return fail.Infraf("checkout dir %s: %w", dir, err)
	}
	if err := os.Rename(tmp, filepath.Join(dir, StateFile)); err != nil {
		return fail.Infraf("checkout dir %s: %w", dir, err)
	}
	return nil
}

// checkouter walks trees on one storage and hands blob writes to workers,
// each with its own storage (go-git storages are not safe for concurrent
// readers).
type checkouter struct {
	ctx         context.Context
	repoPath    string
	st          *Storage
	dirs        Dirs
	stats       *CheckoutStats
	incremental bool

	jobs    chan blobJob
	written atomic.Int64
	errOnce sync.Once
	err     error
	failed  atomic.Bool
}

type blobJob struct {
	path string
	hash plumbing.Hash
	mode filemode.FileMode
}

func (co *checkouter) setErr(err error) {
	co.errOnce.Do(func() { co.err = err; co.failed.Store(true) })
}

// run starts the blob writers, calls walk and waits for the writers.
func (co *checkouter) run(walk func() error) error {
	// Blobs are decoded in parallel but written by one goroutine: on ext4,
	// parallel file creation cost several times the system time (measured
	// on the 78k-file tree: 22 s of sys with 6 writers, 6 s with one).
	n := runtime.NumCPU()
	// PATCHEVAL_CHECKOUT_WORKERS overrides the number of blob decoders.
	if w, err := strconv.Atoi(os.Getenv("PATCHEVAL_CHECKOUT_WORKERS")); err == nil && w > 0 {
		n = w
	}
	co.jobs = make(chan blobJob, 1024)
	objs := co.st.objs
	type decoded struct {
		j    blobJob
		data []byte
	}
	writes := make(chan decoded, 256)
	var wg sync.WaitGroup
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := range co.jobs {
				if co.failed.Load() {
					continue
				}
				data, err := readBlob(objs, j)
				if err != nil {
					co.setErr(err)
					continue
				}
				writes <- decoded{j, data}
			}
		}()
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for d := range writes {
			if co.failed.Load() {
				continue
			}
			if err := writeFile(d.j, d.data); err != nil {
				co.setErr(err)
			}
			co.written.Add(1)
		}
	}()
	err := walk()
	close(co.jobs)
	wg.Wait()
	close(writes)
	<-done
	if err != nil {
		return err
	}
	if co.err != nil {
		return co.err
	}
	co.stats.Written += int(co.written.Swap(0))
	return nil
}

func (co *checkouter) send(j blobJob) error {
	if co.failed.Load() {
		return co.err
	}
	if err := co.ctx.Err(); err != nil {
		return err
	}
	co.jobs <- j
	return nil
}

// writeTree writes the whole tree h into dir (which exists).
func (co *checkouter) writeTree(h plumbing.Hash, dir string) error {
	t, err := object.GetTree(co.st, h)
	if err != nil {
		return fail.Infraf("read tree %s: %v", ShortHash(h), err)
	}
	for _, e := range t.Entries {
		if err := co.writeEntry(e, filepath.Join(dir, e.Name), ""); err != nil {
			return err
		}
	}
	return nil
}

// writeEntry writes one tree entry at p (nothing is there).
func (co *checkouter) writeEntry(e object.TreeEntry, p, rel string) error {
	if !validName(e.Name) {
		return fail.Inputf("tree entry %q is not a safe file name; refusing to check it out", e.Name)
	}
	switch e.Mode {
	case filemode.Dir:
		if err := os.Mkdir(p, 0o755); err != nil && !errors.Is(err, fs.ErrExist) {
			return fail.Infraf("checkout: %w", err)
		}
		return co.writeTree(e.Hash, p)
	case filemode.Submodule:
		if err := os.Mkdir(p, 0o755); err != nil && !errors.Is(err, fs.ErrExist) {
			return fail.Infraf("checkout: %w", err)
		}
		return nil
	default:
		if co.incremental {
			co.stats.Paths = append(co.stats.Paths, rel)
		}
		return co.send(blobJob{path: p, hash: e.Hash, mode: e.Mode})
	}
}

func validName(n string) bool {
	return n != "" && n != "." && n != ".." && n != ".git" && n != StateFile && n != LockName && !containsSlash(n)
}

func containsSlash(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] == '/' || s[i] == 0 {
			return true
		}
	}
	return false
}

// readBlob reads the blob of one job.
func readBlob(objs *objectReader, j blobJob) ([]byte, error) {
	typ, data, err := objs.Object(j.hash)
	if err == nil && typ != plumbing.BlobObject {
		err = fmt.Errorf("object is a %s, not a blob", typ)
	}
	if err != nil {
		return nil, fail.Infraf("read blob %s for %s: %v", ShortHash(j.hash), j.path, err)
	}
	return data, nil
}

// writeFile writes one file or symlink (replacing what is at the path).
func writeFile(j blobJob, data []byte) error {
	if j.mode == filemode.Symlink {
		target := data
		os.Remove(j.path)
		if err := os.Symlink(string(target), j.path); err != nil {
			return fail.Infraf("checkout: %w", err)
		}
		return nil
	}
	perm := os.FileMode(0o644)
	if j.mode == filemode.Executable {
		perm = 0o755
	}
	f, err := os.OpenFile(j.path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, perm)
	if errors.Is(err, fs.ErrExist) {
		// Replace rather than truncate: a hard-linked or running file
		// keeps its old content, and the mode is the new one.
		os.Remove(j.path)
		f, err = os.OpenFile(j.path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, perm)
	}
	if err != nil {
		return fail.Infraf("checkout: %w", err)
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		return fail.Infraf("checkout %s: %w", j.path, err)
	}
	if err := f.Close(); err != nil {
		return fail.Infraf("checkout %s: %w", j.path, err)
	}
	return nil
}

// diffTree updates dir from tree oldH to tree newH, recursing only into
// subtrees whose hashes differ. rel is dir relative to the checkout root.
func (co *checkouter) diffTree(oldH, newH plumbing.Hash, dir, rel string) error {
	var oldEntries []object.TreeEntry
	if !oldH.IsZero() {
		ot, err := object.GetTree(co.st, oldH)
		if err != nil {
			return fail.Infraf("read tree %s: %v", ShortHash(oldH), err)
		}
		oldEntries = ot.Entries
	}
	nt, err := object.GetTree(co.st, newH)
	if err != nil {
		return fail.Infraf("read tree %s: %v", ShortHash(newH), err)
	}
	old := make(map[string]object.TreeEntry, len(oldEntries))
	for _, e := range oldEntries {
		old[e.Name] = e
	}
	newByName := make(map[string]object.TreeEntry, len(nt.Entries))
	for _, e := range nt.Entries {
		newByName[e.Name] = e
	}
	// Removals first, so that a file replaced by a directory (or the
	// reverse) has its place free.
	for _, o := range oldEntries {
		n, ok := newByName[o.Name]
		if ok && kind(n.Mode) == kind(o.Mode) {
			continue
		}
		if err := co.remove(filepath.Join(dir, o.Name), join(rel, o.Name)); err != nil {
			return err
		}
	}
	for _, n := range nt.Entries {
		if err := co.ctx.Err(); err != nil {
			return err
		}
		p := filepath.Join(dir, n.Name)
		r := join(rel, n.Name)
		o, ok := old[n.Name]
		switch {
		case ok && o.Hash == n.Hash && o.Mode == n.Mode:
			// unchanged
		case ok && o.Mode == filemode.Dir && n.Mode == filemode.Dir:
			if err := co.diffTree(o.Hash, n.Hash, p, r); err != nil {
				return err
			}
		case ok && o.Hash == n.Hash && isFile(o.Mode) && isFile(n.Mode):
			perm := os.FileMode(0o644)
			if n.Mode == filemode.Executable {
				perm = 0o755
			}
			if err := chmodOwn(p, perm); err != nil {
				return fail.Infraf("checkout: %w", err)
			}
			co.stats.ModeChanged++
			co.stats.Paths = append(co.stats.Paths, r)
		default:
			if n.Mode == filemode.Dir {
				if err := os.Mkdir(p, 0o755); err != nil && !errors.Is(err, fs.ErrExist) {
					return fail.Infraf("checkout: %w", err)
				}
				if err := co.diffTree(plumbing.ZeroHash, n.Hash, p, r); err != nil {
					return err
				}
				continue
			}
			if err := co.writeEntry(n, p, r); err != nil {
				return err
			}
		}
	}
	return nil
}

// kind groups modes that can replace each other in place.
func kind(m filemode.FileMode) int {
	switch {
	case m == filemode.Dir:
		return 1
	case m == filemode.Symlink:
		return 2
	case m == filemode.Submodule:
		return 3
	default:
		return 0
	}
}

func isFile(m filemode.FileMode) bool {
	return m == filemode.Regular || m == filemode.Executable || m == filemode.Deprecated
}

func join(dir, name string) string {
	if dir == "" {
		return name
	}
	return dir + "/" + name
}

func (co *checkouter) remove(p, rel string) error {
	if err := os.RemoveAll(p); err != nil {
		return fail.Infraf("checkout: %w", err)
	}
	co.stats.Removed++
	co.stats.Paths = append(co.stats.Paths, rel)
	return nil
}

// String summarises the stats for humans.
func (s *CheckoutStats) String() string {
	if s.Fresh {
		return fmt.Sprintf("checked out %s (tree %s): %d files written in %s", ShortHash(plumbing.NewHash(s.Commit)), ShortHash(plumbing.NewHash(s.Tree)), s.Written, s.Duration.Round(time.Millisecond))
	}
	return fmt.Sprintf("updated %s -> %s: %d files written, %d removed, %d mode changes in %s", ShortHash(plumbing.NewHash(s.Previous)), ShortHash(plumbing.NewHash(s.Commit)), s.Written, s.Removed, s.ModeChanged, s.Duration.Round(time.Millisecond))
}

// LinkClone makes dst a checkout of the same commit as src, a directory
// Checkout made, by hard-linking its files instead of decoding blobs: a
// 78k-file kernel tree in about a second instead of tens. Checkout never
// writes a file in place (it replaces it), so later updates of either
// directory leave the other alone; the caller must not write the files in
// place itself. dst must be absent or empty; src is locked (shared) while it
// is read. The clone is recorded as a checkout only once complete, so an
// interrupted clone is not mistaken for one. It fails (and removes what it
// made) where hard links are impossible, e.g. across file systems.
func LinkClone(ctx context.Context, src, dst string) (*CheckoutStats, error) {
	start := time.Now()
	src, err := filepath.Abs(src)
	if err != nil {
		return nil, fail.Inputf("checkout dir %s: %v", src, err)
	}
	lock, err := lockDir(ctx, src, syscall.LOCK_SH)
	if err != nil {
		return nil, err
	}
	defer lock.Close()
	state, err := readState(src)
	if err != nil {
		return nil, err
	}
	if state == nil || state.PendingTree != "" || state.Commit == "" {
		return nil, fail.Inputf("checkout dir %s: not a finished checkout", src)
	}
	if err := os.MkdirAll(dst, 0o755); err != nil {
		return nil, fail.Infraf("checkout dir %s: %w", dst, err)
	}
	if err := requireEmpty(dst); err != nil {
		return nil, err
	}
	stats := &CheckoutStats{Commit: state.Commit, Tree: state.Tree, Fresh: true}
	err = filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		if rel == "." {
			return nil
		}
		if rel == StateFile || rel == LockName || rel == StateFile+".tmp" {
			return nil
		}
		if stats.Written%4096 == 0 && ctx.Err() != nil {
			return ctx.Err()
		}
		target := filepath.Join(dst, rel)
		switch {
		case d.IsDir():
			return os.Mkdir(target, 0o755)
		case d.Type()&fs.ModeSymlink != 0:
			l, err := os.Readlink(p)
			if err != nil {
				return err
			}
			stats.Written++
			return os.Symlink(l, target)
		case d.Type().IsRegular():
			stats.Written++
			return os.Link(p, target)
		}
		return nil // sockets, fifos: not from a checkout
	})
	if err != nil {
		cleanClone(dst)
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, fail.Infraf("link clone %s -> %s: %v", src, dst, err)
	}
	if err := writeState(dst, &checkoutState{Repo: state.Repo, Commit: state.Commit, Tree: state.Tree}); err != nil {
		cleanClone(dst)
		return nil, err
	}
	stats.Duration = time.Since(start)
	return stats, nil
}

// cleanClone empties dst after a failed LinkClone.
func cleanClone(dst string) {
	ents, _ := os.ReadDir(dst)
	for _, e := range ents {
		if e.Name() != LockName {
			os.RemoveAll(filepath.Join(dst, e.Name()))
		}
	}
}

// chmodOwn sets a file's permissions without touching other hard links to
// it (a LinkClone): a shared inode is copied first.
func chmodOwn(p string, perm os.FileMode) error {
	var st syscall.Stat_t
	if err := syscall.Lstat(p, &st); err != nil {
		return err
	}
	if st.Nlink <= 1 {
		return os.Chmod(p, perm)
	}
	data, err := os.ReadFile(p)
	if err != nil {
		return err
	}
	tmp := p + ".patcheval-tmp"
	os.Remove(tmp)
	if err := os.WriteFile(tmp, data, perm); err != nil {
		return err
	}
	if err := os.Chmod(tmp, perm); err != nil { // umask
		os.Remove(tmp)
		return err
	}
	return os.Rename(tmp, p)
}

// lockDir takes the checkout lock of dir (LOCK_EX to write it, LOCK_SH to
// read it) with Flock, waiting until ctx ends; closing the file releases
// it. dir must exist.
func lockDir(ctx context.Context, dir string, how int) (*os.File, error) {
	lock, err := os.OpenFile(filepath.Join(dir, LockName), os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, fail.Infraf("checkout dir %s: %w", dir, err)
	}
	if err := Flock(ctx, int(lock.Fd()), how, nil); err != nil {
		lock.Close()
		return nil, fail.Infraf("checkout dir %s: lock: %w", dir, err)
	}
	return lock, nil
}
