package follow

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/url"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/go-git/go-git/v5/plumbing"

	"github.com/patcheval/patcheval/internal/fail"
	"github.com/patcheval/patcheval/internal/gittree"
	"github.com/patcheval/patcheval/internal/lazyre"
	"github.com/patcheval/patcheval/internal/netguard"
	"github.com/patcheval/patcheval/mbox"
	"github.com/patcheval/patcheval/series"
)

// #patcheval test <git URL> <branch>: the branch is fetched from the
// remote into the evaluated tree, the commits it has on top of the tree's
// base (their merge base) become a series (git format-patch with
// base-commit:, a cover letter naming the branch), and that series is
// evaluated as the list evaluates a new one, on that merge base.

// maxBranchCommits bounds the commits a tested branch may have on top of
// the base: a series, not a tree.
const maxBranchCommits = 50

// branchFetchTimeout bounds listing and fetching the remote.
const branchFetchTimeout = 10 * time.Minute

var branchSafe = lazyre.New(`[^A-Za-z0-9._/-]+`)

// checkBranchArgs refuses what is not a git URL on the network (a local
// path, file://, ssh:// or ext:: is never read on the word of a mail), a
// scheme or host policy p does not allow, or not a branch name, naming
// the input. Where the host's addresses may lead is checked when the
// remote is reached (gittree.WithGuard).
func checkBranchArgs(p netguard.Policy, rawURL, branch string) error {
	cmd := "#patcheval test " + rawURL + " " + branch
	u, err := url.Parse(rawURL)
	if err != nil || u.Host == "" || !slices.Contains([]string{"http", "https", "git"}, u.Scheme) {
		return fail.Inputf("%s: %q is not a git URL: want http://, https:// or git:// and a host", cmd, rawURL)
	}
	if _, err := p.CheckURL(rawURL); err != nil {
		return fail.Inputf("%s: %v", cmd, err)
	}
	ref := plumbing.NewBranchReferenceName(branch)
	if strings.HasPrefix(branch, "-") || strings.HasPrefix(branch, "refs/") || ref.Validate() != nil || !ref.IsBranch() {
		return fail.Inputf("%s: %q is not a branch name", cmd, branch)
	}
	return nil
}

// branchSeries fetches branch from rawURL into tree, reaching only what
// p allows, and returns its commits on top of base (a commit-ish of
// tree) as a resolved series and its thread; the cover letter is from
// from and answers the command's mail (inReplyTo, when known), so
// replies to the series thread under the command on the list, the only
// message of it the list has.
// remoteBranch is branch's reference on the remote at rawURL, listed
// first: a branch the remote lacks is named with what it has (cmd is
// the command, for the error).
func remoteBranch(ctx context.Context, cmd, rawURL, branch string) (plumbing.ReferenceName, error) {
	refs, err := gittree.ListRefs(ctx, rawURL)
	if r := (*netguard.Refused)(nil); errors.As(err, &r) {
		return "", fail.Inputf("%s: %v", cmd, r)
	}
	if err != nil {
		return "", fail.Inputf("%s: cannot list the remote: %v", cmd, err)
	}
	want := plumbing.NewBranchReferenceName(branch)
	var have []string
	found := false
	for _, r := range refs {
		if r.Name() == want {
			found = true
		}
		if r.Name().IsBranch() {
			have = append(have, r.Name().Short())
		}
	}
	if !found {
		slices.Sort(have)
		if len(have) > 10 {
			have = append(have[:10], "...")
		}
		return "", fail.Inputf("%s: the remote has no branch %q (branches: %s)", cmd, branch, strings.Join(have, ", "))
	}
	return want, nil
}

