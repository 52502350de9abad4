package apply

import (
	"context"
	"fmt"
	"strings"

	"github.com/bluekeyes/go-gitdiff/gitdiff"
	"github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/object"
	"github.com/go-git/go-git/v5/plumbing/storer"
	"github.com/go-git/go-git/v5/storage/memory"

	"github.com/patcheval/patcheval/internal/fail"
	"github.com/patcheval/patcheval/internal/gittree"
)

// RevertHint points from a patch already in the base to the experiment
// that measures it there: its revert.
const RevertHint = "to measure it on this base, pass --revert-if-merged (lore --pipeline, submit; the API's revert_if_merged: this base against this base with the series reverted), or pick a base before it with --base"

// Already is a patch of the series that the base already has.
type Already struct {
	// Patch is its 1-based position in the series, Label its label.
	Patch int    `json:"patch"`
	Label string `json:"label"`
	// How says how it was recognised: "the reverse applies cleanly", or
	// "commit 0123456789ab in its history has the same patch-id
	// (subject)" when it was merged and later changed (patchid.go).
	How string `json:"how"`
}

// AlreadyError says that every patch of the series is already in the
// base, so there is nothing to apply. It is bad input (exit 2): the
// series is fine, the base is the wrong one to evaluate it as a patch.
type AlreadyError struct {
	Base    string    `json:"base"`
	Patches []Already `json:"patches"`
}

func (e *AlreadyError) Error() string {
	var parts []string
	for _, a := range e.Patches {
		parts = append(parts, alreadyLine(a, e.Base))
	}
	return strings.Join(parts, "; ") + "; nothing to apply: " + RevertHint
}

// FailKind classifies it as bad input.
func (e *AlreadyError) FailKind() fail.Kind { return fail.KindInput }

// alreadyLine is "1/1 is already in v7.2.13: the reverse applies cleanly
// (subject)".
func alreadyLine(a Already, base string) string {
	num, subject, _ := strings.Cut(a.Label, " ")
	s := fmt.Sprintf("%s is already in %s: %s", num, base, a.How)
	if subject != "" {
		s += " (" + subject + ")"
	}
	return s
}

// alreadyIn reports how patch c is already in the tree of parent: its
// reverse applies there cleanly (exact context, as `git apply -R
// --check`). "" when it is not, or when the patch cannot be reversed
// (binary data, copies, a diff that does not parse).
func alreadyIn(st storer.EncodedObjectStorer, parent *object.Commit, c Commit) string {
	files, _, err := gitdiff.Parse(strings.NewReader(c.Diff))
	if err != nil || len(files) == 0 {
		return ""
	}
	traditional := !strings.HasPrefix(c.Diff, "diff --git ") && !strings.Contains(c.Diff, "\ndiff --git ")
	ed := newTreeEdit(st, parent.TreeHash)
	for _, f := range files {
		if traditional {
			f.OldName, f.NewName = stripFirstComponent(f.OldName), stripFirstComponent(f.NewName)
		}
		r := reverseFile(f)
		if r == nil {
			return ""
		}
		if _, err := ed.applyFile(r, 0); err != nil {
			return ""
		}
	}
	return "the reverse applies cleanly"
}

// reverseFile is the diff that undoes f (git apply -R), or nil when f
// cannot be undone from its text alone.
func reverseFile(f *gitdiff.File) *gitdiff.File {
	if f.IsBinary || f.IsCopy {
		return nil
	}
	r := &gitdiff.File{
		OldName: f.NewName, NewName: f.OldName,
		IsNew: f.IsDelete, IsDelete: f.IsNew, IsRename: f.IsRename,
		OldMode: f.NewMode, NewMode: f.OldMode,
		OldOIDPrefix: f.NewOIDPrefix, NewOIDPrefix: f.OldOIDPrefix,
	}
	for _, tf := range f.TextFragments {
		rf := &gitdiff.TextFragment{
			Comment:     tf.Comment,
			OldPosition: tf.NewPosition, OldLines: tf.NewLines,
			NewPosition: tf.OldPosition, NewLines: tf.OldLines,
			LinesAdded: tf.LinesDeleted, LinesDeleted: tf.LinesAdded,
			LeadingContext: tf.LeadingContext, TrailingContext: tf.TrailingContext,
		}
		for _, l := range tf.Lines {
			switch l.Op {
			case gitdiff.OpAdd:
				l.Op = gitdiff.OpDelete
			case gitdiff.OpDelete:
				l.Op = gitdiff.OpAdd
			}
			rf.Lines = append(rf.Lines, l)
		}
		r.TextFragments = append(r.TextFragments, rf)
	}
	return r
}

// baseName names the base for people: the --base given, else a tag that
// points at it, else its short hash.
func baseName(repo *git.Repository, base *object.Commit, opt Options) string {
	if opt.Base != "" {
		return opt.Base
	}
	name := base.Hash.String()[:12]
	tags, err := repo.Tags()
	if err != nil {
		return name
	}
	_ = tags.ForEach(func(ref *plumbing.Reference) error {
		h := ref.Hash()
		if t, err := repo.TagObject(h); err == nil {
			h = t.Target
		}
		if h == base.Hash {
			name = ref.Name().Short()
			return storer.ErrStop
		}
		return nil
	})
	return name
}

// InBase reports whether every patch of commits is already in the
// commit base of the repository at repoPath, as Apply would find it (a
// patch that does not apply and whose reverse applies cleanly): the
// AlreadyError Apply would return, or nil when some patch is not in the
// base. Nothing is written.
func InBase(ctx context.Context, repoPath, base string, commits []Commit) (*AlreadyError, error) {
	if len(commits) == 0 {
		return nil, nil
	}
	repo, st, _, err := gittree.Open(repoPath, 32)
	if err != nil {
		return nil, err
	}
	defer st.Close()
	parent, err := gittree.ResolveIn(repo, base)
	if err != nil {
		return nil, fail.Inputf("base %q: not in the tree", base)
	}
	ov := &overlay{EncodedObjectStorer: st, mem: memory.NewStorage()}
	sig := object.Signature{Name: "patcheval", Email: "patcheval@localhost", When: parent.Committer.When}
	ae := &AlreadyError{Base: baseName(repo, parent, Options{})}
	for i, c := range commits {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		if _, _, err := applyOne(ov, parent, c, sig, 0); err == nil {
			return nil, nil // it applies: not in the base
		}
		how := alreadyIn(ov, parent, c)
		if how == "" {
			return nil, nil
		}
		ae.Patches = append(ae.Patches, Already{Patch: i + 1, Label: c.Label, How: how})
	}
	return ae, nil
}

// Lines are the per-patch sentences ("1/1 is already in v7.2.13: the
// reverse applies cleanly (subject)").
func (e *AlreadyError) Lines() []string {
	var out []string
	for _, a := range e.Patches {
		out = append(out, alreadyLine(a, e.Base))
	}
	return out
}
