package apply

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/patcheval/patcheval/internal/gittree/gittest"
)

var (
	linuxOnce sync.Once
	linuxPath string
	linuxErr  error
)

// linuxTree returns the bare 6.1 kernel repository made by
// scripts/linux-tree.sh (read-only: clone it before writing).
func linuxTree(t testing.TB) string {
	t.Helper()
	if os.Getenv("PATCHEVAL_SKIP_SLOW") == "1" {
		t.Skip("PATCHEVAL_SKIP_SLOW=1: skipping the kernel tree test")
	}
	linuxOnce.Do(func() {
		script, err := filepath.Abs("../../scripts/linux-tree.sh")
		if err != nil {
			linuxErr = err
			return
		}
		var stderr bytes.Buffer
		cmd := exec.Command("bash", script)
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		if err != nil {
			linuxErr = fmt.Errorf("%s: %v\n%s", script, err, stderr.String())
			return
		}
		linuxPath = strings.TrimSpace(string(out))
	})
	if linuxErr != nil {
		t.Fatal(linuxErr)
	}
	return linuxPath
}

// The git test helpers are gittest's.
var (
	cloneBare  = gittest.CloneBare
	gitRun     = gittest.Run
	gitCmd     = gittest.Cmd
	lsTree     = gittest.LsTree
	diffLists  = gittest.DiffLists
	newRepo    = gittest.NewRepo
	writeFiles = gittest.WriteFiles
	dirListing = gittest.DirListing
)
