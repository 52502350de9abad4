// Package linuxtree imports Linux source releases — Debian's
// linux-source-X.Y packages (internal/debian) or kernel.org-style
// tarballs — into one release-history bare git repository: every release
// a commit tagged vX.Y.Z whose parent is the release before it in
// version order, refs/heads/master the newest.
//
// The history is a function of the set of releases imported: each commit
// is made with `git commit-tree` from the release's tree, its parent,
// a fixed identity, the release's own date (the newest mtime in its
// tarball: Debian's changelog date, a kernel.org tarball's commit date)
// and a message naming its source, so the same set gives the same commit
// ids on every machine. Importing a release older than one already
// imported relinks the later ones (same trees, new parents): their tags
// move, and Import reports which.
//
// A tarball is never extracted: its stream is converted by
// internal/tar2git and written by `git fast-import` into a quarantine
// repository that borrows the repository's objects; only a complete
// import's pack is moved in and only then are refs updated, so a failed
// or interrupted import leaves nothing behind.
package linuxtree

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"time"

	"github.com/patcheval/patcheval/internal/debian"
	"github.com/patcheval/patcheval/internal/fail"
	"github.com/patcheval/patcheval/internal/gittree"
	"github.com/patcheval/patcheval/internal/lazyre"
)

// Identity is the author and committer of every imported release.
const Identity = "patcheval import <import@patcheval.invalid>"

// Release is one imported release.
type Release struct {
	Tag     string    `json:"tag"`     // v7.2.13
	Version string    `json:"version"` // 7.2.13 (Debian spelling: 7.3~rc2)
	Commit  string    `json:"commit"`
	Tree    string    `json:"tree"`
	Date    time.Time `json:"date"`
	Title   string    `json:"title"`  // first line of the message
	Origin  string    `json:"origin"` // "debian linux-source-7.2 7.2.13-1" or "tarball linux-7.2.13.tar.xz"
	SHA256  string    `json:"sha256"` // of the .deb or the tarball
}

// Repo is a release-history repository (created on first import).
type Repo struct {
	Path string
	Log  io.Writer // progress; nil discards
}

func (r *Repo) logf(format string, a ...any) {
	if r.Log != nil {
		fmt.Fprintf(r.Log, "linuxtree: "+format+"\n", a...)
	}
}

func (r *Repo) git(ctx context.Context, stdin []byte, env []string, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, "git", append([]string{"--git-dir=" + r.Path, "-c", "commit.gpgsign=false"}, args...)...)
	cmd.Env = append(os.Environ(), env...)
	if stdin != nil {
		cmd.Stdin = bytes.NewReader(stdin)
	}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return "", fail.Infraf("git %s: %v: %s", strings.Join(args, " "), err, strings.TrimSpace(stderr.String()))
	}
	return strings.TrimSpace(string(out)), nil
}

// Releases lists the imported releases, oldest first. Tags the import did
// not make are left out.
func (r *Repo) Releases(ctx context.Context) ([]Release, error) {
	if _, err := os.Stat(filepath.Join(r.Path, "objects")); err != nil {
		return nil, nil
	}
	out, err := r.git(ctx, nil, nil, "for-each-ref", "--format=%(refname:short) %(objectname) %(objecttype)", "refs/tags/")
	if err != nil {
		return nil, err
	}
	var res []Release
	for _, line := range strings.Split(out, "\n") {
		f := strings.Fields(line)
		if len(f) != 3 || f[2] != "commit" {
			continue
		}
		raw, err := r.git(ctx, nil, nil, "cat-file", "commit", f[1])
		if err != nil {
			return nil, err
		}
		rel, ok := parseCommit(raw)
		if !ok || rel.Tag != f[0] {
			continue
		}
		rel.Commit = f[1]
		res = append(res, rel)
	}
	sortReleases(res)
	return res, nil
}

func sortReleases(rs []Release) {
	sort.SliceStable(rs, func(i, j int) bool { return debian.CompareVersions(rs[i].Version, rs[j].Version) < 0 })
}

