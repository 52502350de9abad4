package follow

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"

	"github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/config"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/object"
	"github.com/go-git/go-git/v5/plumbing/transport"

	"github.com/patcheval/patcheval/internal/fail"
	"github.com/patcheval/patcheval/internal/gittree"
)

// epochURL is the git URL of epoch n of a public-inbox v2 list.
func epochURL(list string, n int) string { return fmt.Sprintf("%s/git/%d.git", list, n) }

// epochExists asks the server whether epoch n exists (the smart-HTTP
// ref advertisement answers 200).
func (f *Follower) epochExists(ctx context.Context, list string, n int) (bool, error) {
	u := epochURL(list, n) + "/info/refs?service=git-upload-pack"
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return false, err
	}
	resp, err := f.httpClient().Do(req)
	if err != nil {
		return false, fail.Infraf("follow: %s: %w", u, err)
	}
	defer resp.Body.Close()
	io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<20))
	switch {
	case resp.StatusCode == http.StatusOK:
		return true, nil
	case resp.StatusCode == http.StatusNotFound:
		return false, nil
	}
	return false, fail.Infraf("follow: %s: %s", u, resp.Status)
}

// newestEpoch finds the newest epoch at or after from (0 when from < 0).
func (f *Follower) newestEpoch(ctx context.Context, list string, from int) (int, error) {
	n := max(from, 0)
	ok, err := f.epochExists(ctx, list, n)
	if err != nil {
		return 0, err
	}
	if !ok {
		if from > 0 {
			return 0, fail.Infraf("follow: %s: epoch %d is gone", list, from)
		}
		return 0, fail.Inputf("follow: %s has no git epoch 0 (is it a public-inbox v2 list URL?)", list)
	}
	for {
		ok, err := f.epochExists(ctx, list, n+1)
		if err != nil {
			return 0, err
		}
		if !ok {
			return n, nil
		}
		n++
	}
}

// mirror opens (creating it) the local bare repository the list's epochs
// are fetched into, with internal/gittree: an epoch of a busy list holds
// hundreds of thousands of commits and every poll adds a pack, and
// gittree maps the pack indexes where go-git's own storage loads them
// all and hashes every object's offset at the first delta. Close the
// storage after the last read.
func (f *Follower) mirror(name string) (*git.Repository, *gittree.Storage, error) {
	dir := filepath.Join(f.Dir, name+".git")
	if _, err := os.Stat(filepath.Join(dir, "HEAD")); errors.Is(err, os.ErrNotExist) {
		if err := os.MkdirAll(filepath.Dir(dir), 0o755); err != nil {
			return nil, nil, fail.Infraf("follow: %w", err)
		}
		if _, err := git.PlainInit(dir, true); err != nil {
			return nil, nil, fail.Infraf("follow: mirror %s: %w", dir, err)
		}
	}
	r, st, _, err := gittree.Open(dir, 16)
	if err != nil {
		return nil, nil, fail.Infraf("follow: mirror %s: %w", dir, err)
	}
	if _, err := r.Remote("origin"); errors.Is(err, git.ErrRemoteNotFound) {
		if _, err := r.CreateRemote(&config.RemoteConfig{Name: "origin", URLs: []string{"http://invalid/"}}); err != nil {
			st.Close()
			return nil, nil, fail.Infraf("follow: mirror %s: %w", dir, err)
		}
	}
	return r, st, nil
}

// fetchEpoch fetches epoch n's master into refs/follow/<n> and returns
// its head.
func (f *Follower) fetchEpoch(ctx context.Context, r *git.Repository, list string, n int) (plumbing.Hash, error) {
	ref := plumbing.ReferenceName("refs/follow/" + strconv.Itoa(n))
	err := r.FetchContext(ctx, &git.FetchOptions{
		RemoteName: "origin",
		RemoteURL:  epochURL(list, n),
		RefSpecs:   []config.RefSpec{config.RefSpec("+refs/heads/master:" + ref.String())},
		Tags:       git.NoTags,
	})
	if errors.Is(err, transport.ErrEmptyRemoteRepository) {
		return plumbing.ZeroHash, nil // a new list: no message yet
	}
	if err != nil && !errors.Is(err, git.NoErrAlreadyUpToDate) {
		return plumbing.ZeroHash, fail.Infraf("follow: fetching %s: %w", epochURL(list, n), err)
	}
	h, err := r.Reference(ref, true)
	if err != nil {
		return plumbing.ZeroHash, fail.Infraf("follow: %s after fetching: %w", ref, err)
	}
	return h.Hash(), nil
}

// newCommits walks epoch history back from head to stop (exclusive; zero:
// to the root, or to the first commit older than f.since) and returns the
// commits oldest first. public-inbox v2 history is linear: one commit
// per message.
func newCommits(r *git.Repository, head, stop plumbing.Hash, keep func(*object.Commit) bool) ([]*object.Commit, error) {
	var out []*object.Commit
	h := head
	for h != stop && !h.IsZero() {
		c, err := r.CommitObject(h)
		if err != nil {
			return nil, fail.Infraf("follow: commit %s: %w", h, err)
		}
		if keep != nil && !keep(c) {
			break
		}
		out = append(out, c)
		if c.NumParents() == 0 {
			break
		}
		h = c.ParentHashes[0]
	}
	for i, j := 0, len(out)-1; i < j; i, j = i+1, j-1 {
		out[i], out[j] = out[j], out[i]
	}
	return out, nil
}

// messageOf is the raw message a public-inbox v2 commit adds (its "m"
// blob); ok is false for a commit that removes one ("d").
func messageOf(c *object.Commit) (raw []byte, ok bool, err error) {
	t, err := c.Tree()
	if err != nil {
		return nil, false, err
	}
	e, err := t.File("m")
	if errors.Is(err, object.ErrFileNotFound) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, err
	}
	rd, err := e.Reader()
	if err != nil {
		return nil, false, err
	}
	defer rd.Close()
	raw, err = io.ReadAll(io.LimitReader(rd, 64<<20))
	return raw, err == nil, err
}
