package apply

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/bluekeyes/go-gitdiff/gitdiff"
	git "github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/object"
	"github.com/go-git/go-git/v5/plumbing/storer"
	"github.com/go-git/go-git/v5/storage/memory"
	"github.com/go-git/go-git/v5/utils/merkletrie"

	"github.com/patcheval/patcheval/internal/fail"
	"github.com/patcheval/patcheval/internal/gittree"
)

// MaxRevert bounds the commits one revert list (a range A..B) may name.
const MaxRevert = 1000

// Undo is one change to revert: a commit of the tree (Commit) or a
// patch's diff (Diff: a patch of a series that the base already has).
type Undo struct {
	// Label names it in messages: "0123456789ab rcu: Reduce ..." or
	// "1/1 rcu: Reduce ...".
	Label   string `json:"label"`
	Commit  string `json:"commit,omitempty"`
	Subject string `json:"subject"`
	Diff    string `json:"-"`
	// MessageID is the patch's mail (for a Diff).
	MessageID string `json:"message_id,omitempty"`
}

// Reverted is one revert commit written.
type Reverted struct {
	Label string `json:"label"`
	// Original is the commit reverted ("" for a patch's diff).
	Original string `json:"original,omitempty"`
	Hash     string `json:"commit"`
	Tree     string `json:"tree"`
}

// RevertResult says what Revert wrote.
type RevertResult struct {
	Onto    string     `json:"onto"`
	Head    string     `json:"head"`
	Branch  string     `json:"branch,omitempty"`
	Commits []Reverted `json:"commits"`
}

// Conflict is one file (and hunk) a revert could not undo.
type Conflict struct {
	File       string `json:"file"`
	Hunk       int    `json:"hunk,omitempty"`
	HunkHeader string `json:"hunk_header,omitempty"`
	Reason     string `json:"reason"`
}

// RevertConflict says that a revert does not apply to its base: which
// change, and every file and hunk that conflicts. It is bad input (exit
// 2): nothing was written.
type RevertConflict struct {
	Label     string     `json:"label"`
	Onto      string     `json:"onto"`
	Conflicts []Conflict `json:"conflicts"`
}

// Error is one line: the change, the base, each file and hunk.
func (e *RevertConflict) Error() string {
	var parts []string
	for _, c := range e.Conflicts {
		s := c.File
		if c.Hunk > 0 {
			s += fmt.Sprintf(" hunk #%d %s", c.Hunk, c.HunkHeader)
		} else if c.Reason != "" {
			s += " (" + firstLine(c.Reason) + ")"
		}
		parts = append(parts, s)
	}
	return fmt.Sprintf("revert of %s conflicts on %s: %s; nothing written", e.Label, e.Onto, strings.Join(parts, ", "))
}

// Detail is every conflict in full (what the reverse expects, what the
// file has).
func (e *RevertConflict) Detail() string {
	var b strings.Builder
	for _, c := range e.Conflicts {
		b.WriteString(c.File + ": " + c.Reason + "\n")
	}
	return b.String()
}

// FailKind classifies a conflicting revert as bad input.
func (e *RevertConflict) FailKind() fail.Kind { return fail.KindInput }

