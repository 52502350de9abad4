// Package arch is patcheval's one table of architecture facts: for each
// architecture it can build and boot, the names it accepts, the kernel's
// ARCH= and arch/ directory, the cross compiler and its Debian package, the
// image make builds, the QEMU machine that boots it, the GOARCH of the guest
// agent and the boot config fragment shipped in build/configs. Build,
// pipelines, evaluate/target/qemu, evaluate/guest and build/kconfig read it;
// nothing else spells these facts (like tuxmake's arch/*.ini or syzkaller's
// archConfigs).
//
// Lookup is the entry point: it accepts an alias (powerpc, aarch64, amd64)
// and returns the Arch, or an input error naming the input and the
// supported names.
package arch

import (
	"fmt"
	"strings"

	"github.com/patcheval/patcheval/internal/fail"
)

// Arch is one architecture patcheval builds and boots.
type Arch struct {
	// Name is patcheval's name: ppc64le, arm64, x86_64, riscv64.
	Name string
	// Aliases are the other spellings accepted (lower case).
	Aliases []string

	// KArch is ARCH= for make; SrcArch is arch/<SrcArch>/ in the tree.
	KArch   string
	SrcArch string
	// Cross is the CROSS_COMPILE prefix of the Debian cross compiler;
	// CrossPkg the Debian package that provides Cross+"gcc".
	Cross    string
	CrossPkg string
	// Targets are the default make targets; Image is the boot image path
	// inside the O= directory.
	Targets []string
	Image   string
	// BootConfig names the fragment build/configs/<BootConfig>.config that
	// makes a tinyconfig kernel boot on QEMU's machine.
	BootConfig string

	// QEMU is how the kernel boots.
	QEMU QEMU
	// GoArch is the GOARCH the guest agent is built for; HostGoArch is
	// the host's runtime.GOARCH on which KVM can run this guest and the
	// native compiler can build this kernel.
	GoArch     string
	HostGoArch string
	// DebArch is Debian's name of the architecture (dpkg
	// --print-architecture) and Triplet its multiarch library directory
	// (/lib/<Triplet>): the guest's stress-ng and perf are Debian's
	// packages for DebArch (evaluate/guest/userland).
	DebArch string
	Triplet string
	// DebSuite, when set, is the Debian suite the guest's packages come
	// from through a private apt state (internal/debian) because the
	// system's suites (bookworm) do not build DebArch: riscv64 became an
	// official Debian architecture with trixie.
	DebSuite string
}

// QEMU is an architecture's QEMU defaults.
type QEMU struct {
	Binary string
	// Args choose the machine and CPU (without acceleration).
	Args []string
	// Console is the console= device.
	Console string
	// KVMHostCPU: with KVM, the guest gets "-cpu host".
	KVMHostCPU bool
	// Restart ends the boot with a reboot (caught by -no-reboot) instead
	// of a power-off, which needs ACPI on x86_64.
	Restart bool
}