// message is the commit message of rel: its title, then trailers the
// import reads back.
func message(rel Release) string {
	return fmt.Sprintf("%s\n\nImported by patcheval (patcheval tree import).\n\n"+
		"Patcheval-Release: %s\nPatcheval-Version: %s\nPatcheval-Source: %s\nPatcheval-SHA256: %s\n",
		rel.Title, rel.Tag, rel.Version, rel.Origin, rel.SHA256)
}

// parseCommit reads a commit object made by the import.
func parseCommit(raw string) (Release, bool) {
	var rel Release
	head, msg, _ := strings.Cut(raw, "\n\n")
	for _, line := range strings.Split(head, "\n") {
		k, v, _ := strings.Cut(line, " ")
		switch k {
		case "tree":
			rel.Tree = v
		case "author":
			f := strings.Fields(v)
			if len(f) >= 2 {
				var sec int64
				fmt.Sscan(f[len(f)-2], &sec)
				rel.Date = time.Unix(sec, 0).UTC()
			}
		}
	}
	rel.Title, _, _ = strings.Cut(msg, "\n")
	for _, line := range strings.Split(msg, "\n") {
		k, v, ok := strings.Cut(line, ": ")
		if !ok {
			continue
		}
		switch k {
		case "Patcheval-Release":
			rel.Tag = v
		case "Patcheval-Version":
			rel.Version = v
		case "Patcheval-Source":
			rel.Origin = v
		case "Patcheval-SHA256":
			rel.SHA256 = v
		}
	}
	return rel, rel.Tag != "" && rel.Version != "" && rel.Tree != ""
}

// ImportedRelease says whether commit in the repository at gitDir is a
// release the import made (one commit holding a whole release), and
// which: a bisection that ends on such a commit cannot go below it.
func ImportedRelease(gitDir, commit string) (Release, bool) {
	raw, err := (&Repo{Path: gitDir}).git(context.Background(), nil, nil, "cat-file", "commit", commit)
	if err != nil {
		return Release{}, false
	}
	return parseCommit(raw)
}

var tagRE = lazyre.New(`^v([0-9]+\.[0-9]+(\.[0-9]+)?)(-rc[0-9]+)?$`)

// TagVersion checks a release tag (v7.2.13, v7.3, v7.3-rc2) and returns
// its version in Debian spelling (7.2.13, 7.3, 7.3~rc2).
func TagVersion(tag string) (string, error) {
	m := tagRE.FindStringSubmatch(tag)
	if m == nil {
		return "", fail.Inputf("release tag %q: want vX.Y, vX.Y.Z or vX.Y-rcN", tag)
	}
	v := m[1]
	if m[3] != "" {
		v += "~" + strings.TrimPrefix(m[3], "-")
	}
	return v, nil
}

// VersionTag is the release tag of an upstream version in Debian spelling
// (7.3~rc2 -> v7.3-rc2).
func VersionTag(version string) string { return "v" + strings.ReplaceAll(version, "~", "-") }

// Result is what one Import did.
type Result struct {
	Release  Release  `json:"release"`
	Imported bool     `json:"imported"` // false: it was there already
	Moved    []string `json:"moved,omitempty"`
	Seconds  float64  `json:"seconds"`
}

// ensure creates the repository when missing.
func (r *Repo) ensure(ctx context.Context) error {
	if _, err := os.Stat(filepath.Join(r.Path, "objects")); err == nil {
		return nil
	}
	if err := os.MkdirAll(filepath.Dir(r.Path), 0o755); err != nil {
		return fail.Infra(err)
	}
	if out, err := exec.CommandContext(ctx, "git", "init", "-q", "--bare", "-b", "master", r.Path).CombinedOutput(); err != nil {
		return fail.Infraf("git init %s: %v: %s", r.Path, err, out)
	}
	_, err := r.git(ctx, nil, nil, "config", "gc.auto", "0")
	return err
}

