package buildtest

import (
	"strings"
	"testing"
)

func TestPatchedAndBrokenCommits(t *testing.T) {
	repo := Repo(t)
	p1 := PatchedCommit(t)
	p2 := PatchedCommit(t)
	if p1 != p2 || len(p1) != 40 {
		t.Fatalf("PatchedCommit not stable: %s %s", p1, p2)
	}
	files, err := git(repo, nil, nil, "diff", "--name-only", BaseCommit, p1)
	if err != nil {
		t.Fatal(err)
	}
	want := "arch/powerpc/Kconfig\narch/powerpc/include/asm/preempt.h\narch/powerpc/kernel/interrupt.c\narch/powerpc/lib/vmx-helper.c"
	if files != want {
		t.Errorf("backport touches:\n%s\nwant:\n%s", files, want)
	}
	author, _ := git(repo, nil, nil, "log", "-1", "--format=%an <%ae>|%s", p1)
	if author != "Shrikanth Hegde <sshegde@linux.ibm.com>|powerpc: enable dynamic preemption" {
		t.Errorf("patched commit author|subject = %q", author)
	}
	b, line := BrokenCommit(t)
	src, err := git(repo, nil, nil, "cat-file", "blob", b+":kernel/sched/core.c")
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(src, "\n")
	if len(lines) < line || lines[line-1] != brokenLine {
		t.Errorf("line %d of the broken core.c is not the syntax error", line)
	}
}