// ResolveRevert turns revert specs into the commits to undo, newest
// first: a commit ("0123abc", "v7.2.13~3") or a range "A..B" (the commits
// of B's first-parent line down to A, like git rev-list A..B on a linear
// history). A merge commit, a root commit, an unknown revision or more
// than MaxRevert commits is bad input naming the spec.
func ResolveRevert(repoPath string, specs []string) ([]Undo, error) {
	repo, st, _, err := gittree.Open(repoPath, 16)
	if err != nil {
		return nil, err
	}
	defer st.Close()
	var out []Undo
	for _, spec := range specs {
		from, to, isRange := strings.Cut(spec, "..")
		if !isRange {
			c, err := revertCommit(repo, spec, spec)
			if err != nil {
				return nil, err
			}
			out = append(out, undoOf(c))
			continue
		}
		if from == "" || to == "" || strings.HasPrefix(to, ".") {
			return nil, fail.Inputf("revert %q: want A..B with both ends (A..B reverts the commits after A up to B)", spec)
		}
		a, err := gittree.ResolveIn(repo, from)
		if err != nil {
			return nil, fail.Inputf("revert %q: %q is not in the tree", spec, from)
		}
		h, err := gittree.ResolveIn(repo, to)
		if err != nil {
			return nil, fail.Inputf("revert %q: %q is not in the tree", spec, to)
		}
		n := 0
		for c := h; c.Hash != a.Hash; n++ {
			if n >= MaxRevert {
				return nil, fail.Inputf("revert %q: more than %d commits (or %s is not an ancestor of %s)", spec, MaxRevert, from, to)
			}
			if c.NumParents() == 0 {
				return nil, fail.Inputf("revert %q: %s is not an ancestor of %s", spec, from, to)
			}
			if _, err := revertCommit(repo, c.Hash.String(), spec); err != nil {
				return nil, err
			}
			out = append(out, undoOf(c))
			if c, err = c.Parent(0); err != nil {
				return nil, fail.Inputf("revert %q: %s is not an ancestor of %s", spec, from, to)
			}
		}
		if n == 0 {
			return nil, fail.Inputf("revert %q: the range is empty", spec)
		}
	}
	return out, nil
}

// revertCommit resolves rev to a commit that can be reverted alone.
func revertCommit(repo *git.Repository, rev, spec string) (*object.Commit, error) {
	c, err := gittree.ResolveIn(repo, rev)
	if err != nil {
		return nil, fail.Inputf("revert %q: %q is not in the tree (give a commit, A..B or msgid:<id>)", spec, rev)
	}
	switch c.NumParents() {
	case 0:
		return nil, fail.Inputf("revert %q: %s is a root commit (it has nothing to revert to)", spec, gittree.ShortHash(c.Hash))
	case 1:
		return c, nil
	}
	return nil, fail.Inputf("revert %q: %s is a merge commit; name the commits it merged (A..B)", spec, gittree.ShortHash(c.Hash))
}

func undoOf(c *object.Commit) Undo {
	s := firstLine(c.Message)
	return Undo{Label: gittree.ShortHash(c.Hash) + " " + s, Commit: c.Hash.String(), Subject: s}
}

// RevertOptions steer Revert.
type RevertOptions struct {
	// OntoName names the base in messages ("v7.2.13"); default its short
	// hash.
	OntoName string
	// Branch, when set, is pointed at the last revert commit.
	Branch string
}

// Revert writes one revert commit per change in undo (in that order:
// newest first) on top of the commit onto, at object level like Apply:
// each file the change touched is set back to what it was before the
// change when the base still has the change's version of it, else the
// change's diff is undone hunk by hunk (exact context). The commits are
// deterministic (identity "patcheval", the date of onto), so reverting
// the same changes again gives the same hashes. When anything conflicts,
// nothing is written (no object, no ref) and the error is a
// *RevertConflict naming every file and hunk.
func Revert(ctx context.Context, repoPath, onto string, undo []Undo, opt RevertOptions) (*RevertResult, error) {
	if len(undo) == 0 {
		return nil, fail.Inputf("nothing to revert")
	}
	if opt.Branch != "" {
		if err := checkBranchName(opt.Branch); err != nil {
			return nil, err
		}
	}
	repo, st, _, err := gittree.Open(repoPath, 32)
	if err != nil {
		return nil, err
	}
	defer st.Close()
	base, err := gittree.ResolveIn(repo, onto)
	if err != nil {
		return nil, fail.Inputf("revert onto %q: not in the tree", onto)
	}
	name := opt.OntoName
	if name == "" {
		name = gittree.ShortHash(base.Hash)
	}
	ov := &overlay{EncodedObjectStorer: st, mem: memory.NewStorage()}
	sig := object.Signature{Name: "patcheval", Email: "patcheval@localhost", When: base.Committer.When}
	res := &RevertResult{Onto: base.Hash.String()}
	parent := base
	for _, u := range undo {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		ed := newTreeEdit(ov, parent.TreeHash)
		conflicts, err := undoOne(ov, ed, u)
		if err != nil {
			return nil, fmt.Errorf("revert of %s: %w", u.Label, err)
		}
		if len(conflicts) > 0 {
			return nil, &RevertConflict{Label: u.Label, Onto: name, Conflicts: conflicts}
		}
		tree, err := ed.write()
		if err != nil {
			return nil, err
		}
		msg := fmt.Sprintf("Revert %q\n\nThis reverts commit %s.\n", u.Subject, u.Commit)
		if u.Commit == "" {
			msg = fmt.Sprintf("Revert %q\n\nThis reverts patch %s", u.Subject, strings.SplitN(u.Label, " ", 2)[0])
			if u.MessageID != "" {
				msg += " <" + u.MessageID + ">"
			}
			msg += ", which " + name + " already has.\n"
		}
		c := &object.Commit{Author: sig, Committer: sig, Message: msg, TreeHash: tree, ParentHashes: []plumbing.Hash{parent.Hash}}
		h, err := storeObject(ov, c)
		if err != nil {
			return nil, err
		}
		if parent, err = object.GetCommit(ov, h); err != nil {
			return nil, fail.Infraf("read back commit %s: %v", h, err)
		}
		res.Commits = append(res.Commits, Reverted{Label: u.Label, Original: u.Commit, Hash: h.String(), Tree: tree.String()})
	}
	if err := ov.flush(); err != nil {
		return nil, err
	}
	res.Head = parent.Hash.String()
	if opt.Branch != "" {
		ref := plumbing.NewHashReference(plumbing.NewBranchReferenceName(opt.Branch), parent.Hash)
		if err := st.SetReference(ref); err != nil {
			return nil, fail.Infraf("write branch %s: %v", opt.Branch, err)
		}
		res.Branch = opt.Branch
	}
	return res, nil
}

