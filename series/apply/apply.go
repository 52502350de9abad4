// Package apply puts a patch Series onto a kernel git tree at object level.
//
// Apply reads only the blobs a patch touches, places every hunk itself
// (exact position, then an outward search for the context like git apply,
// then optional fuzz), and writes blobs, trees and commits straight into the
// repository's object store with go-git: the user's worktree, index and HEAD
// are never touched, only the result branch is written (and only when every
// patch applied). Opening the tree and resolving revisions is
// internal/gittree's; so is materialising a commit into a directory.
package apply

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"sort"
	"strings"
	"time"

	"github.com/bluekeyes/go-gitdiff/gitdiff"
	git "github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/config"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/filemode"
	"github.com/go-git/go-git/v5/plumbing/object"
	"github.com/go-git/go-git/v5/plumbing/storer"

	"github.com/patcheval/patcheval/internal/fail"
	"github.com/patcheval/patcheval/internal/gittree"
	"github.com/patcheval/patcheval/mbox"
	"github.com/patcheval/patcheval/series"
)

// Commit is one patch to turn into a commit.
type Commit struct {
	// Label names the patch in messages: "1/2 subject".
	Label      string       `json:"label"`
	Author     mbox.Address `json:"author"`
	AuthorDate time.Time    `json:"author_date"`
	// Message is the whole commit message (title, body, trailers).
	Message string `json:"-"`
	// Diff is the patch text (git diff format).
	Diff string `json:"-"`
	// MessageID of the mail, for the 3-way fallback's mbox (optional).
	MessageID string `json:"message_id,omitempty"`
}

// Options steer Apply.
type Options struct {
	// Base is the user's --base (tag, branch, commit): it wins.
	Base string
	// SeriesBase is the series' base-commit: used when the tree has it.
	SeriesBase string
	// PipelineBase is the pipeline's [tree] base: used when neither of
	// the above chose (gittree.BaseChoice has the rule).
	PipelineBase string
	// Branch is the branch to write (without refs/heads/); default
	// "patcheval/apply".
	Branch string
	// Fuzz lets a hunk apply with up to Fuzz context lines ignored at each
	// end (0: exact context, like git am).
	Fuzz int
	// Committer identity; default user.name/user.email from the
	// repository's git config, else "patcheval".
	CommitterName, CommitterEmail string
	// CommitterDate defaults to now.
	CommitterDate time.Time
	// ThreeWay falls back to `git am -3` (git CLI) when a patch does not
	// apply directly.
	ThreeWay bool
}

// AppliedCommit is one commit written.
type AppliedCommit struct {
	Label string `json:"label"`
	// Subject is the commit's title (its message's first line).
	Subject string `json:"subject"`
	Hash    string `json:"commit"`
	Tree    string `json:"tree"`
	// Notes tell about hunks applied at an offset or with fuzz.
	Notes []string `json:"notes,omitempty"`
}

// Result says what Apply did.
type Result struct {
	Base       string `json:"base"`
	BaseReason string `json:"base_reason"`
	Branch     string `json:"branch"`
	// Head is the last commit (the branch tip).
	Head string `json:"head"`
	// BranchUpdated is false when the branch already held this result.
	BranchUpdated bool `json:"branch_updated"`
	// BranchPrevious is what the branch pointed at before ("" if new).
	BranchPrevious string          `json:"branch_previous,omitempty"`
	Commits        []AppliedCommit `json:"commits"`
	// ThreeWay is set when the series was applied by `git am -3`.
	ThreeWay bool `json:"three_way,omitempty"`
	// Already are the patches the base already has (not applied; each
	// also has a note).
	Already []Already `json:"already,omitempty"`
	// Notes are remarks (3-way fallback used, ...).
	Notes []string `json:"notes,omitempty"`
}

// FromSeries turns the patches of a resolved Series into Commits, with the
// commit messages git am would write (collected trailers and the Link:
// trailer per am).
func FromSeries(s *series.Series, am series.AMOptions) []Commit {
	var out []Commit
	total := len(s.Patches) + len(s.Missing)
	for i, p := range s.Patches {
		n, t := p.Subject.Index, p.Subject.Total
		if n == 0 {
			n, t = i+1, total
		}
		c := Commit{
			Label:      fmt.Sprintf("%d/%d %s", n, t, p.Subject.Title),
			Author:     p.Author,
			AuthorDate: p.Date,
			Message:    p.CommitMessage(am),
			Diff:       p.Diff,
		}
		if p.Msg != nil {
			c.MessageID = p.Msg.PublicID()
		}
		out = append(out, c)
	}
	return out
}

