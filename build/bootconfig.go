package build

import (
	"bytes"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"os"
	"path/filepath"
	"strings"

	"github.com/patcheval/patcheval/internal/arch"
	"github.com/patcheval/patcheval/internal/fail"
)

//go:embed configs/*.config
var bootConfigs embed.FS

// BootConfigBase is the make target the boot fragments merge over.
const BootConfigBase = "tinyconfig"

// BootConfig returns the fragment (merged over tinyconfig) that makes a
// small kernel boot on the arch's QEMU machine: ppc64le pseries, arm64
// virt, x86_64 q35. name is the file name, "" for an unknown arch.
func BootConfig(archName string) (name string, data []byte) {
	a, ok := arch.Find(archName)
	if !ok {
		return "", nil
	}
	name = a.BootConfig + ".config"
	data, err := bootConfigs.ReadFile("configs/" + name)
	if err != nil {
		return "", nil
	}
	return name, data
}

// WriteBootConfig writes the arch's boot fragment into dir (created when
// missing) and returns its path, for use as a Request Fragment. The file
// is dir/<content hash>/<name>: one name per content, so processes of
// different patcheval versions sharing a cache (a test waiting on the
// build lock, a worker not yet upgraded) never read each other's fragment
// between writing theirs and Build reading it. The file's base name stays
// the fragment's name.
func WriteBootConfig(archName, dir string) (string, error) {
	name, data := BootConfig(archName)
	if name == "" {
		return "", fail.Inputf("no boot config for architecture %q (have %s)", archName, strings.Join(arch.Names(), ", "))
	}
	p, err := writeFragment(dir, name, data)
	if err != nil {
		return "", fail.Infra(err)
	}
	return p, nil
}

// writeFragment writes data as dir/<sha256 prefix of data>/name unless
// that file already holds it, and returns the path.
func writeFragment(dir, name string, data []byte) (string, error) {
	sum := sha256.Sum256(data)
	sub := filepath.Join(dir, hex.EncodeToString(sum[:8]))
	p := filepath.Join(sub, name)
	if old, err := os.ReadFile(p); err == nil && bytes.Equal(old, data) {
		return p, nil
	}
	if err := os.MkdirAll(sub, 0o755); err != nil {
		return "", err
	}
	tmp, err := os.CreateTemp(sub, ".tmp-"+name)
	if err != nil {
		return "", err
	}
	_, werr := tmp.Write(data)
	if cerr := tmp.Close(); werr == nil {
		werr = cerr
	}
	if werr == nil {
		werr = os.Chmod(tmp.Name(), 0o644)
	}
	if werr == nil {
		werr = os.Rename(tmp.Name(), p)
	}
	if werr != nil {
		os.Remove(tmp.Name())
		return "", werr
	}
	return p, nil
}
