package apply

import (
	"container/heap"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"sort"
	"strings"
	"time"
	"unicode"

	"github.com/bluekeyes/go-gitdiff/gitdiff"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/object"
	"github.com/go-git/go-git/v5/plumbing/storer"
	"github.com/go-git/go-git/v5/utils/diff"
	"github.com/sergi/go-diff/diffmatchpatch"
)

// The patch-id search: a patch merged and then changed by later commits
// no longer reverses cleanly on the base, but the commit that merged it
// is in the base's history with the same changes. Like git patch-id, the
// id ignores whitespace and line numbers; unlike it, it also ignores the
// context lines (a patch posted against an older tree is often merged
// onto other surroundings) and the order of the changed lines within a
// file (diff algorithms pair equal lines differently). A commit matches
// when it changes exactly the patch's files, each with the same lines
// removed and added.

// patchIDWindow is how long before the patch's date the search still
// looks: a patch is merged after it was written (git am keeps the mail's
// date as the author date), so older commits cannot be it.
const patchIDWindow = 48 * time.Hour

// patchIDMaxCommits bounds the walk (about a year of mainline).
const patchIDMaxCommits = 150000

// fileChanges is one file's removed and added lines, whitespace removed,
// sorted; lines that are only whitespace are left out.
func fileChanges(removed, added []string) string {
	norm := func(prefix string, lines []string) []string {
		var out []string
		for _, l := range lines {
			l = strings.Map(func(r rune) rune {
				if unicode.IsSpace(r) {
					return -1
				}
				return r
			}, l)
			if l != "" {
				out = append(out, prefix+l)
			}
		}
		sort.Strings(out)
		return out
	}
	return strings.Join(append(norm("-", removed), norm("+", added)...), "\n")
}

// patchIDOf combines per-file changes (path -> fileChanges) into the id.
func patchIDOf(files map[string]string) string {
	paths := make([]string, 0, len(files))
	for p := range files {
		paths = append(paths, p)
	}
	sort.Strings(paths)
	h := sha256.New()
	for _, p := range paths {
		fmt.Fprintf(h, "%s\x00%s\x00", p, files[p])
	}
	return hex.EncodeToString(h.Sum(nil))
}

// diffPatchID is the id of a parsed diff and the paths it changes; ok is
// false for what the search cannot compare (binary, mode-only, renames).
func diffPatchID(files []*gitdiff.File, traditional bool) (id string, paths []string, ok bool) {
	changes := map[string]string{}
	for _, f := range files {
		if f.IsBinary || f.IsCopy || f.IsRename || len(f.TextFragments) == 0 {
			return "", nil, false
		}
		name := f.NewName
		if f.IsDelete {
			name = f.OldName
		}
		if traditional {
			name = stripFirstComponent(name)
		}
		var removed, added []string
		for _, tf := range f.TextFragments {
			for _, l := range tf.Lines {
				switch l.Op {
				case gitdiff.OpDelete:
					removed = append(removed, strings.TrimSuffix(l.Line, "\n"))
				case gitdiff.OpAdd:
					added = append(added, strings.TrimSuffix(l.Line, "\n"))
				}
			}
		}
		changes[name] = fileChanges(removed, added)
		paths = append(paths, name)
	}
	return patchIDOf(changes), paths, true
}

// commitQueue orders commits newest (committer date) first, as git log.
type commitQueue []*object.Commit

func (q commitQueue) Len() int           { return len(q) }
func (q commitQueue) Less(i, j int) bool { return q[i].Committer.When.After(q[j].Committer.When) }
func (q commitQueue) Swap(i, j int)      { q[i], q[j] = q[j], q[i] }
func (q *commitQueue) Push(x any)        { *q = append(*q, x.(*object.Commit)) }
func (q *commitQueue) Pop() any {
	old := *q
	c := old[len(old)-1]
	*q = old[:len(old)-1]
	return c
}

