package gittree

import (
	"container/heap"
	"context"
	"fmt"
	"io"

	git "github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/filemode"
	"github.com/go-git/go-git/v5/plumbing/format/packfile"
	"github.com/go-git/go-git/v5/plumbing/object"
	"github.com/go-git/go-git/v5/plumbing/protocol/packp"
	"github.com/go-git/go-git/v5/plumbing/protocol/packp/capability"
	"github.com/go-git/go-git/v5/plumbing/storer"
	"github.com/go-git/go-git/v5/plumbing/transport"
	"github.com/go-git/go-git/v5/plumbing/transport/client"
)

// PushStats says what a Push did.
type PushStats struct {
	// Walked is the number of commits the negotiation read (the pushed
	// side and the remote's side down to where they meet).
	Walked int
	// Commits and Objects are what the pack held (commits included in
	// Objects).
	Commits, Objects int
	// UpToDate: the remote ref already named the commit; nothing was sent.
	UpToDate bool
}

// Push sets ref on the remote at url to commit (a forced update, like
// `git push url +commit:ref`) and sends only what the remote lacks.
//
// go-git's Remote.Push computes the objects to send by walking every
// object reachable from the remote's refs (the whole history of a
// linux.git mirror: every tree of every commit) and opens the repository
// with its own storage. Push instead walks commits newest first from the
// pushed commit and from the remote's advertised refs that exist locally,
// until only commits the remote has are left (git's negotiation, without
// the round trips: the remote's refs are in its advertisement), and takes
// from each commit to send only the tree entries that differ from all of
// its parents' at the same path: the others are in a parent's tree, which
// the remote has or is sent. The cost grows with the commits between the
// pushed commit and the remote's refs, not with the history. Nothing is
// written to the local repository.
func Push(ctx context.Context, r *git.Repository, url string, auth transport.AuthMethod, commit plumbing.Hash, ref plumbing.ReferenceName) (PushStats, error) {
	var ps PushStats
	if _, err := r.CommitObject(commit); err != nil {
		return ps, fmt.Errorf("push: commit %s: %w", commit, err)
	}
	ep, err := transport.NewEndpoint(url)
	if err != nil {
		return ps, fmt.Errorf("push: %w", err)
	}
	cl, err := client.NewClient(ep)
	if err != nil {
		return ps, fmt.Errorf("push: %w", err)
	}
	sess, err := cl.NewReceivePackSession(ep, auth)
	if err != nil {
		return ps, err
	}
	defer sess.Close()
	ar, err := sess.AdvertisedReferencesContext(ctx)
	if err != nil && err != transport.ErrEmptyRemoteRepository {
		return ps, err
	}
	old := plumbing.ZeroHash
	var haves []plumbing.Hash
	if ar != nil {
		old = ar.References[ref.String()]
		for name, h := range ar.References {
			if p, ok := ar.Peeled[name]; ok {
				h = p
			}
			haves = append(haves, h)
		}
	} else {
		ar = packp.NewAdvRefs()
	}
	if old == commit {
		ps.UpToDate = true
		return ps, nil
	}
	commits, walked, err := commitsToSend(ctx, r.Storer, commit, haves)
	ps.Walked = walked
	if err != nil {
		return ps, err
	}
	objs, err := objectsToSend(r.Storer, commits)
	if err != nil {
		return ps, err
	}
	ps.Commits, ps.Objects = len(commits), len(objs)

	req := packp.NewReferenceUpdateRequestFromCapabilities(ar.Capabilities)
	req.Commands = []*packp.Command{{Name: ref, Old: old, New: commit}}
	rd, wr := io.Pipe()
	req.Packfile = rd
	done := make(chan error, 1)
	go func() {
		// The encoder sees only EncodedObjectStorer: given the Storage
		// itself, it would ask go-git's DeltaObject, which loads every
		// pack index.
		e := packfile.NewEncoder(wr, objectsOnly{r.Storer}, !ar.Capabilities.Supports(capability.OFSDelta))
		_, err := e.Encode(objs, 10)
		done <- wr.CloseWithError(err)
	}()
	rs, err := sess.ReceivePack(ctx, req)
	if err != nil {
		rd.Close()
		<-done
		return ps, err
	}
	if err := <-done; err != nil {
		return ps, fmt.Errorf("push: writing the pack: %w", err)
	}
	if rs != nil {
		if err := rs.Error(); err != nil {
			return ps, err
		}
	}
	return ps, nil
}

type objectsOnly struct{ storer.EncodedObjectStorer }

const (
	flagSend = 1 << iota // reachable from the pushed commit
	flagHave             // reachable from a remote ref
)

