package userland

import (
	"context"
	"errors"
	"io"
	"os/exec"
	"path/filepath"

	"github.com/patcheval/patcheval/internal/arch"
	"github.com/patcheval/patcheval/internal/debian"
	"github.com/patcheval/patcheval/internal/xdg"
)

// aptState is where a guest architecture's packages are looked up and
// fetched: the system's apt (its lists know the architecture through
// dpkg --add-architecture), or, for an architecture whose arch row names
// a DebSuite (riscv64: trixie, which bookworm does not build), a private
// apt state of that suite alone (internal/debian), shared under the cache
// directory.
type aptState struct {
	private *debian.Apt
}

// aptFor is the apt state of debArch.
func aptFor(debArch, cacheDir string, log io.Writer) *aptState {
	for _, a := range arch.All() {
		if a.DebArch == debArch && a.DebSuite != "" {
			if cacheDir == "" {
				cacheDir = xdg.CacheDir()
			}
			return &aptState{private: &debian.Apt{Dir: filepath.Join(cacheDir, "debian", "apt-"+debArch+"-"+a.DebSuite),
				Suites: []string{a.DebSuite}, Arch: debArch, Log: log}}
		}
	}
	return &aptState{}
}

// run runs apt-cache or apt-get with args in dir and returns its output
// (combined for apt-get, as its errors are what is worth showing).
func (ap *aptState) run(ctx context.Context, dir, tool string, args ...string) ([]byte, error) {
	if ap.private != nil {
		out, err := ap.private.Run(ctx, dir, tool, args...)
		var ee *exec.ExitError
		if errors.As(err, &ee) && tool == "apt-get" {
			out = append(out, ee.Stderr...)
		}
		return out, err
	}
	cmd := exec.CommandContext(ctx, tool, args...)
	cmd.Dir = dir
	if tool == "apt-get" {
		return cmd.CombinedOutput()
	}
	return cmd.Output()
}

// listsDir holds the package lists whose change invalidates a resolution.
func (ap *aptState) listsDir() string {
	if ap.private != nil {
		return ap.private.ListsDir()
	}
	return "/var/lib/apt/lists"
}