// Apply writes commits on top of the chosen base as objects in the
// repository at repoPath and points refs/heads/<Branch> at the last one.
// The worktree, index and HEAD are not touched. When a patch does not
// apply, no ref is written (only loose objects may remain) and the error
// (fail.Failed) names the patch, the file, the hunk and its context.
func Apply(ctx context.Context, repoPath string, commits []Commit, opt Options) (*Result, error) {
	if len(commits) == 0 {
		return nil, fail.Inputf("nothing to apply: the series has no patches")
	}
	repo, st, dirs, err := gittree.Open(repoPath, 32)
	if err != nil {
		return nil, err
	}
	defer st.Close()
	a := &applying{ctx: ctx, repo: repo, st: st, dirs: dirs, opt: opt}
	if err := a.checkBranch(); err != nil {
		return nil, err
	}
	a.res = &Result{Branch: a.branch}
	if err := a.pickBase(); err != nil {
		return nil, err
	}
	a.setCommitter()
	applyErr, err := a.applyDirectly(commits)
	if err != nil {
		return nil, err
	}
	if applyErr == nil && len(a.res.Commits) == 0 {
		return nil, &AlreadyError{Base: baseName(repo, a.base, opt), Patches: a.res.Already}
	}
	if applyErr != nil {
		if err := a.applyThreeWay(commits, applyErr); err != nil {
			return nil, err
		}
	}
	return a.writeBranch()
}

// applying is the state of one Apply, filled step by step.
type applying struct {
	ctx  context.Context
	repo *git.Repository
	st   *gittree.Storage
	dirs gittree.Dirs
	opt  Options

	branch  string
	refName plumbing.ReferenceName
	res     *Result

	base      *object.Commit
	reason    string // why base was chosen
	committer object.Signature
	parent    *object.Commit // the last commit written
}

// checkBranch names the branch to write (opt.Branch, or
// patcheval/apply) and refuses a bad name or a branch checked out in the
// worktree.
func (a *applying) checkBranch() error {
	branch := a.opt.Branch
	if branch == "" {
		branch = "patcheval/apply"
	}
	a.branch = branch
	a.refName = plumbing.NewBranchReferenceName(branch)
	if err := checkBranchName(branch); err != nil {
		return err
	}
	if !a.dirs.Bare() {
		if h, err := a.st.Reference(plumbing.HEAD); err == nil && h.Type() == plumbing.SymbolicReference && h.Target() == a.refName {
			return fail.Inputf("branch %s is checked out in %s; Apply does not touch worktrees: pick another --branch", branch, a.dirs.WorkTree)
		}
	}
	return nil
}

// pickBase picks the base (chooseBase) and records it and why.
func (a *applying) pickBase() error {
	base, reason, err := chooseBase(a.repo, a.opt)
	if err != nil {
		return err
	}
	a.base, a.reason = base, reason
	a.res.Base, a.res.BaseReason = base.Hash.String(), reason
	return nil
}

// setCommitter is the options' committer, with the repository's
// identity for what they leave out and now for no date.
func (a *applying) setCommitter() {
	opt := a.opt
	committer := object.Signature{Name: opt.CommitterName, Email: opt.CommitterEmail, When: opt.CommitterDate}
	if committer.Name == "" || committer.Email == "" {
		n, e := configIdentity(a.repo)
		if committer.Name == "" {
			committer.Name = n
		}
		if committer.Email == "" {
			committer.Email = e
		}
	}
	if committer.When.IsZero() {
		committer.When = time.Now()
	}
	a.committer = committer
}

