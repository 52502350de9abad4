package service

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/patcheval/patcheval/internal/testgit"
	"github.com/patcheval/patcheval/pipelines"
)

// fakeKernelMakefile is a Kbuild-like Makefile that stands in for a
// kernel's in the farm tests: the configuration targets write $(O)/.config
// (olddefconfig keeps it), and the image target "compiles" for a few
// seconds and writes vmlinux, System.map and kernel.release the way a
// kernel build does. Everything the build package does around make
// (sources checked out from git, -C/O= directories, the config merge and
// check, the artifact store) is real; make's work is cheap.
const fakeKernelMakefile = `O ?= .
.PHONY: tinyconfig olddefconfig vmlinux Image FORCE
tinyconfig:
	@mkdir -p $(O)
	@printf 'CONFIG_FAKE_BASE=y\n' > $(O)/.config
olddefconfig:
	@test -f $(O)/.config
vmlinux: $(O)/vmlinux
Image: $(O)/vmlinux
	@mkdir -p $(O)/arch/arm64/boot
	@cp $(O)/vmlinux $(O)/arch/arm64/boot/Image
# Kbuild's if_changed: linked again when its command file is missing or
# a source is newer. Like a real link it writes its output before it is
# complete, and the command file after: a build killed here after an
# earlier one leaves a partial vmlinux newer than its sources beside the
# earlier command file, which make alone takes for up to date.
$(O)/vmlinux: kernel/fake.c FORCE
	@if [ -f $(O)/.vmlinux.cmd ] && [ $@ -nt kernel/fake.c ]; then exit 0; fi; \
	mkdir -p $(O)/include/config; \
	echo '  CC      kernel/fake.o'; \
	sleep $$(cat compile-seconds); \
	echo partial > $@; \
	while [ -e "$$(cat gate)" ]; do sleep 0.05; done; \
	echo 6.1.0-fake > $(O)/include/config/kernel.release; \
	cp $(O)/.config $@; \
	printf 'c000000000000000 T _stext\n' > $(O)/System.map; \
	echo 'cmd_vmlinux := fake link' > $(O)/.vmlinux.cmd
`

// fakeKernelTree is a bare repository holding two commits of a fake
// kernel tree, the second changing its source; it returns the repository
// and the commits. Its link waits while the file gate exists, so that a
// test holds a build mid-link for as long as it needs (to kill it there,
// or to see two builds at once). Its compile takes seconds (a benchmark's
// stand-in for a kernel's compile time; 0 in tests).
func fakeKernelTree(t testing.TB, gate string, seconds int) (repo, commit, next string) {
	t.Helper()
	repo = testgit.InitBare(t, filepath.Join(t.TempDir(), "linux.git"))
	commit = testgit.Commit(t, repo, "", "fake kernel", "2026-11-02T10:00:00Z", map[string]string{
		"Makefile": fakeKernelMakefile, "gate": gate + "\n", "compile-seconds": fmt.Sprintln(seconds), "kernel/fake.c": "int fake;\n"})
	testgit.Git(t, nil, nil, "--git-dir="+repo, "update-ref", "refs/heads/master", commit)
	next = testgit.Commit(t, repo, commit, "fake change", "2026-11-02T10:01:00Z", map[string]string{"kernel/fake.c": "int fake = 2;\n"})
	return repo, commit, next
}

// fakePipeline evaluates the fake kernel tree on arches (a TOML list's
// items: "ppc64le", "arm64"), one variant per Kconfig symbol of syms,
// which it sets to y.
func fakePipeline(t testing.TB, arches string, syms ...string) *pipelines.Pipeline {
	t.Helper()
	return fakePipelineWith(t, arches, "", syms...)
}

// fakePipelineWith is fakePipeline with the fragment file frag ("":
// none).
func fakePipelineWith(t testing.TB, arches, frag string, syms ...string) *pipelines.Pipeline {
	t.Helper()
	src := `name = "farm-fake"
description = "a fake kernel tree (farm tests)"
[tree]
base = "master"
[series]
apply = false
[build]
arch = [` + arches + `]
config = "tinyconfig"
` + map[bool]string{true: fmt.Sprintf("fragments = [%q]\n", frag)}[frag != ""] + `[[benchmark]]
name = "kill"
`
	for _, sym := range syms {
		src += fmt.Sprintf("[[variant]]\nname = %q\nsymbols = { %s = \"y\" }\n", strings.ToLower(sym), sym)
	}
	p, err := pipelines.Parse([]byte(src), "farm-fake.toml")
	if err != nil {
		t.Fatal(err)
	}
	return p
}