// commitsToSend walks from commit and the remote's refs (haves, those
// that are local commits) newest first and returns the commits reachable
// from commit but not from a have, oldest last, and how many commits it
// read. It stops when every commit still queued is the remote's.
func commitsToSend(ctx context.Context, s storer.EncodedObjectStorer, commit plumbing.Hash, haves []plumbing.Hash) ([]*object.Commit, int, error) {
	flags := map[plumbing.Hash]uint8{}
	q := &commitQueue{}
	sendQueued := 0
	var add func(h plumbing.Hash, f uint8) error
	add = func(h plumbing.Hash, f uint8) error {
		old, seen := flags[h]
		if seen && old|f == old {
			return nil
		}
		flags[h] = old | f
		if seen {
			// Queued or done: a queued entry reads the flag when popped;
			// a done send commit that turns out to be the remote's
			// passes it on to its parents.
			if q.has(h) {
				if old&flagHave == 0 && f&flagHave != 0 {
					sendQueued--
				}
				return nil
			}
		}
		c, err := object.GetCommit(s, h)
		if f == flagHave && err == plumbing.ErrObjectNotFound {
			// receive-pack does not advertise peeled tags: peel a
			// tag we have here.
			if t, terr := object.GetTag(s, h); terr == nil {
				return add(t.Target, f)
			}
		}
		if err != nil {
			if f == flagHave {
				return nil // a remote ref we do not have, or not a commit
			}
			return fmt.Errorf("push: commit %s: %w", h, err)
		}
		heap.Push(q, c)
		if flags[h]&flagHave == 0 {
			sendQueued++
		}
		return nil
	}
	if err := add(commit, flagSend); err != nil {
		return nil, 0, err
	}
	for _, h := range haves {
		if err := add(h, flagHave); err != nil {
			return nil, 0, err
		}
	}
	var order []*object.Commit
	walked := 0
	for sendQueued > 0 {
		if walked%1024 == 0 {
			if err := ctx.Err(); err != nil {
				return nil, walked, err
			}
		}
		c := heap.Pop(q).(*object.Commit)
		walked++
		f := flags[c.Hash]
		if f&flagHave == 0 {
			sendQueued--
			order = append(order, c)
		} else {
			f = flagHave // what the remote has needs no send mark below it
		}
		for _, p := range c.ParentHashes {
			if err := add(p, f); err != nil {
				return nil, walked, err
			}
		}
	}
	// Clock skew can let a commit be taken before the remote's side
	// reached it; those are the remote's after all.
	out := order[:0]
	for _, c := range order {
		if flags[c.Hash]&flagHave == 0 {
			out = append(out, c)
		}
	}
	return out, walked, nil
}

// objectsToSend is the commits and, of each commit's tree, the objects
// that differ from every parent's at the same path (recursively).
func objectsToSend(s storer.EncodedObjectStorer, commits []*object.Commit) ([]plumbing.Hash, error) {
	seen := map[plumbing.Hash]bool{}
	var out []plumbing.Hash
	for _, c := range commits {
		out = append(out, c.Hash)
		var parents []plumbing.Hash
		for _, p := range c.ParentHashes {
			pc, err := object.GetCommit(s, p)
			if err != nil {
				return nil, fmt.Errorf("push: parent %s of %s: %w", p, c.Hash, err)
			}
			parents = append(parents, pc.TreeHash)
		}
		var err error
		if out, err = newTreeObjects(s, c.TreeHash, parents, seen, out); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// newTreeObjects appends tree h and what in it differs from all of
// parents (the trees at the same path in the parent commits; zero where
// the path is not a tree there).
func newTreeObjects(s storer.EncodedObjectStorer, h plumbing.Hash, parents []plumbing.Hash, seen map[plumbing.Hash]bool, out []plumbing.Hash) ([]plumbing.Hash, error) {
	for _, p := range parents {
		if p == h {
			return out, nil
		}
	}
	if seen[h] {
		return out, nil
	}
	seen[h] = true
	out = append(out, h)
	t, err := object.GetTree(s, h)
	if err != nil {
		return nil, fmt.Errorf("push: tree %s: %w", h, err)
	}
	var pts []*object.Tree
	for _, p := range parents {
		if p.IsZero() {
			continue
		}
		pt, err := object.GetTree(s, p)
		if err != nil {
			return nil, fmt.Errorf("push: tree %s: %w", p, err)
		}
		pts = append(pts, pt)
	}
	for _, e := range t.Entries {
		if e.Mode == filemode.Submodule {
			continue
		}
		var sub []plumbing.Hash
		same := false
		for _, pt := range pts {
			pe, err := pt.FindEntry(e.Name)
			if err != nil {
				continue
			}
			if pe.Hash == e.Hash {
				same = true
				break
			}
			if pe.Mode == filemode.Dir {
				sub = append(sub, pe.Hash)
			}
		}
		if same {
			continue
		}
		if e.Mode == filemode.Dir {
			if out, err = newTreeObjects(s, e.Hash, sub, seen, out); err != nil {
				return nil, err
			}
		} else if !seen[e.Hash] {
			seen[e.Hash] = true
			out = append(out, e.Hash)
		}
	}
	return out, nil
}

// commitQueue is a max-heap of commits by committer time.
type commitQueue struct {
	cs     []*object.Commit
	queued map[plumbing.Hash]bool
}

func (q *commitQueue) has(h plumbing.Hash) bool { return q.queued[h] }
func (q *commitQueue) Len() int                 { return len(q.cs) }
func (q *commitQueue) Less(i, j int) bool {
	return q.cs[i].Committer.When.After(q.cs[j].Committer.When)
}
func (q *commitQueue) Swap(i, j int) { q.cs[i], q.cs[j] = q.cs[j], q.cs[i] }
func (q *commitQueue) Push(x any) {
	c := x.(*object.Commit)
	if q.queued == nil {
		q.queued = map[plumbing.Hash]bool{}
	}
	q.queued[c.Hash] = true
	q.cs = append(q.cs, c)
}
func (q *commitQueue) Pop() any {
	c := q.cs[len(q.cs)-1]
	q.cs = q.cs[:len(q.cs)-1]
	delete(q.queued, c.Hash)
	return c
}