// applyDirectly applies the commits one by one on the base; a patch the
// base already has is skipped with a note. It stops at the first patch
// that does not apply, its Failure returned (an error when the patch is
// no valid diff, or on anything else than a patch at fault).
func (a *applying) applyDirectly(commits []Commit) (*Failure, error) {
	st, res := a.st, a.res
	a.parent = a.base
	for i, c := range commits {
		if err := a.ctx.Err(); err != nil {
			return nil, err
		}
		ac, next, err := applyOne(st, a.parent, c, a.committer, a.opt.Fuzz)
		if err != nil {
			kind := fail.KindOf(err)
			if kind != fail.KindInput && kind != fail.KindFailed && !errors.As(err, new(*hunkError)) {
				return nil, fmt.Errorf("patch %s: %w", c.Label, err)
			}
			if kind != fail.KindInput {
				how := alreadyIn(st, a.parent, c)
				if how == "" {
					how = inHistory(a.ctx, st, a.parent, c)
				}
				if how != "" {
					// Not a failure to apply: the base has it.
					al := Already{Patch: i + 1, Label: c.Label, How: how}
					res.Already = append(res.Already, al)
					res.Notes = append(res.Notes, alreadyLine(al, baseName(a.repo, a.base, a.opt))+"; not applied: "+RevertHint)
					continue
				}
			}
			applyErr := newFailure(i, c, err, a.base, a.reason, len(res.Commits))
			if kind == fail.KindInput {
				applyErr.kind = fail.KindInput
				return nil, applyErr
			}
			return applyErr, nil
		}
		res.Commits = append(res.Commits, *ac)
		a.parent = next
	}
	return nil, nil
}

// applyThreeWay applies the commits (those the base has left out) again
// with git am -3 after applyErr, when opt.ThreeWay; otherwise, or when
// that fails too, the error is applyErr.
func (a *applying) applyThreeWay(commits []Commit, applyErr *Failure) error {
	res := a.res
	if !a.opt.ThreeWay {
		applyErr.hint = "nothing written: fix the patch, pick another --base, or try --3way"
		return applyErr
	}
	res.Commits = nil
	if len(res.Already) > 0 {
		skip := map[int]bool{}
		for _, al := range res.Already {
			skip[al.Patch-1] = true
		}
		var rest []Commit
		for i, c := range commits {
			if !skip[i] {
				rest = append(rest, c)
			}
		}
		commits = rest
	}
	commitsHashes, err := threeWay(a.ctx, a.dirs, a.base.Hash, commits, a.committer)
	if err != nil {
		applyErr.ThreeWay = err.Error()
		return applyErr
	}
	res.ThreeWay = true
	res.Notes = append(res.Notes, fmt.Sprintf("direct apply failed (%v); applied with git am -3", firstLine(applyErr.Error())))
	for i, h := range commitsHashes {
		c, err := object.GetCommit(a.st, h)
		if err != nil {
			return fail.Infraf("--3way: read commit %s: %v", h, err)
		}
		res.Commits = append(res.Commits, AppliedCommit{Label: commits[i].Label, Subject: firstLine(c.Message),
			Hash: h.String(), Tree: c.TreeHash.String()})
		a.parent = c
	}
	return nil
}

// writeBranch points the branch at the last commit, or keeps an existing
// branch that already holds the same series on the same base (re-running
// is idempotent even with a new committer date).
func (a *applying) writeBranch() (*Result, error) {
	st, res, base := a.st, a.res, a.base
	tip := a.parent.Hash
	if old, err := st.Reference(a.refName); err == nil {
		res.BranchPrevious = old.Hash().String()
		if old.Hash() == tip {
			res.Head = tip.String()
			return res, nil
		}
		if same := sameSeries(st, old.Hash(), res.Commits, base.Hash); same != nil {
			res.Commits = same
			res.Head = old.Hash().String()
			res.Notes = append(res.Notes, "the branch already holds this series on this base: kept its commits")
			return res, nil
		}
	}
	if err := st.SetReference(plumbing.NewHashReference(a.refName, tip)); err != nil {
		return nil, fail.Infraf("write branch %s: %v", a.branch, err)
	}
	res.Head = tip.String()
	res.BranchUpdated = true
	return res, nil
}

