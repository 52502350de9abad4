package series

import (
	"os/exec"
	"strings"
	"testing"
)

// TestPatchIDMatchesGit checks PatchID against the real `git patch-id
// --stable` on every patch of the fixtures.
func TestPatchIDMatchesGit(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		t.Fatal("git is required: ", err)
	}
	n := 0
	for _, f := range []string{"ppc-dynamic-preempt-v4.mbox", "ppc-dynamic-preempt-v6.1-backport.mbox", "rcu-gp-qs-v2.mbox", "shape-versions.mbox", "shape-rfc.mbox"} {
		s := resolve(t, Options{}, f)
		for _, p := range s.Patches {
			cmd := exec.Command("git", "patch-id", "--stable")
			cmd.Stdin = strings.NewReader(p.Diff)
			out, err := cmd.Output()
			if err != nil {
				t.Fatalf("git patch-id: %v", err)
			}
			want := strings.Fields(string(out))
			if len(want) == 0 || want[0] != p.PatchID {
				t.Errorf("%s %s: PatchID %q, git patch-id --stable %q", f, p.MessageID, p.PatchID, want)
			}
			n++
		}
	}
	if n < 5 {
		t.Fatalf("only %d patches checked", n)
	}
}

func TestSplitBody(t *testing.T) {
	p := splitBody("From: Real Author <ra@x.org>\nDate: Tue, 1 Jan 2030 00:00:00 +0000\nSubject: better title\n\nBody.\n\nSigned-off-by: R <ra@x.org>\n---\nv2: changed\n\n a | 1 +\n\ndiff --git a/a b/a\n--- a/a\n+++ b/a\n@@ -1 +1,2 @@\n a\n+b\n-- \n2.1\n")
	if p.Header["from"] != "Real Author <ra@x.org>" || p.Header["subject"] != "better title" || p.Header["date"] == "" {
		t.Errorf("headers %q", p.Header)
	}
	if p.Message != "Body.\n\nSigned-off-by: R <ra@x.org>" || p.BelowCut != "v2: changed\n\n a | 1 +" || !strings.HasSuffix(p.Diff, "+b\n") {
		t.Errorf("split: %q / %q / %q", p.Message, p.BelowCut, p.Diff)
	}
	// No "---": the diff starts the cut.
	p = splitBody("Msg.\ndiff --git a/a b/a\n--- a/a\n+++ b/a\n@@ -1 +1 @@\n-a\n+b\n")
	if p.Message != "Msg." || !strings.HasPrefix(p.Diff, "diff --git") || p.BelowCut != "" {
		t.Errorf("no cut: %q / %q / %q", p.Message, p.BelowCut, p.Diff)
	}
	// A "From:" line that is not at the top is message text.
	p = splitBody("Text.\nFrom: x\n")
	if p.Header != nil || p.Message != "Text.\nFrom: x" {
		t.Errorf("late From: %q %q", p.Header, p.Message)
	}
}