// WriteBranch points branch (without refs/heads/) of the repository at
// repoPath at commit head: a Revert's result, once every revert of an
// evaluation succeeded.
func WriteBranch(repoPath, branch, head string) error {
	if err := checkBranchName(branch); err != nil {
		return err
	}
	_, st, _, err := gittree.Open(repoPath, 1)
	if err != nil {
		return err
	}
	defer st.Close()
	ref := plumbing.NewHashReference(plumbing.NewBranchReferenceName(branch), plumbing.NewHash(head))
	if err := st.SetReference(ref); err != nil {
		return fail.Infraf("write branch %s: %v", branch, err)
	}
	return nil
}

// undoOne undoes u in ed and returns the files that conflict.
func undoOne(st storer.EncodedObjectStorer, ed *treeEdit, u Undo) ([]Conflict, error) {
	if u.Commit == "" {
		files, _, err := gitdiff.Parse(strings.NewReader(u.Diff))
		if err != nil || len(files) == 0 {
			return nil, fail.Inputf("the patch's diff does not parse")
		}
		traditional := !strings.HasPrefix(u.Diff, "diff --git ") && !strings.Contains(u.Diff, "\ndiff --git ")
		var out []Conflict
		for _, f := range files {
			if traditional {
				f.OldName, f.NewName = stripFirstComponent(f.OldName), stripFirstComponent(f.NewName)
			}
			if c := undoFile(ed, f); c != nil {
				out = append(out, *c)
			}
		}
		return out, nil
	}
	c, err := object.GetCommit(st, plumbing.NewHash(u.Commit))
	if err != nil {
		return nil, fail.Infraf("read commit %s: %v", u.Commit, err)
	}
	p, err := c.Parent(0)
	if err != nil {
		return nil, fail.Infraf("read the parent of %s: %v", u.Commit, err)
	}
	from, err := p.Tree()
	if err != nil {
		return nil, fail.Infraf("read tree of %s: %v", p.Hash, err)
	}
	to, err := c.Tree()
	if err != nil {
		return nil, fail.Infraf("read tree of %s: %v", c.Hash, err)
	}
	changes, err := object.DiffTree(from, to)
	if err != nil {
		return nil, fail.Infraf("diff %s: %v", u.Commit, err)
	}
	var out []Conflict
	for _, ch := range changes {
		conflict, err := undoChange(ed, ch)
		if err != nil {
			return nil, err
		}
		if conflict != nil {
			out = append(out, *conflict)
		}
	}
	return out, nil
}

