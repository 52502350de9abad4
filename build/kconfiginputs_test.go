package build

import (
	"path/filepath"
	"testing"

	"github.com/patcheval/patcheval/internal/gittree"
	"github.com/patcheval/patcheval/internal/testgit"
)

// TestKconfigInputs: the base-config key moves with every file a config
// target reads and with nothing else, so a bisection's steps share one
// make tinyconfig and a Kconfig change never reuses a stale one.
func TestKconfigInputs(t *testing.T) {
	repo := testgit.InitBare(t, filepath.Join(t.TempDir(), "tree.git"))
	base := testgit.Commit(t, repo, "", "base", "2026-11-02T09:00:00Z", map[string]string{
		"Makefile":                     "VERSION = 6\n",
		"Kconfig":                      "source \"arch/$(SRCARCH)/Kconfig\"\n",
		"arch/x86/Kconfig":             "config X86\n\tdef_bool y\n",
		"arch/x86/Makefile":            "KBUILD_DEFCONFIG := x86_64_defconfig\n",
		"arch/x86/configs/tiny.config": "CONFIG_NOHIGHMEM=y\n",
		"arch/powerpc/Kconfig":         "config MPROFILE\n\tdef_bool $(success,$(srctree)/arch/powerpc/tools/check.sh $(CC))\n",
		"arch/powerpc/Makefile":        "KBUILD_DEFCONFIG := ppc64_defconfig\n",
		"arch/powerpc/tools/check.sh":  "#!/bin/sh\n",
		"arch/powerpc/tools/other.sh":  "#!/bin/sh\n",
		"kernel/configs/tiny.config":   "CONFIG_CC_OPTIMIZE_FOR_SIZE=y\n",
		"kernel/sched/core.c":          "/* core */\n",
		"kernel/Kconfig.preempt":       "config PREEMPT\n\tbool\n",
		"scripts/Kconfig.include":      "cc-option = $(success,...)\n",
		"scripts/cc-version.sh":        "#!/bin/sh\n",
		"scripts/kconfig/conf.c":       "int main;\n",
		"scripts/basic/fixdep.c":       "int main;\n",
		"scripts/dtc/dtc.c":            "int main;\n",
		"scripts/checkpatch.pl":        "1;\n",
		"Documentation/README":         "docs\n",
	})
	inputs := func(commit, srcArch string) string {
		t.Helper()
		c, err := gittree.Resolve(repo, commit)
		if err != nil {
			t.Fatal(err)
		}
		h, err := kconfigInputs(repo, c.TreeHash.String(), srcArch)
		if err != nil {
			t.Fatal(err)
		}
		return h
	}
	b := inputs(base, "x86")
	same := map[string]string{
		"kernel/sched/core.c":         "/* core, changed */\n",
		"Documentation/README":        "docs, changed\n",
		"scripts/dtc/dtc.c":           "int main, changed;\n",
		"arch/powerpc/tools/other.sh": "#!/bin/sh\n# changed\n",
		"arch/powerpc/Makefile":       "KBUILD_DEFCONFIG := other\n", // another arch's Makefile
	}
	for f, content := range same {
		c := testgit.Commit(t, repo, base, "change "+f, "2026-11-02T10:00:00Z", map[string]string{f: content})
		if got := inputs(c, "x86"); got != b {
			t.Errorf("changing %s changed the Kconfig inputs", f)
		}
	}
	differ := map[string]string{
		"Makefile":                     "VERSION = 7\n",
		"Kconfig":                      "source \"arch/$(SRCARCH)/Kconfig\"\n# changed\n",
		"arch/x86/Kconfig":             "config X86\n\tdef_bool n\n",
		"arch/x86/Makefile":            "KBUILD_DEFCONFIG := i386_defconfig\n",
		"arch/x86/configs/tiny.config": "CONFIG_NOHIGHMEM=n\n",
		"kernel/configs/tiny.config":   "CONFIG_CC_OPTIMIZE_FOR_SIZE=n\n",
		"kernel/Kconfig.preempt":       "config PREEMPT\n\ttristate\n",
		"scripts/Kconfig.include":      "cc-option = $(failure,...)\n",
		"scripts/cc-version.sh":        "#!/bin/sh\nexit 1\n",
		"scripts/kconfig/conf.c":       "int main, changed;\n",
		"scripts/basic/fixdep.c":       "int main, changed;\n",
		"arch/powerpc/tools/check.sh":  "#!/bin/sh\nexit 1\n", // named by $(srctree)/... in a Kconfig
		"drivers/new/Kconfig":          "config NEW\n\tbool\n",
	}
	for f, content := range differ {
		c := testgit.Commit(t, repo, base, "change "+f, "2026-11-02T10:00:00Z", map[string]string{f: content})
		if got := inputs(c, "x86"); got == b {
			t.Errorf("changing %s left the Kconfig inputs as they were", f)
		}
	}
	if inputs(base, "powerpc") == b {
		t.Errorf("x86 and powerpc have the same Kconfig inputs (arch/<srcarch>/Makefile differs)")
	}
}
