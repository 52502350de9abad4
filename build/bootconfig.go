package build

import (
	"embed"
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
// missing) and returns its path, for use as a Request Fragment.
func WriteBootConfig(archName, dir string) (string, error) {
	name, data := BootConfig(archName)
	if name == "" {
		return "", fail.Inputf("no boot config for architecture %q (have %s)", archName, strings.Join(arch.Names(), ", "))
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", fail.Infra(err)
	}
	p := filepath.Join(dir, name)
	if old, err := os.ReadFile(p); err == nil && string(old) == string(data) {
		return p, nil
	}
	tmp, err := os.CreateTemp(dir, ".tmp-"+name)
	if err != nil {
		return "", fail.Infra(err)
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
		return "", fail.Infra(werr)
	}
	return p, nil
}