// Lock takes the repository's import lock (waiting for another import).
func (r *Repo) Lock(ctx context.Context) (func(), error) {
	return gittree.LockFile(ctx, r.Path+".lock", syscall.LOCK_EX, func() { r.logf("waiting for another import into %s", r.Path) })
}

// Import adds src to the history (the caller holds Lock). A release whose
// tag is there already from the same source is not imported again; from
// another source it is refused (bad input).
func (r *Repo) Import(ctx context.Context, src *Source) (Result, error) {
	start := time.Now()
	if err := r.ensure(ctx); err != nil {
		return Result{}, err
	}
	rels, err := r.Releases(ctx)
	if err != nil {
		return Result{}, err
	}
	for _, rel := range rels {
		if rel.Tag != src.Tag {
			continue
		}
		if rel.Origin != src.Origin || (src.SHA256 != "" && rel.SHA256 != src.SHA256) {
			return Result{}, fail.Inputf("%s: %s already holds %s (SHA256 %.16s); not replacing it with %s", r.Path, rel.Tag, rel.Origin, rel.SHA256, src.Origin)
		}
		return Result{Release: rel, Seconds: time.Since(start).Seconds()}, nil
	}
	if _, err := r.git(ctx, nil, nil, "rev-parse", "-q", "--verify", "refs/tags/"+src.Tag); err == nil {
		return Result{}, fail.Inputf("%s: tag %s exists and was not made by patcheval's import; not replacing it", r.Path, src.Tag)
	}
	rel, err := r.write(ctx, src)
	if err != nil {
		return Result{}, err
	}
	rels = append(rels, rel)
	sortReleases(rels)
	moved, err := r.relink(ctx, rels)
	if err != nil {
		return Result{}, err
	}
	for _, x := range rels {
		if x.Tag == rel.Tag {
			rel = x
		}
	}
	return Result{Release: rel, Imported: true, Moved: moved, Seconds: time.Since(start).Seconds()}, nil
}

// write converts src into objects of the repository through a quarantine
// and returns the release (no commit yet).
func (r *Repo) write(ctx context.Context, src *Source) (Release, error) {
	tmp, err := os.MkdirTemp(r.Path, "import-")
	if err != nil {
		return Release{}, fail.Infra(err)
	}
	defer os.RemoveAll(tmp)
	q := filepath.Join(tmp, "q.git")
	if out, err := exec.CommandContext(ctx, "git", "init", "-q", "--bare", q).CombinedOutput(); err != nil {
		return Release{}, fail.Infraf("git init: %v: %s", err, out)
	}
	objects, _ := filepath.Abs(filepath.Join(r.Path, "objects"))
	if err := os.WriteFile(filepath.Join(q, "objects", "info", "alternates"), []byte(objects+"\n"), 0o644); err != nil {
		return Release{}, fail.Infra(err)
	}
	r.logf("importing %s (%s)", src.Tag, src.Origin)
	res, err := src.convert(ctx, q, r.logf)
	if err != nil {
		return Release{}, err
	}
	qr := &Repo{Path: q}
	tree, err := qr.git(ctx, nil, nil, "rev-parse", "refs/heads/import^{tree}")
	if err != nil {
		return Release{}, err
	}
	if err := movePacks(filepath.Join(q, "objects", "pack"), filepath.Join(r.Path, "objects", "pack")); err != nil {
		return Release{}, err
	}
	r.logf("%s: %d files, tree %.12s", src.Tag, res.Files, tree)
	return Release{Tag: src.Tag, Version: src.Version, Tree: tree, Date: res.Date.UTC(),
		Title: src.Title, Origin: src.Origin, SHA256: src.SHA256}, nil
}

// movePacks moves every pack of from into to: data before index, so that
// git never sees an index without its pack.
func movePacks(from, to string) error {
	for _, ext := range []string{".pack", ".rev", ".idx"} {
		files, _ := filepath.Glob(filepath.Join(from, "*"+ext))
		for _, f := range files {
			if err := os.Rename(f, filepath.Join(to, filepath.Base(f))); err != nil {
				return fail.Infra(err)
			}
		}
	}
	return nil
}

