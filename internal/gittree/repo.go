// Package gittree is how patcheval touches a git tree on disk: Open finds
// and opens a repository (plain, bare, linked worktree) with go-git,
// Resolve turns a revision into a commit, Checkout writes a commit's tree
// into a plain directory (no .git) and moves it incrementally to another
// commit, Push sends a commit to a remote branch with only the objects the
// remote lacks, LinkClone copies a checkout by hard links, and
// LockFile/Flock are the cross-process locks every shared directory uses.
//
// When a Checkout directory already holds another commit of the same
// repository, only the files that differ are rewritten or removed, so
// make's incremental build sees real modification times.
package gittree

import (
	"bytes"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"

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

// Open opens the repository at path with go-git, on a Storage whose
// object reads cost the same whatever the repository's size (see
// Storage). Close the storage when done; cacheMiB sizes the cache of
// decoded objects (delta bases).
func Open(path string, cacheMiB int) (*git.Repository, *Storage, Dirs, error) {
	d, err := findRepo(path)
	if err != nil {
		return nil, nil, d, err
	}
	var fs billy.Filesystem = osfs.New(d.GitDir)
	if d.CommonDir != d.GitDir {
		fs = dotgit.NewRepositoryFilesystem(fs, osfs.New(d.CommonDir))
	}
	objs, err := newObjectReader(d, max(cacheMiB, 1)<<20)
	if err != nil {
		return nil, nil, d, fail.Infraf("tree %s: %v", path, err)
	}
	// go-git's own object storage only writes loose objects here (and
	// serves what Storage does not override); its cache stays small.
	fst := filesystem.NewStorageWithOptions(fs, cache.NewObjectLRU(cache.MiByte),
		filesystem.Options{KeepDescriptors: true})
	st := &Storage{Storage: fst, objs: objs, dot: dotgit.New(fs)}
	r, err := git.Open(st, nil)
	if err != nil {
		st.Close()
		return nil, nil, d, fail.Inputf("tree %s: open repository: %v", path, err)
	}
	return r, st, d, nil
}

// Storage is go-git's filesystem storage with the object reads done by
// objectReader: pack indexes read in place instead of decoded whole, no
// offset -> hash map of every object, delta bases cached by pack offset.
// Opening it and reading an object cost the same on a linux.git of
// millions of objects as on a one-commit tree; go-git's storage loads
// every pack index on the first read and hashes the offsets of every
// object on the first delta. Writing (loose objects, references,
// config) is go-git's. It also hides repository extensions that only
// matter to a worktree (worktreeConfig, set by `git sparse-checkout`) or
// to pruning (preciousObjects): go-git refuses to open such repositories
// although reading objects and writing new ones is safe there.
type Storage struct {
	*filesystem.Storage
	objs *objectReader
	dot  *dotgit.DotGit

	refsMu   sync.Mutex // guards the packed-refs cache (Reference)
	packed   []byte
	packedID fileID
}

// Close closes the pack files.
func (s *Storage) Close() error {
	s.objs.Close()
	return s.Storage.Close()
}

// EncodedObject returns the object h (of type t, or any type for
// plumbing.AnyObject).
func (s *Storage) EncodedObject(t plumbing.ObjectType, h plumbing.Hash) (plumbing.EncodedObject, error) {
	typ, b, err := s.objs.Object(h)
	if err != nil {
		return nil, err
	}
	if t != plumbing.AnyObject && typ != t {
		return nil, plumbing.ErrObjectNotFound
	}
	return &readObject{t: typ, h: h, b: b}, nil
}

// HasEncodedObject returns nil when the repository has h.
func (s *Storage) HasEncodedObject(h plumbing.Hash) error {
	if s.objs.Has(h) {
		return nil
	}
	return plumbing.ErrObjectNotFound
}

// EncodedObjectSize returns the size of the object h.
func (s *Storage) EncodedObjectSize(h plumbing.Hash) (int64, error) {
	_, b, err := s.objs.Object(h)
	if err != nil {
		return 0, err
	}
	return int64(len(b)), nil
}

// HashesWithPrefix lists the objects whose names start with prefix (an
// abbreviated hash): a search in each pack index and one loose objects
// directory, not a walk over every object. A prefix shorter than 2 bytes
// finds nothing: git takes no abbreviation shorter than 4 hex digits,
// and go-git's ResolveRevision, which asks with the whole bytes of the
// hex it is given and prefers an object to a ref, would otherwise take
// a tag or branch named "bad" or "add" for a commit whose name starts
// with those digits.
func (s *Storage) HashesWithPrefix(prefix []byte) ([]plumbing.Hash, error) {
	if len(prefix) < 2 {
		return nil, nil
	}
	var out []plumbing.Hash
	s.objs.mu.RLock()
	for _, p := range s.objs.packs {
		out = p.idx.withPrefix(prefix, out)
	}
	s.objs.mu.RUnlock()
	for _, d := range s.objs.objdirs {
		ents, _ := os.ReadDir(filepath.Join(d, fmt.Sprintf("%02x", prefix[0])))
		for _, e := range ents {
			h, ok := parseHash([]byte(fmt.Sprintf("%02x", prefix[0]) + e.Name()))
			if ok && bytes.HasPrefix(h[:], prefix) {
				out = append(out, h)
			}
		}
	}
	seen := map[plumbing.Hash]bool{}
	uniq := out[:0]
	for _, h := range out {
		if !seen[h] {
			seen[h] = true
			uniq = append(uniq, h)
		}
	}
	return uniq, nil
}

func parseHash(s []byte) (plumbing.Hash, bool) {
	var h plumbing.Hash
	if len(s) != 2*len(h) {
		return h, false
	}
	_, err := hex.Decode(h[:], s)
	return h, err == nil
}

// PackfileWriter takes a fetched pack: it is written with its index to
// objects/pack (go-git's pack writer) and found by the next read. go-git's
// own PackfileWriter first loads every existing pack index.
func (s *Storage) PackfileWriter() (io.WriteCloser, error) {
	return s.dot.NewObjectPack()
}

// Config is the repository's config without the extensions go-git does
// not need to refuse (see Storage).
func (s *Storage) Config() (*config.Config, error) {
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

// readObject is an object read by objectReader: its hash is known (no
// hashing on read) and its content is shared with the cache (read-only).
type readObject struct {
	t plumbing.ObjectType
	h plumbing.Hash
	b []byte
}

func (o *readObject) Hash() plumbing.Hash            { return o.h }
func (o *readObject) Type() plumbing.ObjectType      { return o.t }
func (o *readObject) SetType(plumbing.ObjectType)    {}
func (o *readObject) Size() int64                    { return int64(len(o.b)) }
func (o *readObject) SetSize(int64)                  {}
func (o *readObject) Reader() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(o.b)), nil }
func (o *readObject) Writer() (io.WriteCloser, error) {
	return nil, fmt.Errorf("object %s is read-only", o.h)
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
// errors name the tree and the revision (bad input). The repository is
// closed before it returns: the commit's fields (hashes, dates, message)
// are there, but its tree and parents cannot be read; for those use Open
// and ResolveIn and close the storage after the last read.
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

// SameTrees returns the commits of candidates (hex ids; those not in the
// repository are skipped) that are not in lineage but have the tree of a
// commit of lineage: the same code under another history, as a release
// imported again onto another parent (internal/linuxtree relinks the
// later releases when an earlier one is imported).
func SameTrees(path string, lineage, candidates []string) ([]string, error) {
	if len(candidates) == 0 {
		return nil, nil
	}
	r, st, _, err := Open(path, 1)
	if err != nil {
		return nil, err
	}
	defer st.Close()
	in := map[string]bool{}
	trees := map[plumbing.Hash]bool{}
	for _, c := range lineage {
		in[c] = true
		if co, err := r.CommitObject(plumbing.NewHash(c)); err == nil {
			trees[co.TreeHash] = true
		}
	}
	var out []string
	for _, c := range candidates {
		if in[c] || !plumbing.IsHash(c) {
			continue
		}
		if co, err := r.CommitObject(plumbing.NewHash(c)); err == nil && trees[co.TreeHash] {
			out = append(out, c)
		}
	}
	return out, nil
}

// Ancestors is commit and its ancestors, breadth first (nearest first),
// at most n commits: what a bounded walk back from commit reaches.
func Ancestors(path, commit string, n int) ([]string, error) {
	r, st, _, err := Open(path, 1)
	if err != nil {
		return nil, err
	}
	defer st.Close()
	start := plumbing.NewHash(commit)
	seen := map[plumbing.Hash]bool{start: true}
	queue := []plumbing.Hash{start}
	var out []string
	for len(queue) > 0 && len(out) < n {
		h := queue[0]
		queue = queue[1:]
		c, err := r.CommitObject(h)
		if err != nil {
			if len(out) == 0 {
				return nil, err
			}
			continue // a shallow or partial history ends here
		}
		out = append(out, h.String())
		for _, p := range c.ParentHashes {
			if !seen[p] {
				seen[p] = true
				queue = append(queue, p)
			}
		}
	}
	return out, nil
}