// Failure is why a series did not apply: which patch, which file and
// hunk, the reason in full, and the base it was tried on. Apply's error is
// a *Failure whenever a patch of the series is at fault (errors.As); it
// classifies itself as fail.KindFailed (the patch does not apply) or
// fail.KindInput (the patch is no valid diff).
type Failure struct {
	// Patch is the 1-based position of the patch among the commits
	// given; Label names it ("2/3 subject"); MessageID is its mail's.
	Patch     int    `json:"patch"`
	Label     string `json:"label"`
	MessageID string `json:"message_id,omitempty"`
	// Applied is how many patches before it applied.
	Applied int `json:"applied"`
	// File is the file the patch failed on ("" when not one file's
	// fault, e.g. an empty patch); Hunk and HunkHeader the hunk (0, ""
	// when no hunk was at fault: a missing file, a binary patch).
	File       string `json:"file,omitempty"`
	Hunk       int    `json:"hunk,omitempty"`
	HunkHeader string `json:"hunk_header,omitempty"`
	// Reason is the file's error in full (for a hunk: what the patch
	// expects and what the file has, on several lines).
	Reason string `json:"reason"`
	// Base is the commit the series was applied on, BaseSubject its
	// title and BaseReason why it was chosen ("--base v6.1", "base-commit
	// ... given in the series", ...).
	Base        string `json:"base"`
	BaseSubject string `json:"base_subject,omitempty"`
	BaseReason  string `json:"base_reason,omitempty"`
	// ThreeWay is the error of the `git am -3` fallback when it was
	// tried.
	ThreeWay string `json:"three_way,omitempty"`

	kind fail.Kind
	hint string
}

func newFailure(i int, c Commit, err error, base *object.Commit, reason string, applied int) *Failure {
	f := &Failure{Patch: i + 1, Label: c.Label, MessageID: c.MessageID, Applied: applied, Reason: err.Error(),
		Base: base.Hash.String(), BaseSubject: firstLine(base.Message), BaseReason: reason, kind: fail.KindFailed}
	var fe *fileError
	if errors.As(err, &fe) {
		f.File, f.Reason = fe.name, fe.err.Error()
	}
	var he *hunkError
	if errors.As(err, &he) {
		f.Hunk, f.HunkHeader = he.Index, strings.TrimSpace(he.Header)
	}
	return f
}

// Error is the whole story: "patch <label>: <file>: <reason>", then
// what was tried and what to do.
func (f *Failure) Error() string {
	var b strings.Builder
	b.WriteString("patch " + f.Label + ": ")
	if f.File != "" {
		b.WriteString(f.File + ": ")
	}
	b.WriteString(f.Reason)
	if f.ThreeWay != "" {
		b.WriteString("\n--3way: " + f.ThreeWay)
	}
	if f.hint != "" {
		b.WriteString("\n" + f.hint)
	}
	return b.String()
}

// FailKind classifies the failure (internal/fail).
func (f *Failure) FailKind() fail.Kind {
	if f.kind == fail.KindInput {
		return fail.KindInput
	}
	return fail.KindFailed
}

// fileError is a patch's error on one file.
type fileError struct {
	name string
	err  error
}

func (e *fileError) Error() string { return e.name + ": " + e.err.Error() }
func (e *fileError) Unwrap() error { return e.err }

func firstLine(s string) string {
	l, _, _ := strings.Cut(s, "\n")
	return l
}

func checkBranchName(b string) error {
	bad := b == "" || strings.HasPrefix(b, "-") || strings.HasPrefix(b, "/") || strings.HasSuffix(b, "/") ||
		strings.HasSuffix(b, ".lock") || strings.HasSuffix(b, ".") || strings.Contains(b, "..") ||
		strings.Contains(b, "//") || strings.Contains(b, "@{") || strings.ContainsAny(b, " ~^:?*[\\\x7f")
	for _, r := range b {
		if r < 0x20 {
			bad = true
		}
	}
	for _, c := range strings.Split(b, "/") {
		if strings.HasPrefix(c, ".") {
			bad = true
		}
	}
	if bad {
		return fail.Inputf("branch name %q is not a valid git branch name", b)
	}
	return nil
}

// chooseBase picks the commit to apply on by the one rule of
// gittree.BaseChoice: --base, else the series' base-commit when the tree
// has it, else the pipeline's [tree] base, else HEAD.
func chooseBase(repo *git.Repository, opt Options) (*object.Commit, string, error) {
	b, err := gittree.ChooseBase(repo, gittree.BaseChoice{Flag: opt.Base, Series: opt.SeriesBase, Pipeline: opt.PipelineBase})
	if err != nil {
		return nil, "", err
	}
	return b.Commit, b.Why, nil
}

func shortString(s string) string {
	if len(s) > 12 {
		return s[:12]
	}
	return s
}

