// Package recipients decides who a bot's report goes to: the series'
// author, the list the series was posted to, and the maintainers of the
// files it touches (the tree's MAINTAINERS, series/maintainers) — not
// everybody the thread happened to Cc. Each address (or glob of
// addresses) has a setting: every result, regressions only (the default)
// or nothing (opt-out).
//
// The entry point is Resolve; Policy is what a followed list configures
// (pipelines/bots/follow's [[list]] keys address, report and recipients) and
// what an evaluation stores (runner.Options.Recipients). ForSeries finds
// the maintainers of a series' patches in a tree.
package recipients

import (
	"bytes"
	"fmt"
	"path"
	"strings"

	"github.com/go-git/go-git/v5/plumbing/object"

	"github.com/patcheval/patcheval/internal/fail"
	"github.com/patcheval/patcheval/internal/gittree"
	"github.com/patcheval/patcheval/mbox"
	"github.com/patcheval/patcheval/series/maintainers"
)

// Mode is what an address receives.
type Mode string

const (
	// Regressions: only reports that found a regression (the default).
	Regressions Mode = "regressions"
	// Every: every result.
	Every Mode = "all"
	// Off: nothing (opted out).
	Off Mode = "off"
)

// Rule sets the Mode of the addresses matching Match, a case-insensitive
// glob (path.Match: "*@redhat.com", "linuxppc-dev@lists.ozlabs.org").
type Rule struct {
	Match string `json:"match" toml:"match"`
	Mode  Mode   `json:"report" toml:"report"`
}

// Policy is a bot's addressing.
type Policy struct {
	// List is the posting address of the list the series came from
	// (Cc'd); empty: none.
	List string `json:"list,omitempty"`
	// Default is the Mode of addresses no rule matches (empty:
	// Regressions).
	Default Mode `json:"default,omitempty"`
	// Rules are tried in order; the first match wins.
	Rules []Rule `json:"rules,omitempty"`
	// Reviewers also addresses the R: entries of the matching sections
	// (default: the M: entries only).
	Reviewers bool `json:"reviewers,omitempty"`
}

// ParseMode reads a mode setting; what names it in errors.
func ParseMode(what, s string) (Mode, error) {
	switch m := Mode(s); m {
	case Regressions, Every, Off:
		return m, nil
	case "":
		return Regressions, nil
	}
	return "", fail.Inputf("%s %q: want \"regressions\", \"all\" or \"off\"", what, s)
}

// Validate checks the modes and globs.
func (p Policy) Validate() error {
	if _, err := ParseMode("default report", string(p.Default)); err != nil {
		return err
	}
	for i, r := range p.Rules {
		if r.Match == "" {
			return fail.Inputf("recipients rule #%d: match is empty", i+1)
		}
		if _, err := path.Match(r.Match, ""); err != nil {
			return fail.Inputf("recipients rule #%d: match %q: %v", i+1, r.Match, err)
		}
		if _, err := ParseMode(fmt.Sprintf("recipients rule #%d (%s): report", i+1, r.Match), string(r.Mode)); err != nil {
			return err
		}
	}
	if p.List != "" && !strings.Contains(p.List, "@") {
		return fail.Inputf("list address %q is not an e-mail address", p.List)
	}
	return nil
}

// ModeOf is the Mode of addr: the first matching rule's, else the
// default.
func (p Policy) ModeOf(addr string) Mode {
	a := strings.ToLower(addr)
	for _, r := range p.Rules {
		if ok, _ := path.Match(strings.ToLower(r.Match), a); ok {
			if r.Mode == "" {
				return Regressions
			}
			return r.Mode
		}
	}
	if p.Default == "" {
		return Regressions
	}
	return p.Default
}

// Addressing is who gets a report, and why the others do not.
type Addressing struct {
	To, Cc []mbox.Address
	// Why says per address (lower case) why it is addressed: "author",
	// "list", "maintainer:SCHEDULER", ...
	Why map[string]string `json:"why,omitempty"`
	// Left are the candidates left out, each with the reason.
	Left []string `json:"left,omitempty"`
}