// inHistory looks for a commit of base's history (base included) with the
// patch-id of c, newest first, back to patchIDWindow before c's date (or
// patchIDMaxCommits commits). It returns how the patch was recognised, or
// "".
func inHistory(ctx context.Context, st storer.EncodedObjectStorer, base *object.Commit, c Commit) string {
	files, _, err := gitdiff.Parse(strings.NewReader(c.Diff))
	if err != nil || len(files) == 0 {
		return ""
	}
	traditional := !strings.HasPrefix(c.Diff, "diff --git ") && !strings.Contains(c.Diff, "\ndiff --git ")
	want, paths, ok := diffPatchID(files, traditional)
	if !ok {
		return ""
	}
	var cutoff time.Time
	if !c.AuthorDate.IsZero() {
		cutoff = c.AuthorDate.Add(-patchIDWindow)
	}
	seen := map[plumbing.Hash]bool{base.Hash: true}
	q := &commitQueue{base}
	for n := 0; q.Len() > 0 && n < patchIDMaxCommits; n++ {
		if n%1000 == 0 && ctx.Err() != nil {
			return ""
		}
		cm := heap.Pop(q).(*object.Commit)
		if !cutoff.IsZero() && cm.Committer.When.Before(cutoff) {
			break // the newest left is older than the patch
		}
		for _, ph := range cm.ParentHashes {
			if seen[ph] {
				continue
			}
			seen[ph] = true
			if p, err := object.GetCommit(st, ph); err == nil {
				heap.Push(q, p)
			}
		}
		if len(cm.ParentHashes) != 1 { // root and merge commits: no patch-id, as in git
			continue
		}
		if id, ok := commitPatchID(st, cm, paths); ok && id == want {
			return fmt.Sprintf("commit %s in its history has the same patch-id (%s)", cm.Hash.String()[:12], firstLine(cm.Message))
		}
	}
	return ""
}

// commitPatchID is the patch-id of commit cm against its parent when it
// changes every one of paths and nothing else; ok is false otherwise.
func commitPatchID(st storer.EncodedObjectStorer, cm *object.Commit, paths []string) (string, bool) {
	tree, err := object.GetTree(st, cm.TreeHash)
	if err != nil {
		return "", false
	}
	parent, err := object.GetCommit(st, cm.ParentHashes[0])
	if err != nil {
		return "", false
	}
	ptree, err := object.GetTree(st, parent.TreeHash)
	if err != nil {
		return "", false
	}
	// Cheap first: each path must differ between parent and commit (most
	// commits differ only outside the first directory of the path).
	for _, p := range paths {
		if sameAt(st, ptree, tree, p) {
			return "", false
		}
	}
	changed, err := object.DiffTree(ptree, tree)
	if err != nil || len(changed) != len(paths) {
		return "", false
	}
	changes := map[string]string{}
	for _, p := range paths {
		before, after := blobText(ptree, p), blobText(tree, p)
		var removed, added []string
		for _, d := range diff.Do(before, after) {
			lines := strings.Split(strings.TrimSuffix(d.Text, "\n"), "\n")
			switch d.Type {
			case diffmatchpatch.DiffDelete:
				removed = append(removed, lines...)
			case diffmatchpatch.DiffInsert:
				added = append(added, lines...)
			}
		}
		changes[p] = fileChanges(removed, added)
	}
	return patchIDOf(changes), true
}

// sameAt reports whether trees a and b have the same entry at path,
// descending only while the directories on the way differ.
func sameAt(st storer.EncodedObjectStorer, a, b *object.Tree, path string) bool {
	parts := strings.Split(path, "/")
	for i, name := range parts {
		ea, erra := a.FindEntry(name)
		eb, errb := b.FindEntry(name)
		switch {
		case erra != nil || errb != nil:
			return erra != nil && errb != nil
		case ea.Hash == eb.Hash:
			return true
		case i == len(parts)-1:
			return false
		}
		var err error
		if a, err = object.GetTree(st, ea.Hash); err != nil {
			return false
		}
		if b, err = object.GetTree(st, eb.Hash); err != nil {
			return false
		}
	}
	return false
}

// blobText is the content of the file at path in t, "" when absent.
func blobText(t *object.Tree, path string) string {
	f, err := t.File(path)
	if err != nil {
		return ""
	}
	s, err := f.Contents()
	if err != nil {
		return ""
	}
	return s
}
