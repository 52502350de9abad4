package gittree

import (
	"context"
	"errors"
	"time"

	git "github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/config"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/transport"
	githttp "github.com/go-git/go-git/v5/plumbing/transport/http"
	"github.com/go-git/go-git/v5/storage/memory"

	"github.com/patcheval/patcheval/internal/fail"
	"github.com/patcheval/patcheval/internal/netguard"
)

// ListRefs lists the refs of the remote at url, with peeled tags, as
// `git ls-remote` does: nothing is cloned or written. A ctx ended while
// listing is its own error; any other failure is an infra error naming
// the remote.
func ListRefs(ctx context.Context, url string) ([]*plumbing.Reference, error) {
	dial, err := guardURL(ctx, url)
	if err != nil {
		return nil, err
	}
	rem := git.NewRemote(memory.NewStorage(), &config.RemoteConfig{Name: "list", URLs: []string{dial}})
	refs, err := rem.ListContext(ctx, &git.ListOptions{PeelingOption: git.AppendPeeled})
	if err != nil {
		if errors.Is(err, context.Canceled) && ctx.Err() != nil {
			return nil, fail.Infra(ctx.Err())
		}
		if r := (*netguard.Refused)(nil); errors.As(err, &r) {
			return nil, fail.Input(r)
		}
		return nil, fail.Infraf("listing remote %s: %w", url, err)
	}
	return refs, nil
}

// Fetch fetches only what ref needs from url into the repository at
// repoPath, storing it under local (e.g. refs/tags/v6.2-rc3), and returns
// the commit local peels to. ref is a tag or branch name on the remote, a
// full ref, or a commit hash (the remote must allow fetching by hash:
// uploadpack.allowAnySHA1InWant, as serve's tree endpoint does). Objects
// the repository already has are not transferred (the fetch negotiates
// from its refs). token, when set, is sent as "Authorization: Bearer".
func Fetch(ctx context.Context, repoPath, url, ref, local string, token []byte) (string, error) {
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, 30*time.Minute)
		defer cancel()
	}
	// Open's storage: go-git's own loads every pack index of the local
	// tree before it writes the fetched pack.
	repo, st, _, err := Open(repoPath, 8)
	if err != nil {
		return "", fail.Inputf("local tree %s: %v", repoPath, err)
	}
	defer st.Close()
	spec := config.RefSpec("+" + ref + ":" + local)
	if err := spec.Validate(); err != nil {
		return "", fail.Inputf("fetching %s from %s: bad ref: %v", ref, url, err)
	}
	var auth transport.AuthMethod
	if len(token) > 0 {
		auth = &githttp.TokenAuth{Token: string(token)}
	}
	dial, err := guardURL(ctx, url)
	if err != nil {
		return "", err
	}
	rem := git.NewRemote(repo.Storer, &config.RemoteConfig{Name: "fetch", URLs: []string{dial}})
	err = rem.FetchContext(ctx, &git.FetchOptions{RemoteName: "fetch", RefSpecs: []config.RefSpec{spec}, Tags: git.NoTags, Auth: auth})
	if err != nil && !errors.Is(err, git.NoErrAlreadyUpToDate) {
		if ctx.Err() != nil {
			return "", fail.Infra(ctx.Err())
		}
		if r := (*netguard.Refused)(nil); errors.As(err, &r) {
			return "", fail.Input(r)
		}
		return "", fail.Infraf("fetching %s from %s into %s: %w", ref, url, repoPath, err)
	}
	h, err := repo.ResolveRevision(plumbing.Revision(local + "^{commit}"))
	if err != nil {
		return "", fail.Infraf("fetched %s from %s but %s does not resolve to a commit: %v", ref, url, local, err)
	}
	return h.String(), nil
}