// Resolve addresses a report: To the author, Cc the list and the
// maintainers (reviewers with Policy.Reviewers), each only when its Mode
// takes this result (regressed: the report found a regression). When the
// author is left out, the first Cc becomes To; nobody left gives an empty
// Addressing.
func Resolve(p Policy, author mbox.Address, maint []maintainers.Recipient, regressed bool) Addressing {
	a := Addressing{Why: map[string]string{}}
	consider := func(addr mbox.Address, why string, to bool) {
		k := strings.ToLower(strings.TrimSpace(addr.Email))
		if k == "" || !strings.Contains(k, "@") {
			return
		}
		if _, dup := a.Why[k]; dup {
			return
		}
		switch p.ModeOf(k) {
		case Off:
			a.Left = append(a.Left, fmt.Sprintf("%s (%s): opted out", k, why))
			a.Why[k] = "" // considered once
			return
		case Regressions:
			if !regressed {
				a.Left = append(a.Left, fmt.Sprintf("%s (%s): regressions only, none found", k, why))
				a.Why[k] = ""
				return
			}
		}
		a.Why[k] = why
		if to {
			a.To = append(a.To, addr)
		} else {
			a.Cc = append(a.Cc, addr)
		}
	}
	consider(author, "author", true)
	if p.List != "" {
		consider(mbox.Address{Email: p.List}, "list", false)
	}
	for _, r := range maint {
		if r.Kind == maintainers.Maintainer || (p.Reviewers && r.Kind == maintainers.Reviewer) {
			consider(mbox.Address{Name: r.Name, Email: r.Email}, r.Role, false)
		}
	}
	for k, v := range a.Why {
		if v == "" {
			delete(a.Why, k)
		}
	}
	if len(a.To) == 0 && len(a.Cc) > 0 {
		a.To, a.Cc = a.Cc[:1], a.Cc[1:]
	}
	return a
}

// ForSeries is the maintainers (and reviewers and lists) of the files and
// keywords of patches, from the MAINTAINERS file of commit base in the
// git tree at treePath.
func ForSeries(treePath, base string, patches [][]byte) ([]maintainers.Recipient, error) {
	repo, st, _, err := gittree.Open(treePath, 16)
	if err != nil {
		return nil, err
	}
	defer st.Close()
	c, err := gittree.ResolveIn(repo, base)
	if err != nil {
		return nil, err
	}
	f, err := maintainers.FromCommit(c)
	if err != nil {
		return nil, err
	}
	rs, _ := f.ForPatch(bytes.Join(patches, []byte("\n")))
	return rs, nil
}

// ForCommit is the maintainers (and reviewers and lists) of the files
// and keywords that commit changes against its first parent, from the
// parent's MAINTAINERS in the git tree at treePath: whom a bisected
// culprit concerns, rather than the commit's own Cc trailers.
func ForCommit(treePath, commit string) ([]maintainers.Recipient, error) {
	repo, st, _, err := gittree.Open(treePath, 16)
	if err != nil {
		return nil, err
	}
	defer st.Close()
	c, err := gittree.ResolveIn(repo, commit)
	if err != nil {
		return nil, err
	}
	if c.NumParents() == 0 {
		return nil, fail.Inputf("commit %s has no parent: no change to find maintainers for", commit)
	}
	parent, err := c.Parent(0)
	if err != nil {
		return nil, fail.Infraf("parent of %s: %w", commit, err)
	}
	f, err := maintainers.FromCommit(parent)
	if err != nil {
		return nil, err
	}
	// The changed paths first, from the trees alone (no content diff):
	// a commit that is a whole release (tree import) changes tens of
	// thousands of files, whose text patch would take go-git minutes and
	// gigabytes to write and then match every section.
	pt, err := parent.Tree()
	if err != nil {
		return nil, fail.Infraf("tree of %s: %w", parent.Hash, err)
	}
	ct, err := c.Tree()
	if err != nil {
		return nil, fail.Infraf("tree of %s: %w", commit, err)
	}
	changes, err := object.DiffTree(pt, ct)
	if err != nil {
		return nil, fail.Infraf("diff of %s: %w", commit, err)
	}
	if len(changes) > MaxPatchFiles {
		// Every section of MAINTAINERS would match (and matching 10^5
		// paths against its patterns takes minutes): nobody in particular
		// maintains a whole release.
		return nil, fail.Inputf("commit %.12s changes %d files (more than %d): a whole release or a merge, which has no maintainers of its own",
			c.Hash, len(changes), MaxPatchFiles)
	}
	patch, err := changes.Patch()
	if err != nil {
		return nil, fail.Infraf("diff of %s: %w", commit, err)
	}
	rs, _ := f.ForPatch([]byte(patch.String()))
	return rs, nil
}

// MaxPatchFiles is the most files a commit may change for ForCommit to
// name its maintainers (from its text patch: files and MAINTAINERS' K:
// keywords, as get_maintainer.pl does); above it ForCommit says the
// commit has none of its own (bad input).
var MaxPatchFiles = 2000

// ListAddress guesses the posting address of list name from a message's
// To and Cc: the address whose local part is the name
// (linuxppc-dev@lists.ozlabs.org for linuxppc-dev); "" when none is.
func ListAddress(name string, m *mbox.Message) string {
	if m == nil || name == "" {
		return ""
	}
	for _, l := range [][]mbox.Address{m.To, m.Cc} {
		for _, a := range l {
			if local, _, ok := strings.Cut(a.Email, "@"); ok && strings.EqualFold(local, name) {
				return a.Email
			}
		}
	}
	return ""
}