func branchSeries(ctx context.Context, p netguard.Policy, tree, base, rawURL, branch string, from mbox.Address, inReplyTo string) (*series.Series, *mbox.Thread, error) {
	cmd := "#patcheval test " + rawURL + " " + branch
	if err := checkBranchArgs(p, rawURL, branch); err != nil {
		return nil, nil, err
	}
	u, _ := url.Parse(rawURL)
	if _, err := p.Resolve(ctx, u.Hostname()); err != nil {
		return nil, nil, fail.Inputf("%s: %v", cmd, err)
	}
	ctx = gittree.WithGuard(ctx, &p)
	ctx, cancel := context.WithTimeout(ctx, branchFetchTimeout)
	defer cancel()
	want, err := remoteBranch(ctx, cmd, rawURL, branch)
	if err != nil {
		return nil, nil, err
	}
	local := "refs/patcheval/test/" + branchSafe.ReplaceAllString(branch, "_")
	tip, err := gittree.Fetch(ctx, tree, rawURL, want.String(), local, nil)
	if r := (*netguard.Refused)(nil); errors.As(err, &r) {
		return nil, nil, fail.Inputf("%s: %v", cmd, r)
	}
	if err != nil {
		return nil, nil, fmt.Errorf("%s: %w", cmd, err)
	}
	// format-patch signs the cover letter as the committer.
	name, email := from.Name, from.Email
	if email == "" {
		name, email = "patcheval", "patcheval@localhost"
	}
	g := func(args ...string) (string, error) {
		c := exec.CommandContext(ctx, "git", append([]string{"-C", tree}, args...)...)
		c.Env = append(c.Environ(), "GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=/dev/null",
			"GIT_COMMITTER_NAME="+name, "GIT_COMMITTER_EMAIL="+email)
		var stderr bytes.Buffer
		c.Stderr = &stderr
		out, err := c.Output()
		if err != nil {
			return "", fail.Infraf("git %s: %v: %s", args[0], err, strings.TrimSpace(stderr.String()))
		}
		return string(out), nil
	}
	mb, err := g("merge-base", tip, base)
	if err != nil {
		return nil, nil, fail.Inputf("%s: the branch shares no history with the tree's %s", cmd, base)
	}
	mb = strings.TrimSpace(mb)
	count := func(extra ...string) (int, error) {
		out, err := g(append([]string{"rev-list", "--count"}, append(extra, mb+".."+tip)...)...)
		if err != nil {
			return 0, err
		}
		return strconv.Atoi(strings.TrimSpace(out))
	}
	n, err := count()
	if err != nil {
		return nil, nil, err
	}
	merges, err := count("--merges")
	if err != nil {
		return nil, nil, err
	}
	switch {
	case n == 0:
		return nil, nil, fail.Inputf("%s: the branch (%.12s) has no commits on top of the tree's %s", cmd, tip, base)
	case n > maxBranchCommits:
		return nil, nil, fail.Inputf("%s: the branch has %d commits on top of %.12s, more than a series (at most %d)", cmd, n, mb, maxBranchCommits)
	case merges > 0:
		return nil, nil, fail.Inputf("%s: the branch has %d merge commit(s) on top of %.12s: test a linear branch", cmd, merges, mb)
	}
	args := []string{"format-patch", "--stdout", "--thread=shallow", "--no-signature", "--subject-prefix=PATCH", "--base=" + mb}
	if n > 1 {
		args = append(args, "--cover-letter")
	}
	if inReplyTo != "" {
		args = append(args, "--in-reply-to="+inReplyTo)
	}
	out, err := g(append(args, mb+".."+tip)...)
	if err != nil {
		return nil, nil, err
	}
	// format-patch names a cover letter <cover.<the second it ran>.git.
	// <committer>>: two branches tested within one second would share it
	// (and be threaded, and keyed, as one series). The tip names it.
	out = strings.ReplaceAll(out, "<cover.", fmt.Sprintf("<cover.%.12s.", tip))
	title := fmt.Sprintf("branch %s of %s", branch, rawURL)
	out = strings.Replace(out, "*** SUBJECT HERE ***", title, 1)
	out = strings.Replace(out, "*** BLURB HERE ***", fmt.Sprintf("The %d commit(s) of %s at %.12s on top of %.12s (#patcheval test).", n, title, tip, mb), 1)
	msgs, err := mbox.ParseBytes([]byte(out), title)
	if err != nil {
		return nil, nil, fail.Infraf("%s: reading git format-patch's output: %v", cmd, err)
	}
	th := mbox.NewThread(msgs, title)
	s, err := series.Resolve(th, series.Options{})
	if err != nil {
		return nil, nil, fmt.Errorf("%s: %w", cmd, err)
	}
	if s.Base.Commit == "" {
		s.Base.Commit = mb
	}
	return s, th, nil
}