var table = []Arch{
	{
		Name: "ppc64le", Aliases: []string{"powerpc", "powerpc64le", "ppc64el"},
		KArch: "powerpc", SrcArch: "powerpc",
		Cross: "powerpc64le-linux-gnu-", CrossPkg: "gcc-powerpc64le-linux-gnu",
		Targets: []string{"vmlinux"}, Image: "vmlinux",
		BootConfig: "ppc64le-pseries",
		// x-vof=on boots the kernel through QEMU's Virtual Open Firmware
		// instead of SLOF: 3 s instead of 15 s to /init under TCG.
		QEMU:   QEMU{Binary: "qemu-system-ppc64", Args: []string{"-M", "pseries,x-vof=on", "-cpu", "POWER9", "-vga", "none"}, Console: "hvc0"},
		GoArch: "ppc64le", HostGoArch: "ppc64le",
		DebArch: "ppc64el", Triplet: "powerpc64le-linux-gnu",
	},
	{
		Name: "arm64", Aliases: []string{"aarch64"},
		KArch: "arm64", SrcArch: "arm64",
		Cross: "aarch64-linux-gnu-", CrossPkg: "gcc-aarch64-linux-gnu",
		Targets: []string{"Image"}, Image: "arch/arm64/boot/Image",
		BootConfig: "arm64-virt",
		QEMU:       QEMU{Binary: "qemu-system-aarch64", Args: []string{"-M", "virt", "-cpu", "max"}, Console: "ttyAMA0", KVMHostCPU: true},
		GoArch:     "arm64", HostGoArch: "arm64",
		DebArch: "arm64", Triplet: "aarch64-linux-gnu",
	},
	{
		Name: "x86_64", Aliases: []string{"x86", "amd64", "x86-64"},
		KArch: "x86_64", SrcArch: "x86",
		Cross: "x86_64-linux-gnu-", CrossPkg: "gcc-x86-64-linux-gnu",
		Targets: []string{"bzImage"}, Image: "arch/x86/boot/bzImage",
		BootConfig: "x86_64-q35",
		QEMU:       QEMU{Binary: "qemu-system-x86_64", Args: []string{"-M", "q35"}, Console: "ttyS0", KVMHostCPU: true, Restart: true},
		GoArch:     "amd64", HostGoArch: "amd64",
		DebArch: "amd64", Triplet: "x86_64-linux-gnu",
	},
	{
		Name: "riscv64", Aliases: []string{"riscv"},
		KArch: "riscv", SrcArch: "riscv",
		Cross: "riscv64-linux-gnu-", CrossPkg: "gcc-riscv64-linux-gnu",
		Targets: []string{"Image"}, Image: "arch/riscv/boot/Image",
		BootConfig: "riscv64-virt",
		// QEMU's virt machine boots the Image through its bundled OpenSBI
		// (-bios default); the console is the NS16550 UART.
		QEMU:   QEMU{Binary: "qemu-system-riscv64", Args: []string{"-M", "virt", "-cpu", "rv64", "-bios", "default"}, Console: "ttyS0"},
		GoArch: "riscv64", HostGoArch: "riscv64",
		DebArch: "riscv64", Triplet: "riscv64-linux-gnu", DebSuite: "trixie",
	},
}

// Names lists the supported architectures in table order: ppc64le, arm64,
// x86_64, riscv64.
func Names() []string {
	out := make([]string, len(table))
	for i, a := range table {
		out[i] = a.Name
	}
	return out
}

// All returns the table.
func All() []Arch { return append([]Arch(nil), table...) }

// Find returns the architecture called name or one of its aliases
// (case and surrounding space ignored).
func Find(name string) (Arch, bool) {
	n := strings.ToLower(strings.TrimSpace(name))
	for _, a := range table {
		if a.Name == n {
			return a, true
		}
		for _, al := range a.Aliases {
			if al == n {
				return a, true
			}
		}
	}
	return Arch{}, false
}

// Lookup is Find with an input error for an unknown name.
func Lookup(name string) (Arch, error) {
	if a, ok := Find(name); ok {
		return a, nil
	}
	return Arch{}, fail.Inputf("unknown architecture %q (want one of %s)", name, strings.Join(Names(), ", "))
}

// Normalize maps an architecture name or alias to its Name.
func Normalize(name string) (string, error) {
	a, err := Lookup(name)
	return a.Name, err
}

// ByBootConfig returns the architecture whose boot fragment is called
// name ("ppc64le-pseries").
func ByBootConfig(name string) (Arch, bool) {
	for _, a := range table {
		if a.BootConfig == name {
			return a, true
		}
	}
	return Arch{}, false
}

// BootConfigs lists the boot fragments of the table, in table order.
func BootConfigs() []string {
	out := make([]string, len(table))
	for i, a := range table {
		out[i] = a.BootConfig
	}
	return out
}

// GoArch maps an architecture name or alias, or a machine name as uname -m
// prints it on an ssh target, to the GOARCH of the guest agent. s390x,
// which patcheval does not build, is its own GOARCH.
func GoArch(name string) (string, error) {
	if a, ok := Find(name); ok {
		return a.GoArch, nil
	}
	if name == "s390x" {
		return name, nil
	}
	return "", fmt.Errorf("unknown architecture %q (want %s)", name, strings.Join(Names(), ", "))
}

// SrcArch maps any kernel ARCH value as given to make, including those
// patcheval does not build (i386, riscv64, sparc64, ...), to its arch/
// directory name, as the kernel's top Makefile does; an unknown value is
// its own directory.
func SrcArch(karch string) string {
	if a, ok := Find(karch); ok {
		return a.SrcArch
	}
	switch karch {
	case "ppc64", "ppc", "powerpc64":
		return "powerpc"
	case "i386":
		return "x86"
	case "riscv64", "riscv32":
		return "riscv"
	case "sparc32", "sparc64":
		return "sparc"
	case "parisc64":
		return "parisc"
	case "sh64":
		return "sh"
	}
	return karch
}
