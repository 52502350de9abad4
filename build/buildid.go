package build

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"

	"github.com/patcheval/patcheval/internal/buildid"
)

// vmlinuxBuildID is the build-id of out/vmlinux, opened without following
// links out of the build's output (the sandboxed build wrote it); "" when
// there is none.
func vmlinuxBuildID(out string) string {
	f, err := openBelow(out, "vmlinux")
	if err != nil {
		return ""
	}
	defer f.Close()
	id, _ := buildid.FromReaderAt(f, f.Name())
	return id
}

// addBuildID gives an artifact stored before patcheval recorded build-ids
// its vmlinux's, and writes it into its metadata.json: read from the image
// when the image is the ELF vmlinux (ppc64le), else from the workspace's
// vmlinux when that is still the artifact's link (the same System.map).
// It reports whether it found one; the caller rebuilds otherwise (make
// then only relinks what is in the workspace, or nothing).
func (j *job) addBuildID(a *Artifact) bool {
	id := ""
	if buildid.IsELF(a.Image) {
		id, _ = buildid.FromELF(a.Image)
	}
	if id == "" {
		out := filepath.Join(j.ws, "out")
		mine, err1 := os.ReadFile(a.SystemMap)
		theirs, err2 := readBelow(out, "System.map")
		if err1 == nil && err2 == nil && bytes.Equal(mine, theirs) {
			id = vmlinuxBuildID(out)
		}
	}
	if id == "" {
		return false
	}
	a.Meta.Patcheval.BuildID = id
	if data, err := json.MarshalIndent(a.Meta, "", "  "); err == nil {
		tmp := a.MetadataPath + ".tmp"
		if os.WriteFile(tmp, append(data, '\n'), 0o644) == nil {
			os.Rename(tmp, a.MetadataPath)
		}
	}
	return true
}
