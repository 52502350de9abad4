package gittree

import (
	"bytes"
	"fmt"

	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/object"
)

// ReadCommit reads commit h and decodes what a history walk needs: the
// tree, the parents, author, committer and the message, as go-git's
// decoder finds them (tree first, the contiguous parent lines, author and
// committer at their places; other headers such as gpgsig, mergetag and
// encoding are skipped and left empty). It parses the object's bytes in
// place, where go-git's decoder reads them line by line through a
// buffered reader and copies the message: on a first-parent walk over
// 10,000 commits of a linux.git-shaped tree that decoding was a fifth of
// the walk's CPU.
//
// The commit is read through the storage's read-ahead window for walks
// (objectReader.WalkObject) and not cached.
//
// The commit is detached: its Tree, Parent and Parents methods have no
// storage to read from (they fail or panic); follow ParentHashes with
// ReadCommit.
func (s *Storage) ReadCommit(h plumbing.Hash) (*object.Commit, error) {
	typ, b, err := s.objs.WalkObject(h)
	if err != nil {
		return nil, err
	}
	if typ != plumbing.CommitObject {
		return nil, fmt.Errorf("object %s is a %s, not a commit", h, typ)
	}
	c := &object.Commit{Hash: h}
	rest := b
	line := func() ([]byte, bool) {
		if len(rest) == 0 {
			return nil, false
		}
		i := bytes.IndexByte(rest, '\n')
		if i < 0 {
			l := rest
			rest = nil
			return l, true
		}
		l := rest[:i]
		rest = rest[i+1:]
		return l, true
	}
	hash := func(what string, v []byte) (plumbing.Hash, error) {
		x, ok := parseHash(v)
		if !ok {
			return x, fmt.Errorf("commit %s: malformed %s header %q", h, what, v)
		}
		return x, nil
	}
	l, ok := line()
	v, isTree := bytes.CutPrefix(l, []byte("tree "))
	if !ok || !isTree {
		return nil, fmt.Errorf("commit %s: the tree header is not first", h)
	}
	if c.TreeHash, err = hash("tree", v); err != nil {
		return nil, err
	}
	// The headers in go-git's (and git's) order: parents, author,
	// committer; anything else up to the blank line is skipped.
	state := 0 // 0 parents, 1 author, 2 committer, 3 other headers
	for {
		l, ok = line()
		if !ok {
			return c, nil // no message
		}
		if len(l) == 0 {
			break
		}
		if state == 0 {
			if v, ok := bytes.CutPrefix(l, []byte("parent ")); ok {
				p, err := hash("parent", v)
				if err != nil {
					return nil, err
				}
				c.ParentHashes = append(c.ParentHashes, p)
				continue
			}
			state = 1
		}
		if state == 1 {
			state = 2
			if v, ok := bytes.CutPrefix(l, []byte("author ")); ok {
				c.Author.Decode(v)
				continue
			}
		}
		if state == 2 {
			state = 3
			if v, ok := bytes.CutPrefix(l, []byte("committer ")); ok {
				c.Committer.Decode(v)
				continue
			}
		}
	}
	c.Message = string(rest)
	return c, nil
}
