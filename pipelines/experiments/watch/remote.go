package watch

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/go-git/go-git/v5/plumbing"

	"github.com/patcheval/patcheval/internal/fail"
	"github.com/patcheval/patcheval/internal/gittree"
	"github.com/patcheval/patcheval/pipelines/store"
)

// RemoteTag is one tag a remote advertises.
type RemoteTag struct {
	Name string `json:"name"` // without refs/tags/
	// Ref is the hash the tag ref points at (a tag object when annotated);
	// Commit is the peeled commit.
	Ref    string `json:"ref"`
	Commit string `json:"commit"`
}

// ListTimeout bounds one listing or fetch when the context has no deadline.
const ListTimeout = 2 * time.Minute

// ListTags lists the remote's tags matching pattern without cloning
// (go-git's remote List, the `git ls-remote` protocol exchange), ordered
// by version (CompareTags). A remote that cannot be reached is an infra
// error naming it.
func ListTags(ctx context.Context, url, pattern string) ([]RemoteTag, error) {
	refs, err := listRefs(ctx, url)
	if err != nil {
		return nil, err
	}
	return tagsOf(refs, pattern), nil
}

// tagsOf picks the tags matching pattern out of a remote's refs, ordered
// by version.
func tagsOf(refs []*plumbing.Reference, pattern string) []RemoteTag {
	byName := map[string]*RemoteTag{}
	var names []string
	for _, r := range refs {
		name := r.Name().String()
		if !strings.HasPrefix(name, "refs/tags/") || r.Type() != plumbing.HashReference {
			continue
		}
		tag := strings.TrimPrefix(name, "refs/tags/")
		peeled := strings.HasSuffix(tag, "^{}")
		tag = strings.TrimSuffix(tag, "^{}")
		if !MatchTag(pattern, tag) {
			continue
		}
		t := byName[tag]
		if t == nil {
			t = &RemoteTag{Name: tag}
			byName[tag] = t
			names = append(names, tag)
		}
		if peeled {
			t.Commit = r.Hash().String()
		} else {
			t.Ref = r.Hash().String()
			if t.Commit == "" {
				t.Commit = t.Ref
			}
		}
	}
	SortTags(names)
	out := make([]RemoteTag, 0, len(names))
	for _, n := range names {
		out = append(out, *byName[n])
	}
	return out
}

// headOf is the commit refs/heads/<branch> points at among a remote's
// refs ("" when the remote has no such branch).
func headOf(refs []*plumbing.Reference, branch string) string {
	want := plumbing.NewBranchReferenceName(branch)
	for _, r := range refs {
		if r.Name() == want && r.Type() == plumbing.HashReference {
			return r.Hash().String()
		}
	}
	return ""
}

// HeadEntry names a branch head in a watch's history: branch@<12 hex>.
func HeadEntry(branch, commit string) string {
	return branch + "@" + short(commit)
}

// IsHeadEntry reports whether a history entry of w is a branch head
// (HeadEntry) rather than a tag.
func IsHeadEntry(w *store.Watch, entry string) bool {
	if w.Branch == "" || !strings.HasPrefix(entry, w.Branch+"@") {
		return false
	}
	h := strings.TrimPrefix(entry, w.Branch+"@")
	if len(h) != 12 {
		return false
	}
	for _, c := range h {
		if !strings.ContainsRune("0123456789abcdef", c) {
			return false
		}
	}
	return true
}

// FetchHead fetches branch from url into repoPath under local and returns
// want, the head commit the listing saw. When the branch moved between
// the listing and the fetch, want is still what is evaluated (the new
// head normally contains it); a head that was force-pushed away and is
// no longer fetchable is an infra error (the next tick sees the new head).
func FetchHead(ctx context.Context, repoPath, url, branch, local, want string) (string, error) {
	got, err := FetchRef(ctx, repoPath, url, plumbing.NewBranchReferenceName(branch).String(), local)
	if err != nil {
		return "", fmt.Errorf("branch %s: %w", branch, err)
	}
	if got == want {
		return got, nil
	}
	repo, st, _, err := gittree.Open(repoPath, 8)
	if err != nil {
		return "", fail.Inputf("local tree %s: %v", repoPath, err)
	}
	defer st.Close()
	if _, err := repo.CommitObject(plumbing.NewHash(want)); err != nil {
		return "", fail.Infraf("branch %s of %s moved from %s to %s and %s is no longer fetchable: %v",
			branch, url, short(want), short(got), short(want), err)
	}
	return want, nil
}

func listRefs(ctx context.Context, url string) ([]*plumbing.Reference, error) {
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, ListTimeout)
		defer cancel()
	}
	return gittree.ListRefs(ctx, url)
}

// FetchRef fetches only what ref (a tag or branch name on the remote, or
// a full ref) needs into the local repository at repoPath, storing it
// under local (e.g. refs/tags/v6.2-rc3). Objects the repository already
// has are not transferred (the fetch negotiates from its refs). It
// returns the commit the ref peels to.
func FetchRef(ctx context.Context, repoPath, url, ref, local string) (string, error) {
	return gittree.Fetch(ctx, repoPath, url, ref, local, nil)
}

// FetchTag fetches one tag (and only the objects it needs) into repoPath
// as refs/tags/<tag>.
func FetchTag(ctx context.Context, repoPath, url, tag string) (string, error) {
	ref := "refs/tags/" + strings.TrimPrefix(tag, "refs/tags/")
	c, err := FetchRef(ctx, repoPath, url, ref, ref)
	if err != nil {
		return "", fmt.Errorf("tag %s: %w", tag, err)
	}
	return c, nil
}