func configIdentity(repo *git.Repository) (string, string) {
	name, email := "patcheval", "patcheval@localhost"
	cfg, err := repo.ConfigScoped(config.GlobalScope)
	if err != nil {
		cfg, err = repo.Config()
	}
	if err == nil && cfg != nil {
		if cfg.User.Name != "" {
			name = cfg.User.Name
		}
		if cfg.User.Email != "" {
			email = cfg.User.Email
		}
	}
	return name, email
}

// sameSeries checks whether the chain ending at tip holds commits with the
// same trees, authors and messages as want, on base; it returns the
// existing commits or nil.
func sameSeries(st storer.EncodedObjectStorer, tip plumbing.Hash, want []AppliedCommit, base plumbing.Hash) []AppliedCommit {
	out := make([]AppliedCommit, len(want))
	h := tip
	for i := len(want) - 1; i >= 0; i-- {
		have, err := object.GetCommit(st, h)
		if err != nil || len(have.ParentHashes) != 1 {
			return nil
		}
		w, err := object.GetCommit(st, plumbing.NewHash(want[i].Hash))
		if err != nil {
			return nil
		}
		if have.TreeHash != w.TreeHash || have.Message != w.Message || have.Author.Name != w.Author.Name ||
			have.Author.Email != w.Author.Email || !have.Author.When.Equal(w.Author.When) {
			return nil
		}
		out[i] = want[i]
		out[i].Hash = have.Hash.String()
		h = have.ParentHashes[0]
	}
	if h != base {
		return nil
	}
	return out
}

// normalizeMessage ends the message with exactly one newline.
func normalizeMessage(m string) string {
	return strings.TrimRight(m, " \t\n") + "\n"
}

// applyOne applies c on parent and writes the commit.
func applyOne(st storer.EncodedObjectStorer, parent *object.Commit, c Commit, committer object.Signature, fuzz int) (*AppliedCommit, *object.Commit, error) {
	files, _, err := gitdiff.Parse(strings.NewReader(c.Diff))
	if err != nil {
		return nil, nil, fail.Inputf("the diff does not parse: %v", err)
	}
	if len(files) == 0 {
		return nil, nil, fail.Failedf("the patch is empty (no diff)")
	}
	if !strings.HasPrefix(c.Diff, "diff --git ") && !strings.Contains(c.Diff, "\ndiff --git ") {
		// A traditional unified diff (diff -u, quilt): its names keep
		// their first component ("a/lib/x.c"); git am strips it (-p1).
		for _, f := range files {
			f.OldName, f.NewName = stripFirstComponent(f.OldName), stripFirstComponent(f.NewName)
		}
	}
	ed := newTreeEdit(st, parent.TreeHash)
	ac := &AppliedCommit{Label: c.Label, Subject: firstLine(c.Message)}
	for _, f := range files {
		notes, err := ed.applyFile(f, fuzz)
		name := f.NewName
		if name == "" {
			name = f.OldName
		}
		if err != nil {
			return nil, nil, &fileError{name, err}
		}
		for _, n := range notes {
			ac.Notes = append(ac.Notes, name+": "+n)
		}
	}
	tree, err := ed.write()
	if err != nil {
		return nil, nil, err
	}
	msg := normalizeMessage(c.Message)
	author := object.Signature{Name: c.Author.Name, Email: c.Author.Email, When: c.AuthorDate}
	if author.When.IsZero() {
		author.When = committer.When
	}
	if author.Name == "" && author.Email == "" {
		return nil, nil, fail.Inputf("the patch has no author")
	}
	nc := &object.Commit{
		Author:       author,
		Committer:    committer,
		Message:      msg,
		TreeHash:     tree,
		ParentHashes: []plumbing.Hash{parent.Hash},
	}
	h, err := storeObject(st, nc)
	if err != nil {
		return nil, nil, err
	}
	nc, err = object.GetCommit(st, h)
	if err != nil {
		return nil, nil, fail.Infraf("read back commit %s: %v", h, err)
	}
	ac.Hash, ac.Tree = h.String(), tree.String()
	return ac, nc, nil
}

// stripFirstComponent is git apply -p1 for one name ("" stays ""; an
// absolute name stays absolute, to be refused).
func stripFirstComponent(name string) string {
	if i := strings.IndexByte(name, '/'); i > 0 {
		return name[i+1:]
	}
	return name
}

