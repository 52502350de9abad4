package apply

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"

	"github.com/bluekeyes/go-gitdiff/gitdiff"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/object"

	"github.com/patcheval/patcheval/internal/fail"
	"github.com/patcheval/patcheval/internal/gittree"
	"github.com/patcheval/patcheval/internal/lazyre"
)

// threeWay applies commits on base with `git am -3` in a temporary
// sparse clone (--shared, so the repository's objects are borrowed, not
// copied; only the touched paths are checked out), then copies the new
// objects into the repository as loose objects. No ref of the repository
// is written here.
func threeWay(ctx context.Context, dirs gittree.Dirs, base plumbing.Hash, commits []Commit, committer object.Signature) ([]plumbing.Hash, error) {
	gitBin, err := exec.LookPath("git")
	if err != nil {
		return nil, fail.Infraf("the git CLI is not installed (needed for --3way)")
	}
	tmp, err := os.MkdirTemp("", "patcheval-3way-")
	if err != nil {
		return nil, fail.Infraf("--3way: %v", err)
	}
	defer os.RemoveAll(tmp)
	wt := filepath.Join(tmp, "wt")
	env := append(os.Environ(),
		"GIT_COMMITTER_NAME="+committer.Name,
		"GIT_COMMITTER_EMAIL="+committer.Email,
		"GIT_COMMITTER_DATE="+committer.When.Format("2006-01-02T15:04:05-07:00"),
		"GIT_TERMINAL_PROMPT=0")
	run := func(dir string, stdin []byte, args ...string) ([]byte, error) {
		cmd := exec.CommandContext(ctx, gitBin, args...)
		cmd.Dir = dir
		cmd.Env = env
		if stdin != nil {
			cmd.Stdin = bytes.NewReader(stdin)
		}
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		if err != nil {
			return out, fmt.Errorf("git %s: %v\n%s%s", strings.Join(args, " "), err, out, stderr.String())
		}
		return out, nil
	}
	if _, err := run("", nil, "clone", "-q", "--shared", "--no-checkout", dirs.CommonDir, wt); err != nil {
		return nil, fail.Infra(err)
	}
	// Sparse: only the paths the patches touch.
	var pats []string
	seen := map[string]bool{}
	for _, c := range commits {
		files, _, _ := gitdiff.Parse(strings.NewReader(c.Diff))
		for _, f := range files {
			for _, p := range []string{f.OldName, f.NewName} {
				if p != "" && !seen[p] {
					seen[p] = true
					pats = append(pats, "/"+escapeSparse(p))
				}
			}
		}
	}
	sort.Strings(pats)
	if _, err := run(wt, nil, "config", "core.sparseCheckout", "true"); err != nil {
		return nil, fail.Infra(err)
	}
	if err := os.WriteFile(filepath.Join(wt, ".git", "info", "sparse-checkout"), []byte(strings.Join(pats, "\n")+"\n"), 0o644); err != nil {
		return nil, fail.Infraf("--3way: %v", err)
	}
	if _, err := run(wt, nil, "checkout", "-q", "--detach", base.String()); err != nil {
		return nil, fail.Infra(err)
	}
	mb := filepath.Join(tmp, "series.mbox")
	if err := os.WriteFile(mb, amMbox(commits), 0o644); err != nil {
		return nil, fail.Infraf("--3way: %v", err)
	}
	if out, err := run(wt, nil, "am", "-3", "-q", "--patch-format=mboxrd", mb); err != nil {
		run(wt, nil, "am", "--abort")
		return nil, fail.Failedf("git am -3 failed too: %s", strings.TrimSpace(string(out)+" "+err.Error()))
	}
	out, err := run(wt, nil, "rev-list", "--reverse", base.String()+"..HEAD")
	if err != nil {
		return nil, fail.Infra(err)
	}
	var hs []plumbing.Hash
	for _, l := range strings.Fields(string(out)) {
		hs = append(hs, plumbing.NewHash(l))
	}
	if len(hs) != len(commits) {
		return nil, fail.Failedf("git am -3 made %d commits for %d patches", len(hs), len(commits))
	}
	pack, err := run(wt, []byte("HEAD\n^"+base.String()+"\n"), "pack-objects", "--revs", "--stdout", "-q")
	if err != nil {
		return nil, fail.Infra(err)
	}
	if _, err := run("", pack, "--git-dir="+dirs.CommonDir, "unpack-objects", "-q"); err != nil {
		return nil, fail.Infra(err)
	}
	return hs, nil
}

func escapeSparse(p string) string {
	r := strings.NewReplacer(`\`, `\\`, `*`, `\*`, `?`, `\?`, `[`, `\[`, `!`, `\!`, `#`, `\#`)
	return r.Replace(p)
}

var fromLine = lazyre.New(`(?m)^(>*From )`)

// amMbox renders commits as an mboxrd that git am turns back into the same
// commits.
func amMbox(commits []Commit) []byte {
	var b bytes.Buffer
	for i, c := range commits {
		title, body, _ := strings.Cut(normalizeMessage(c.Message), "\n")
		body = strings.TrimLeft(body, "\n")
		fmt.Fprintf(&b, "From patcheval Mon Sep 17 00:00:00 2001\n")
		fmt.Fprintf(&b, "From: %s <%s>\n", c.Author.Name, c.Author.Email)
		fmt.Fprintf(&b, "Date: %s\n", c.AuthorDate.Format("Mon, 2 Jan 2006 15:04:05 -0700"))
		fmt.Fprintf(&b, "Subject: [PATCH %d/%d] %s\n", i+1, len(commits), title)
		if c.MessageID != "" {
			fmt.Fprintf(&b, "Message-Id: <%s>\n", c.MessageID)
		}
		b.WriteString("MIME-Version: 1.0\nContent-Type: text/plain; charset=UTF-8\nContent-Transfer-Encoding: 8bit\n\n")
		msg := body + "---\n\n" + c.Diff
		if !strings.HasSuffix(msg, "\n") {
			msg += "\n"
		}
		b.WriteString(fromLine.ReplaceAllString(msg, ">$1"))
		b.WriteString("\n")
	}
	return b.Bytes()
}