// undoChange undoes one file's change of a commit: exactly when the tree
// still has the commit's version, else by its reversed diff.
func undoChange(ed *treeEdit, ch *object.Change) (*Conflict, error) {
	action, err := ch.Action()
	if err != nil {
		return nil, fail.Infraf("%v", err)
	}
	path := ch.To.Name
	if action == merkletrie.Delete {
		path = ch.From.Name
	}
	cur, err := ed.lookup(path)
	if err != nil {
		return &Conflict{File: path, Reason: err.Error()}, nil
	}
	switch action {
	case merkletrie.Insert:
		if cur == nil || cur.hash != ch.To.TreeEntry.Hash {
			return &Conflict{File: path, Reason: "the change added it, and the tree's version differs from the one it added"}, nil
		}
		ed.changes[path] = &entry{del: true}
		return nil, nil
	case merkletrie.Delete:
		if cur != nil {
			return &Conflict{File: path, Reason: "the change deleted it, and the tree has it again"}, nil
		}
		ed.changes[path] = &entry{mode: ch.From.TreeEntry.Mode, hash: ch.From.TreeEntry.Hash}
		return nil, nil
	}
	if cur != nil && cur.hash == ch.To.TreeEntry.Hash && cur.mode == ch.To.TreeEntry.Mode {
		ed.changes[path] = &entry{mode: ch.From.TreeEntry.Mode, hash: ch.From.TreeEntry.Hash}
		return nil, nil
	}
	patch, err := ch.Patch()
	if err != nil {
		return nil, fail.Infraf("diff %s: %v", path, err)
	}
	files, _, err := gitdiff.Parse(strings.NewReader(patch.String()))
	if err != nil || len(files) != 1 {
		return &Conflict{File: path, Reason: "the tree's version differs from the change's, and its diff cannot be undone hunk by hunk"}, nil
	}
	return undoFile(ed, files[0]), nil
}

// undoFile applies f reversed to ed; a conflict names its file and hunk.
func undoFile(ed *treeEdit, f *gitdiff.File) *Conflict {
	name := f.NewName
	if name == "" {
		name = f.OldName
	}
	r := reverseFile(f)
	if r == nil {
		return &Conflict{File: name, Reason: "a binary or copied file cannot be undone from the patch's text"}
	}
	if _, err := ed.applyFile(r, 0); err != nil {
		c := &Conflict{File: name, Reason: err.Error()}
		var he *hunkError
		if errors.As(err, &he) {
			c.Hunk, c.HunkHeader = he.Index, strings.TrimSpace(he.Header)
		}
		return c
	}
	return nil
}

// overlay keeps the objects a revert writes in memory until every change
// reverted cleanly (flush), so that a conflict leaves the repository as
// it was.
type overlay struct {
	storer.EncodedObjectStorer
	mem *memory.Storage
}

func (o *overlay) NewEncodedObject() plumbing.EncodedObject { return o.mem.NewEncodedObject() }

func (o *overlay) SetEncodedObject(obj plumbing.EncodedObject) (plumbing.Hash, error) {
	return o.mem.SetEncodedObject(obj)
}

func (o *overlay) EncodedObject(t plumbing.ObjectType, h plumbing.Hash) (plumbing.EncodedObject, error) {
	if obj, err := o.mem.EncodedObject(t, h); err == nil {
		return obj, nil
	}
	return o.EncodedObjectStorer.EncodedObject(t, h)
}

func (o *overlay) HasEncodedObject(h plumbing.Hash) error {
	if o.mem.HasEncodedObject(h) == nil {
		return nil
	}
	return o.EncodedObjectStorer.HasEncodedObject(h)
}

func (o *overlay) EncodedObjectSize(h plumbing.Hash) (int64, error) {
	if n, err := o.mem.EncodedObjectSize(h); err == nil {
		return n, nil
	}
	return o.EncodedObjectStorer.EncodedObjectSize(h)
}

// flush writes the kept objects into the repository.
func (o *overlay) flush() error {
	it, err := o.mem.IterEncodedObjects(plumbing.AnyObject)
	if err != nil {
		return fail.Infraf("write objects: %v", err)
	}
	return it.ForEach(func(obj plumbing.EncodedObject) error {
		if o.EncodedObjectStorer.HasEncodedObject(obj.Hash()) == nil {
			return nil
		}
		if _, err := o.EncodedObjectStorer.SetEncodedObject(obj); err != nil {
			return fail.Infraf("write object %s: %v", obj.Hash(), err)
		}
		return nil
	})
}