// relink makes the chain of rels (oldest first) and points the tags and
// master at it in one ref transaction; it returns the tags that moved
// from another commit.
func (r *Repo) relink(ctx context.Context, rels []Release) ([]string, error) {
	var moved []string
	var refs strings.Builder
	parent := ""
	for i := range rels {
		rel := &rels[i]
		args := []string{"commit-tree", rel.Tree}
		if parent != "" {
			args = append(args, "-p", parent)
		}
		date := fmt.Sprintf("%d +0000", rel.Date.Unix())
		name, email, _ := strings.Cut(strings.TrimSuffix(Identity, ">"), " <")
		env := []string{"GIT_AUTHOR_NAME=" + name, "GIT_AUTHOR_EMAIL=" + email, "GIT_AUTHOR_DATE=" + date,
			"GIT_COMMITTER_NAME=" + name, "GIT_COMMITTER_EMAIL=" + email, "GIT_COMMITTER_DATE=" + date}
		id, err := r.git(ctx, []byte(message(*rel)), env, append(args, "-F", "-")...)
		if err != nil {
			return nil, err
		}
		if rel.Commit != "" && rel.Commit != id {
			moved = append(moved, rel.Tag)
		}
		rel.Commit = id
		fmt.Fprintf(&refs, "update refs/tags/%s %s\n", rel.Tag, id)
		parent = id
	}
	if parent != "" {
		fmt.Fprintf(&refs, "update refs/heads/master %s\n", parent)
	}
	if _, err := r.git(ctx, []byte(refs.String()), nil, "update-ref", "--stdin"); err != nil {
		return nil, err
	}
	if len(moved) > 0 {
		r.logf("relinked %s onto the release imported before them (same trees, new commit ids)", strings.Join(moved, ", "))
	}
	return moved, nil
}

// fastImport runs `git fast-import` into q reading the stream from the
// returned writer; wait ends it.
func fastImport(ctx context.Context, q string) (w *bufio.Writer, wait func() error, err error) {
	cmd := exec.CommandContext(ctx, "git", "--git-dir="+q, "-c", "pack.compression=1", "-c", "pack.depth=0", "-c", "fastimport.unpackLimit=0",
		"fast-import", "--quiet", "--done")
	in, err := cmd.StdinPipe()
	if err != nil {
		return nil, nil, fail.Infra(err)
	}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		return nil, nil, fail.Infraf("git fast-import: %v", err)
	}
	bw := bufio.NewWriterSize(in, 1<<20)
	return bw, func() error {
		ferr := bw.Flush()
		in.Close()
		if err := cmd.Wait(); err != nil {
			return fail.Infraf("git fast-import: %v: %s", err, lastLine(stderr.String()))
		}
		return fail.Infra(ferr)
	}, nil
}

func lastLine(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return lines[len(lines)-1]
}

var titleRE = lazyre.New(`^Linux (\S+) \((.+)\)$`)

// Name is how a report names the tree when the base is an imported
// release (committer import@patcheval.invalid, what this package and
// scripts/linux-tree.sh write): "Debian linux-source-7.2 7.2.13-1",
// "Debian linux-source-6.1", "Linux 7.2.13 (linux-7.2.13.tar.xz)";
// "" for any other commit.
func Name(message, committerEmail string) string {
	if committerEmail != "import@patcheval.invalid" {
		return ""
	}
	title, _, _ := strings.Cut(message, "\n")
	m := titleRE.FindStringSubmatch(title)
	if m == nil {
		return ""
	}
	if !strings.HasPrefix(m[2], "Debian ") {
		return title
	}
	f := strings.Fields(m[2])
	if strings.HasSuffix(f[len(f)-1], ".tar.xz") { // scripts/linux-tree.sh's 6.1: the tarball, no version
		f = f[:len(f)-1]
	}
	return strings.Join(f, " ")
}
