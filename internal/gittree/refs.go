package gittree

import (
	"bytes"
	"errors"
	"os"
	"strings"
	"syscall"

	"github.com/go-git/go-billy/v5/util"
	"github.com/go-git/go-git/v5/plumbing"
)

// Reference reads the reference n: a loose ref file through go-git, a
// packed one by searching packed-refs for its line. go-git's storage
// parses packed-refs line by line into a Reference for every line until
// the name matches, for every name it tries: resolving "v6.2" tries
// "v6.2", "refs/v6.2" and "refs/tags/v6.2", so two whole parses and a
// half on a tree with thousands of tags and remote branches (12,500
// allocations to resolve one tag among 2,000), and it grows with every
// ref the tree has. Here each try is one read of the file and one byte
// search, no allocation per ref.
func (s *Storage) Reference(n plumbing.ReferenceName) (*plumbing.Reference, error) {
	name := n.String()
	if name == "" || strings.ContainsAny(name, " \n\\") || strings.Contains(name, "..") ||
		strings.HasPrefix(name, "/") || strings.HasPrefix(name, ".") {
		return s.Storage.Reference(n) // go-git's validation and error
	}
	// A loose ref, or one whose file cannot be looked at or whose
	// packed-refs cannot be read, is go-git's to read (and to report).
	fs := s.dot.Fs()
	if fi, err := fs.Stat(fs.Join(strings.Split(name, "/")...)); err == nil && !fi.IsDir() || err != nil && !errors.Is(err, os.ErrNotExist) {
		return s.Storage.Reference(n)
	}
	b, err := s.packedRefs()
	if errors.Is(err, os.ErrNotExist) {
		return nil, plumbing.ErrReferenceNotFound
	}
	if err != nil {
		return s.Storage.Reference(n)
	}
	h, ok := packedRef(b, name)
	if !ok {
		return nil, plumbing.ErrReferenceNotFound
	}
	return plumbing.NewHashReference(n, h), nil
}

// packedRef finds "<hex> name" as a whole line of a packed-refs file.
func packedRef(b []byte, name string) (plumbing.Hash, bool) {
	const hexLen = 40
	want := " " + name
	for i := 0; ; {
		j := bytes.Index(b[i:], []byte(want))
		if j < 0 {
			return plumbing.ZeroHash, false
		}
		j += i
		end := j + len(want)
		i = j + 1
		if end < len(b) && b[end] != '\n' && b[end] != '\r' {
			continue
		}
		start := j - hexLen
		if start < 0 || start > 0 && b[start-1] != '\n' {
			continue
		}
		h, ok := parseHash(b[start:j])
		if !ok {
			continue
		}
		return h, true
	}
}

// packedRefs is the packed-refs file's content, read again only when its
// size, modification time, inode or change time differ (a pack-refs, a
// fetch, a ref deleted).
func (s *Storage) packedRefs() ([]byte, error) {
	fs := s.dot.Fs()
	fi, err := fs.Stat("packed-refs")
	if err != nil {
		return nil, err
	}
	s.refsMu.Lock()
	defer s.refsMu.Unlock()
	id := fileIDOf(fi)
	if s.packed != nil && id == s.packedID {
		return s.packed, nil
	}
	b, err := util.ReadFile(fs, "packed-refs")
	if err != nil {
		return nil, err
	}
	s.packed, s.packedID = b, id
	return b, nil
}

// fileID tells a rewritten file from the one read before: its size and
// mtime, and (git rewrites packed-refs by renaming a new file over it,
// and a rewrite of the same size within one mtime tick still changes
// them) its inode and ctime.
type fileID struct {
	size, mtime int64 // bytes, ns
	dev, ino    uint64
	ctime       int64 // ns
}

func fileIDOf(fi os.FileInfo) fileID {
	id := fileID{size: fi.Size(), mtime: fi.ModTime().UnixNano()}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		id.dev, id.ino, id.ctime = uint64(st.Dev), st.Ino, st.Ctim.Nano()
	}
	return id
}
