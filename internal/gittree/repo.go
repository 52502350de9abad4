// Package gittree is how patcheval touches a git tree on disk: Open finds
// and opens a repository (plain, bare, linked worktree) with go-git,
// Resolve turns a revision into a commit, Checkout writes a commit's tree
// into a plain directory (no .git) and moves it incrementally to another
// commit, LinkClone copies a checkout by hard links, and LockFile/Flock
// are the cross-process locks every shared directory uses.
//
// When a Checkout directory already holds another commit of the same
// repository, only the files that differ are rewritten or removed, so
// make's incremental build sees real modification times.
package gittree

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/go-git/go-billy/v5"
	"github.com/go-git/go-billy/v5/osfs"
	git "github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/config"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/cache"
	format "github.com/go-git/go-git/v5/plumbing/format/config"
	"github.com/go-git/go-git/v5/plumbing/object"
	"github.com/go-git/go-git/v5/storage/filesystem"
	"github.com/go-git/go-git/v5/storage/filesystem/dotgit"

	"github.com/patcheval/patcheval/internal/fail"
)

// Dirs locates a repository on disk.
type Dirs struct {
	// GitDir is the repository's git directory (path/.git, the gitdir of a
	// linked worktree, or path itself for a bare repository).
	GitDir string
	// CommonDir is where objects and refs live (differs from GitDir for a
	// linked worktree).
	CommonDir string
	// WorkTree is the worktree root, "" for a bare repository.
	WorkTree string
}

func (d Dirs) Bare() bool { return d.WorkTree == "" }

// findRepo finds the git directories of the repository at path.
func findRepo(path string) (Dirs, error) {
	var d Dirs
	abs, err := filepath.Abs(path)
	if err != nil {
		return d, fail.Inputf("tree %s: %v", path, err)
	}
	dotgit := filepath.Join(abs, ".git")
	if fi, err := os.Stat(dotgit); err == nil {
		d.WorkTree = abs
		if fi.IsDir() {
			d.GitDir = dotgit
		} else {
			b, err := os.ReadFile(dotgit)
			if err != nil {
				return d, fail.Infraf("tree %s: %v", path, err)
			}
			line := strings.TrimSpace(strings.SplitN(string(b), "\n", 2)[0])
			if !strings.HasPrefix(line, "gitdir:") {
				return d, fail.Inputf("tree %s: .git file has no gitdir: line", path)
			}
			g := strings.TrimSpace(strings.TrimPrefix(line, "gitdir:"))
			if !filepath.IsAbs(g) {
				g = filepath.Join(abs, g)
			}
			d.GitDir = g
		}
	} else if isGitDir(abs) {
		d.GitDir = abs
	} else {
		return d, fail.Inputf("tree %s is not a git repository (no .git, no objects/ and HEAD); pass --tree with a kernel clone", path)
	}
	d.CommonDir = d.GitDir
	if b, err := os.ReadFile(filepath.Join(d.GitDir, "commondir")); err == nil {
		c := strings.TrimSpace(string(b))
		if !filepath.IsAbs(c) {
			c = filepath.Join(d.GitDir, c)
		}
		d.CommonDir = filepath.Clean(c)
	}
	return d, nil
}

func isGitDir(p string) bool {
	if _, err := os.Stat(filepath.Join(p, "HEAD")); err != nil {
		return false
	}
	fi, err := os.Stat(filepath.Join(p, "objects"))
	return err == nil && fi.IsDir()
}

// Open opens the repository at path with go-git. Pack file descriptors
// are kept open (close the storage when done); cacheMiB sizes the object
// cache (delta bases).
func Open(path string, cacheMiB int) (*git.Repository, *filesystem.Storage, Dirs, error) {
	d, err := findRepo(path)
	if err != nil {
		return nil, nil, d, err
	}
	var fs billy.Filesystem = osfs.New(d.GitDir)
	if d.CommonDir != d.GitDir {
		fs = dotgit.NewRepositoryFilesystem(fs, osfs.New(d.CommonDir))
	}
	st := filesystem.NewStorageWithOptions(fs, cache.NewObjectLRU(cache.FileSize(cacheMiB)*cache.MiByte),
		filesystem.Options{KeepDescriptors: true})
	r, err := git.Open(lenientStorage{st}, nil)
	if err != nil {
		st.Close()
		return nil, nil, d, fail.Inputf("tree %s: open repository: %v", path, err)
	}
	return r, st, d, nil
}

// lenientStorage hides repository extensions that only matter to a
// worktree (worktreeConfig, set by `git sparse-checkout`) or to pruning
// (preciousObjects): go-git refuses to open such repositories although
// reading objects and writing new ones is safe there.
type lenientStorage struct{ *filesystem.Storage }

func (s lenientStorage) Config() (*config.Config, error) {
	cfg, err := s.Storage.Config()
	if err != nil || cfg.Raw == nil || !cfg.Raw.HasSection("extensions") {
		return cfg, err
	}
	sec := cfg.Raw.Section("extensions")
	var keep []*format.Option
	for _, o := range sec.Options {
		switch strings.ToLower(o.Key) {
		case "worktreeconfig", "preciousobjects", "noop":
		default:
			keep = append(keep, o)
		}
	}
	sec.Options = keep
	if len(keep) == 0 {
		cfg.Raw.RemoveSection("extensions")
	}
	return cfg, nil
}

// ShortHash is the first 12 hex digits of a hash.
func ShortHash(h fmt.Stringer) string {
	s := h.String()
	if len(s) > 12 {
		return s[:12]
	}
	return s
}

// ResolveIn resolves a revision (hash, tag, branch, rev~n) of repo to a
// commit.
func ResolveIn(repo *git.Repository, rev string) (*object.Commit, error) {
	h, err := repo.ResolveRevision(plumbing.Revision(rev))
	if err != nil {
		return nil, fail.Inputf("revision %q not found in the tree: %v", rev, err)
	}
	c, err := repo.CommitObject(*h)
	if err != nil {
		return nil, fail.Inputf("revision %q (%s) is not a commit: %v", rev, ShortHash(h), err)
	}
	return c, nil
}

// Resolve opens the repository at path and resolves rev to a commit. Its
// errors name the tree and the revision (bad input).
func Resolve(path, rev string) (*object.Commit, error) {
	r, st, _, err := Open(path, 1)
	if err != nil {
		return nil, err
	}
	defer st.Close()
	h, err := r.ResolveRevision(plumbing.Revision(rev))
	if err != nil {
		return nil, fail.Inputf("kernel tree %s: revision %q: %w", path, rev, err)
	}
	c, err := r.CommitObject(*h)
	if err != nil {
		return nil, fail.Inputf("kernel tree %s: %s is not a commit: %w", path, rev, err)
	}
	return c, nil
}