type encoder interface {
	Encode(plumbing.EncodedObject) error
}

func storeObject(st storer.EncodedObjectStorer, o encoder) (plumbing.Hash, error) {
	obj := st.NewEncodedObject()
	if err := o.Encode(obj); err != nil {
		return plumbing.ZeroHash, fail.Infraf("encode object: %v", err)
	}
	h := obj.Hash()
	if st.HasEncodedObject(h) == nil {
		return h, nil
	}
	if _, err := st.SetEncodedObject(obj); err != nil {
		return plumbing.ZeroHash, fail.Infraf("write object: %v", err)
	}
	return h, nil
}

func storeBlob(st storer.EncodedObjectStorer, b []byte) (plumbing.Hash, error) {
	h := plumbing.ComputeHash(plumbing.BlobObject, b)
	if st.HasEncodedObject(h) == nil {
		return h, nil
	}
	obj := st.NewEncodedObject()
	obj.SetType(plumbing.BlobObject)
	obj.SetSize(int64(len(b)))
	w, err := obj.Writer()
	if err == nil {
		_, err = w.Write(b)
		w.Close()
	}
	if err == nil {
		_, err = st.SetEncodedObject(obj)
	}
	if err != nil {
		return plumbing.ZeroHash, fail.Infraf("write blob: %v", err)
	}
	return h, nil
}

// entry is a path's state: mode and blob.
type entry struct {
	mode filemode.FileMode
	hash plumbing.Hash
	del  bool
}

// treeEdit collects the changes of one commit on top of a base tree.
type treeEdit struct {
	st      storer.EncodedObjectStorer
	root    plumbing.Hash
	changes map[string]*entry
	trees   map[plumbing.Hash]*object.Tree
}

func newTreeEdit(st storer.EncodedObjectStorer, root plumbing.Hash) *treeEdit {
	return &treeEdit{st: st, root: root, changes: map[string]*entry{}, trees: map[plumbing.Hash]*object.Tree{}}
}

func (e *treeEdit) tree(h plumbing.Hash) (*object.Tree, error) {
	if t, ok := e.trees[h]; ok {
		return t, nil
	}
	t, err := object.GetTree(e.st, h)
	if err != nil {
		return nil, fail.Infraf("read tree %s: %v", gittree.ShortHash(h), err)
	}
	e.trees[h] = t
	return t, nil
}

// lookup returns the entry at path in the edited tree (nil: absent). Only
// the trees on the path are read.
func (e *treeEdit) lookup(path string) (*entry, error) {
	if c, ok := e.changes[path]; ok {
		if c.del {
			return nil, nil
		}
		return c, nil
	}
	// A changed parent (a file put where a directory was, or removed)
	// hides the base tree below it.
	for p := parentDir(path); p != ""; p = parentDir(p) {
		if _, ok := e.changes[p]; ok {
			return nil, nil
		}
	}
	h := e.root
	comps := strings.Split(path, "/")
	for i, c := range comps {
		t, err := e.tree(h)
		if err != nil {
			return nil, err
		}
		var found *object.TreeEntry
		for j := range t.Entries {
			if t.Entries[j].Name == c {
				found = &t.Entries[j]
				break
			}
		}
		if found == nil {
			return nil, nil
		}
		if i == len(comps)-1 {
			return &entry{mode: found.Mode, hash: found.Hash}, nil
		}
		if found.Mode != filemode.Dir {
			if found.Mode == filemode.Symlink {
				return &entry{mode: filemode.Symlink, hash: found.Hash, del: true}, errSymlinkParent(strings.Join(comps[:i+1], "/"))
			}
			return nil, nil
		}
		h = found.Hash
	}
	return nil, nil
}

type symlinkErr string

func (s symlinkErr) Error() string {
	return fmt.Sprintf("path goes through the symlink %s in the tree; refusing to follow it", string(s))
}
func (s symlinkErr) FailKind() fail.Kind { return fail.KindInput }

func errSymlinkParent(p string) error { return symlinkErr(p) }

func parentDir(p string) string {
	i := strings.LastIndexByte(p, '/')
	if i < 0 {
		return ""
	}
	return p[:i]
}

