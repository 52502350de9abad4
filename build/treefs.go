package build

import (
	"bytes"
	"io"
	"io/fs"
	"path"
	"time"

	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/filemode"
	"github.com/go-git/go-git/v5/plumbing/object"

	"github.com/patcheval/patcheval/build/kconfig"
	"github.com/patcheval/patcheval/internal/fail"
	"github.com/patcheval/patcheval/internal/gittree"
)

// KconfigAt reads the Kconfig files of commit in the repository at repo,
// straight from git objects (no checkout), for arch.
func KconfigAt(repo, commit, arch string) (*kconfig.Kconfig, error) {
	ai, err := lookupArch(arch)
	if err != nil {
		return nil, err
	}
	fsys, done, err := TreeFS(repo, commit)
	if err != nil {
		return nil, err
	}
	defer done()
	kc, err := kconfig.ParseFS(fsys, ai.SrcArch)
	if err != nil {
		return nil, fail.Inputf("Kconfig of %s at %s: %w", repo, commit, err)
	}
	return kc, nil
}

// TreeFS is a read-only fs.FS over the tree of commit (any revision) in
// the git repository at repo; call done when finished with it (it closes
// the pack files). The repository is opened with gittree.Open, whose
// reads do not grow with the repository's size.
func TreeFS(repo, commit string) (fsys fs.FS, done func(), err error) {
	r, st, _, err := gittree.Open(repo, 16)
	if err != nil {
		return nil, nil, fail.Inputf("kernel tree %s: %w", repo, err)
	}
	defer func() {
		if err != nil {
			st.Close()
		}
	}()
	h, err := r.ResolveRevision(plumbing.Revision(commit))
	if err != nil {
		return nil, nil, fail.Inputf("kernel tree %s: revision %q: %w", repo, commit, err)
	}
	c, err := r.CommitObject(*h)
	if err != nil {
		return nil, nil, fail.Inputf("kernel tree %s: %s: %w", repo, commit, err)
	}
	t, err := c.Tree()
	if err != nil {
		return nil, nil, fail.Inputf("kernel tree %s: tree of %s: %w", repo, commit, err)
	}
	return &treeFS{root: t, when: c.Committer.When}, func() { st.Close() }, nil
}

type treeFS struct {
	root *object.Tree
	when time.Time
}

func (t *treeFS) Open(name string) (fs.File, error) {
	if !fs.ValidPath(name) {
		return nil, &fs.PathError{Op: "open", Path: name, Err: fs.ErrInvalid}
	}
	if name == "." {
		return &treeDir{info: treeInfo{name: ".", mode: fs.ModeDir | 0o755, when: t.when}, tree: t.root, fs: t}, nil
	}
	e, err := t.root.FindEntry(name)
	if err != nil {
		return nil, &fs.PathError{Op: "open", Path: name, Err: fs.ErrNotExist}
	}
	return t.openEntry(name, e)
}

func (t *treeFS) openEntry(name string, e *object.TreeEntry) (fs.File, error) {
	info := treeInfo{name: path.Base(name), when: t.when}
	if e.Mode == filemode.Dir {
		sub, err := t.root.Tree(name)
		if err != nil {
			return nil, &fs.PathError{Op: "open", Path: name, Err: err}
		}
		info.mode = fs.ModeDir | 0o755
		return &treeDir{info: info, tree: sub, fs: t}, nil
	}
	f, err := t.root.TreeEntryFile(e)
	if err != nil {
		return nil, &fs.PathError{Op: "open", Path: name, Err: err}
	}
	rd, err := f.Reader()
	if err != nil {
		return nil, &fs.PathError{Op: "open", Path: name, Err: err}
	}
	data, err := io.ReadAll(rd)
	rd.Close()
	if err != nil {
		return nil, &fs.PathError{Op: "read", Path: name, Err: err}
	}
	info.size = int64(len(data))
	info.mode = 0o644
	if e.Mode == filemode.Executable {
		info.mode = 0o755
	}
	if e.Mode == filemode.Symlink {
		info.mode = fs.ModeSymlink | 0o777
	}
	return &treeFile{info: info, r: bytes.NewReader(data)}, nil
}

type treeInfo struct {
	name string
	size int64
	mode fs.FileMode
	when time.Time
}

func (i treeInfo) Name() string               { return i.name }
func (i treeInfo) Size() int64                { return i.size }
func (i treeInfo) Mode() fs.FileMode          { return i.mode }
func (i treeInfo) ModTime() time.Time         { return i.when }
func (i treeInfo) IsDir() bool                { return i.mode.IsDir() }
func (i treeInfo) Sys() any                   { return nil }
func (i treeInfo) Type() fs.FileMode          { return i.mode.Type() }
func (i treeInfo) Info() (fs.FileInfo, error) { return i, nil }

type treeFile struct {
	info treeInfo
	r    *bytes.Reader
}

func (f *treeFile) Stat() (fs.FileInfo, error) { return f.info, nil }
func (f *treeFile) Read(p []byte) (int, error) { return f.r.Read(p) }
func (f *treeFile) Close() error               { return nil }

type treeDir struct {
	info treeInfo
	tree *object.Tree
	fs   *treeFS
	pos  int
}

func (d *treeDir) Stat() (fs.FileInfo, error) { return d.info, nil }
func (d *treeDir) Read([]byte) (int, error) {
	return 0, &fs.PathError{Op: "read", Path: d.info.name, Err: fs.ErrInvalid}
}
func (d *treeDir) Close() error { return nil }

func (d *treeDir) ReadDir(n int) ([]fs.DirEntry, error) {
	var out []fs.DirEntry
	for d.pos < len(d.tree.Entries) && (n <= 0 || len(out) < n) {
		e := d.tree.Entries[d.pos]
		d.pos++
		i := treeInfo{name: e.Name, mode: 0o644, when: d.fs.when}
		switch e.Mode {
		case filemode.Dir:
			i.mode = fs.ModeDir | 0o755
		case filemode.Symlink:
			i.mode = fs.ModeSymlink | 0o777
		case filemode.Executable:
			i.mode = 0o755
		}
		out = append(out, i)
	}
	if n > 0 && len(out) == 0 {
		return nil, io.EOF
	}
	return out, nil
}
