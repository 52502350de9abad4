package maintainers

import (
	"bytes"
	"path"

	"github.com/go-git/go-git/v5/plumbing/filemode"
	"github.com/go-git/go-git/v5/plumbing/object"

	"github.com/patcheval/patcheval/internal/fail"
)

// FromCommit parses the MAINTAINERS file of commit c, with the commit's
// directories deciding which F:/X: patterns name a directory.
func FromCommit(c *object.Commit) (*File, error) {
	root, err := c.Tree()
	if err != nil {
		return nil, fail.Infraf("MAINTAINERS of %s: %v", c.Hash, err)
	}
	f, err := root.File("MAINTAINERS")
	if err != nil {
		return nil, fail.Inputf("commit %.12s has no MAINTAINERS file: %v", c.Hash, err)
	}
	text, err := f.Contents()
	if err != nil {
		return nil, fail.Infraf("MAINTAINERS of %s: %v", c.Hash, err)
	}
	dirs := map[string]bool{}
	if err := walkDirs(root, "", dirs); err != nil {
		return nil, fail.Infraf("MAINTAINERS of %s: directories: %v", c.Hash, err)
	}
	return Parse(bytes.NewReader([]byte(text)), "MAINTAINERS ("+c.Hash.String()[:12]+")",
		func(p string) bool { return dirs[path.Clean(p)] })
}

// walkDirs records every directory below t (reading tree objects only).
func walkDirs(t *object.Tree, prefix string, dirs map[string]bool) error {
	for _, e := range t.Entries {
		if e.Mode != filemode.Dir {
			continue
		}
		p := e.Name
		if prefix != "" {
			p = prefix + "/" + e.Name
		}
		dirs[p] = true
		sub, err := t.Tree(e.Name)
		if err != nil {
			return err
		}
		if err := walkDirs(sub, p, dirs); err != nil {
			return err
		}
	}
	return nil
}