// checkPath refuses paths that would escape the tree or touch .git.
func (e *treeEdit) checkPath(p string) error {
	switch {
	case p == "":
		return fail.Inputf("empty path in the patch")
	case strings.HasPrefix(p, "/"):
		return fail.Inputf("path %q is absolute; refusing a patch that writes outside the tree", p)
	case strings.ContainsRune(p, 0):
		return fail.Inputf("path %q contains a NUL byte", p)
	}
	for _, c := range strings.Split(p, "/") {
		switch {
		case c == "":
			return fail.Inputf("path %q has an empty component", p)
		case c == "." || c == "..":
			return fail.Inputf("path %q has a %q component; refusing a patch that escapes the tree", p, c)
		case strings.EqualFold(c, ".git"):
			return fail.Inputf("path %q touches .git/; refusing it", p)
		}
	}
	// No directory on the way may be a symlink.
	for d := parentDir(p); d != ""; d = parentDir(d) {
		en, err := e.lookup(d)
		if err != nil {
			return fail.Inputf("path %q: %v", p, err)
		}
		if en != nil && en.mode == filemode.Symlink {
			return fail.Inputf("path %q: %v", p, symlinkErr(d))
		}
	}
	return nil
}

func (e *treeEdit) read(en *entry) ([]byte, error) {
	if en.mode == filemode.Submodule {
		return nil, fail.Failedf("submodule changes are not supported")
	}
	o, err := e.st.EncodedObject(plumbing.BlobObject, en.hash)
	if err != nil {
		return nil, fail.Infraf("read blob %s: %v", gittree.ShortHash(en.hash), err)
	}
	r, err := o.Reader()
	if err != nil {
		return nil, fail.Infraf("read blob %s: %v", gittree.ShortHash(en.hash), err)
	}
	defer r.Close()
	var b bytes.Buffer
	b.Grow(int(o.Size()) + bytes.MinRead)
	_, err = b.ReadFrom(r)
	return b.Bytes(), err
}

// applyFile applies one file's diff to the edit.
func (e *treeEdit) applyFile(f *gitdiff.File, fuzz int) ([]string, error) {
	oldName, newName := f.OldName, f.NewName
	if f.IsNew {
		oldName = ""
	}
	if f.IsDelete {
		newName = ""
	}
	if oldName == "" && newName == "" {
		return nil, fail.Inputf("file diff names no file")
	}
	for _, p := range []string{oldName, newName} {
		if p != "" {
			if err := e.checkPath(p); err != nil {
				return nil, err
			}
		}
	}
	var old *entry
	var content []byte
	if oldName != "" {
		en, err := e.lookup(oldName)
		if err != nil {
			return nil, err
		}
		if en == nil {
			return nil, fail.Failedf("%s does not exist in the tree", oldName)
		}
		if en.mode == filemode.Dir {
			return nil, fail.Failedf("%s is a directory in the tree", oldName)
		}
		old = en
		if content, err = e.read(en); err != nil {
			return nil, err
		}
	}
	if newName != "" && (f.IsNew || f.IsRename || f.IsCopy) {
		en, err := e.lookup(newName)
		if err != nil {
			return nil, err
		}
		if en != nil {
			return nil, fail.Failedf("%s already exists in the tree", newName)
		}
	}
	var notes []string
	var out []byte
	switch {
	case f.IsBinary:
		if f.BinaryFragment == nil {
			return nil, fail.Failedf("binary patch without data (\"Binary files differ\"): resend with git format-patch --binary")
		}
		if old != nil && !oidMatches(f.OldOIDPrefix, old.hash) {
			return nil, fail.Failedf("the binary patch applies to blob %s but the tree has %s", f.OldOIDPrefix, gittree.ShortHash(old.hash))
		}
		var buf bytes.Buffer
		a := gitdiff.NewBinaryApplier(&buf, bytes.NewReader(content))
		if err := a.ApplyFragment(f.BinaryFragment); err != nil {
			return nil, fail.Failedf("binary patch does not apply: %v", err)
		}
		if err := a.Close(); err != nil {
			return nil, fail.Failedf("binary patch does not apply: %v", err)
		}
		out = buf.Bytes()
		if newName != "" && !oidMatches(f.NewOIDPrefix, plumbing.ComputeHash(plumbing.BlobObject, out)) {
			return nil, fail.Failedf("the binary patch gives blob %s, not %s as the patch says", gittree.ShortHash(plumbing.ComputeHash(plumbing.BlobObject, out)), f.NewOIDPrefix)
		}
	case len(f.TextFragments) > 0:
		lines, n, err := placeHunks(splitLines(content), f.TextFragments, fuzz)
		if err != nil {
			return nil, fail.Failed(err)
		}
		notes = n
		out = []byte(strings.Join(lines, ""))
	default:
		out = content
	}
	if newName == "" {
		if len(out) != 0 {
			return nil, fail.Failedf("%s: deleting the file leaves %d bytes the patch does not remove", oldName, len(out))
		}
		e.changes[oldName] = &entry{del: true}
		return notes, nil
	}
	mode := filemode.Regular
	if old != nil {
		mode = old.mode
	}
	if f.NewMode != 0 {
		mode = filemode.FileMode(f.NewMode)
	}
	switch mode {
	case filemode.Regular, filemode.Executable, filemode.Symlink:
	case filemode.Deprecated:
		mode = filemode.Regular
	default:
		return nil, fail.Failedf("%s: unsupported file mode %o", newName, uint32(mode))
	}
	h, err := storeBlob(e.st, out)
	if err != nil {
		return nil, err
	}
	if f.IsRename {
		e.changes[oldName] = &entry{del: true}
	}
	e.changes[newName] = &entry{mode: mode, hash: h}
	return notes, nil
}

