// Package scale checks and measures patcheval's git operations on a
// repository of linux.git's shape (bench/bigtree.sh: a generated history
// of up to a million commits, thousands of tags, one repacked pack of
// millions of objects) against the git CLI doing the same: resolve a tag,
// apply the seed backport on a deep tag, check out fresh and
// incrementally, list tags in version order, the first-parent range of a
// bisection, ls-remote and fetch of a new tag and the push of the applied
// backport (the GitHub reporter's gittree.Push) over smart HTTP.
//
// The test (PATCHEVAL_SCALE_TESTS=1; PATCHEVAL_SCALE_COMMITS sets the size,
// default 100000; PATCHEVAL_SCALE_TREE names an existing repository to use
// instead, e.g. a real linux.git clone with tags) compares every result
// with git's; bench/scale.sh times
// each operation (wall and peak RSS) beside git with the scaleop command.
package scale

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// BigTree makes (or finds in the cache) the repository of n commits with
// bench/bigtree.sh under root (the module root) and returns its path.
// The script's progress goes to stderr.
func BigTree(root string, n int) (string, error) {
	cmd := exec.Command("bash", filepath.Join(root, "bench", "bigtree.sh"), "-n", fmt.Sprint(n))
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("bench/bigtree.sh -n %d: %v\n%s", n, err, stderr.String())
	}
	os.Stderr.Write(stderr.Bytes())
	p := strings.TrimSpace(string(out))
	if _, err := os.Stat(filepath.Join(p, "bigtree.json")); err != nil {
		return "", fmt.Errorf("bench/bigtree.sh -n %d printed %q, not a finished repository", n, p)
	}
	return p, nil
}
