package build

import (
	"embed"
	"os"
	"path/filepath"
	"strings"

	"github.com/patcheval/patcheval/internal/fail"
)

//go:embed configs/*.config
var bootConfigs embed.FS

// bootConfigNames maps an arch to its QEMU machine's boot fragment.
var bootConfigNames = map[string]string{
	"ppc64le": "ppc64le-pseries.config",
	"arm64":   "arm64-virt.config",
	"x86_64":  "x86_64-q35.config",
}

// BootConfigBase is the make target the boot fragments merge over.
const BootConfigBase = "tinyconfig"

// BootConfig returns the fragment (merged over tinyconfig) that makes a
// small kernel boot on the arch's QEMU machine: ppc64le pseries, arm64
// virt, x86_64 q35. name is the file name, "" for an unknown arch.
func BootConfig(arch string) (name string, data []byte) {
	a, err := NormalizeArch(arch)
	if err != nil {
		return "", nil
	}
	name = bootConfigNames[a]
	data, err = bootConfigs.ReadFile("configs/" + name)
	if err != nil {
		return "", nil
	}
	return name, data
}

// WriteBootConfig writes the arch's boot fragment into dir (created when
// missing) and returns its path, for use as a Request Fragment.
func WriteBootConfig(arch, dir string) (string, error) {
	name, data := BootConfig(arch)
	if name == "" {
		return "", fail.Inputf("no boot config for architecture %q (have %s)", arch, strings.Join(Arches(), ", "))
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