func oidMatches(prefix string, h plumbing.Hash) bool {
	if prefix == "" || strings.Trim(prefix, "0") == "" {
		return true
	}
	return strings.HasPrefix(h.String(), strings.ToLower(prefix))
}

// write writes the changed trees (only the chains of changed paths) and
// returns the new root tree.
func (e *treeEdit) write() (plumbing.Hash, error) {
	h, err := e.writeDir(e.root, e.changes)
	if err != nil {
		return h, err
	}
	if h.IsZero() {
		// the empty tree
		return storeObject(e.st, &object.Tree{})
	}
	return h, nil
}

func (e *treeEdit) writeDir(base plumbing.Hash, changes map[string]*entry) (plumbing.Hash, error) {
	entries := map[string]object.TreeEntry{}
	if !base.IsZero() {
		t, err := e.tree(base)
		if err != nil {
			return plumbing.ZeroHash, err
		}
		for _, en := range t.Entries {
			entries[en.Name] = en
		}
	}
	sub := map[string]map[string]*entry{}
	for p, c := range changes {
		first, rest, ok := strings.Cut(p, "/")
		if !ok {
			if c.del {
				if en, ok := entries[first]; ok && en.Mode != filemode.Dir {
					delete(entries, first)
				}
			} else {
				if en, ok := entries[first]; ok && en.Mode == filemode.Dir {
					if _, more := sub[first]; !more {
						return plumbing.ZeroHash, fail.Failedf("%s is a directory in the tree; the patch writes a file there", p)
					}
				}
				entries[first] = object.TreeEntry{Name: first, Mode: c.mode, Hash: c.hash}
			}
			continue
		}
		if sub[first] == nil {
			sub[first] = map[string]*entry{}
		}
		sub[first][rest] = c
	}
	for name, ch := range sub {
		var sb plumbing.Hash
		if en, ok := entries[name]; ok {
			if en.Mode != filemode.Dir {
				if c, replaced := changes[name]; !replaced || !c.del {
					return plumbing.ZeroHash, fail.Failedf("%s is a file in the tree; the patch writes below it", name)
				}
			} else {
				sb = en.Hash
			}
		}
		h, err := e.writeDir(sb, ch)
		if err != nil {
			return h, err
		}
		if h.IsZero() {
			delete(entries, name)
		} else {
			entries[name] = object.TreeEntry{Name: name, Mode: filemode.Dir, Hash: h}
		}
	}
	if len(entries) == 0 {
		return plumbing.ZeroHash, nil
	}
	t := &object.Tree{}
	for _, en := range entries {
		t.Entries = append(t.Entries, en)
	}
	sort.Slice(t.Entries, func(i, j int) bool { return treeKey(t.Entries[i]) < treeKey(t.Entries[j]) })
	return storeObject(e.st, t)
}

// treeKey sorts entries like git: directories as if named "name/".
func treeKey(en object.TreeEntry) string {
	if en.Mode == filemode.Dir {
		return en.Name + "/"
	}
	return en.Name
}

var _ = os.Getenv
