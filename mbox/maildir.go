package mbox

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"

	"github.com/patcheval/patcheval/internal/fail"
)

// ReadMaildir reads every message in a maildir (its cur/ and new/
// sub-directories; tmp/ holds deliveries in progress and is skipped), in
// file-name order. A directory without cur/ or new/ is a fail.Input error.
func ReadMaildir(dir string) ([]*Message, error) {
	var files []string
	found := false
	for _, sub := range []string{"cur", "new"} {
		ents, err := os.ReadDir(filepath.Join(dir, sub))
		if errors.Is(err, os.ErrNotExist) {
			continue
		}
		if err != nil {
			return nil, fail.Infra(fmt.Errorf("maildir %s: %w", dir, err))
		}
		found = true
		for _, e := range ents {
			if e.Type().IsRegular() && e.Name()[0] != '.' {
				files = append(files, filepath.Join(dir, sub, e.Name()))
			}
		}
	}
	if !found {
		return nil, fail.Inputf("%s: not a maildir: it has no cur/ or new/ directory", dir)
	}
	sort.Strings(files)
	var out []*Message
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			return nil, fail.Infra(fmt.Errorf("maildir %s: %w", dir, err))
		}
		m, err := ParseMessage(data, f)
		if err != nil {
			return nil, err
		}
		out = append(out, m)
	}
	if len(out) == 0 {
		return nil, fail.Inputf("%s: maildir has no messages", dir)
	}
	return out, nil
}
