// Package apply puts a patch Series onto a kernel git tree at object level
// and materialises trees for building.
//
// Apply reads only the blobs a patch touches, places every hunk itself
// (exact position, then an outward search for the context like git apply,
// then optional fuzz), and writes blobs, trees and commits straight into the
// repository's object store with go-git: the user's worktree, index and HEAD
// are never touched, only the result branch is written (and only when every
// patch applied).
//
// Checkout writes a commit's tree into a plain directory (no .git). When the
// directory already holds another commit of the same repository, only the
// files that differ are rewritten or removed, so make's incremental build
// sees real modification times.
package apply

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/go-git/go-billy/v5"
	"github.com/go-git/go-billy/v5/osfs"
	git "github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/config"
	"github.com/go-git/go-git/v5/plumbing/cache"
	format "github.com/go-git/go-git/v5/plumbing/format/config"
	"github.com/go-git/go-git/v5/storage/filesystem"
	"github.com/go-git/go-git/v5/storage/filesystem/dotgit"

	"github.com/patcheval/patcheval/internal/fail"
)

// repoDirs locates a repository on disk.
type repoDirs struct {
	// GitDir is the repository's git directory (path/.git, the gitdir of a
	// linked worktree, or path itself for a bare repository).
	GitDir string
	// CommonDir is where objects and refs live (differs from GitDir for a
	// linked worktree).
	CommonDir string
	// WorkTree is the worktree root, "" for a bare repository.
	WorkTree string
}

func (d repoDirs) Bare() bool { return d.WorkTree == "" }

// findRepo finds the git directories of the repository at path.
func findRepo(path string) (repoDirs, error) {
	var d repoDirs
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

// openRepo opens the repository at path with go-git. Pack file descriptors
// are kept open (close the storage when done); cacheMiB sizes the object
// cache (delta bases).
func openRepo(path string, cacheMiB int) (*git.Repository, *filesystem.Storage, repoDirs, error) {
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

func shortHash(h fmt.Stringer) string {
	s := h.String()
	if len(s) > 12 {
		return s[:12]
	}
	return s
}
