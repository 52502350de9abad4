package apply

import (
	"os"
	"strings"
	"testing"
	"time"

	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/filemode"
	"github.com/go-git/go-git/v5/plumbing/object"
	"github.com/go-git/go-git/v5/storage/memory"

	"github.com/patcheval/patcheval/internal/fail"
	"github.com/patcheval/patcheval/internal/testenv"
	"github.com/patcheval/patcheval/mbox"
	"github.com/patcheval/patcheval/series"
)

// fuzzTree is the small tree FuzzApply patches: a few files in two
// directories, one executable, one symlink, one without a final newline.
var fuzzTree = map[string]string{
	"Makefile":           "all:\n\t$(MAKE) -C lib\n",
	"lib/a.c":            "int a;\nint a1 = 0;\nint b;\n\nstatic int f(void)\n{\n\treturn a1;\n}\n",
	"lib/b.c":            "int b1 = 0;\n",
	"lib/Kconfig":        "config A\n\tbool \"a\"\n\tdefault y\n",
	"scripts/run.sh":     "#!/bin/sh\necho run\n",
	"lib/link":           "a.c",
	"lib/no-newline.txt": "one\ntwo",
}

// fuzzBase writes fuzzTree into a fresh in-memory object store and returns
// it with the base commit.
func fuzzBase(t testing.TB) (*memory.Storage, *object.Commit) {
	st := memory.NewStorage()
	ed := newTreeEdit(st, plumbing.ZeroHash)
	for p, c := range fuzzTree {
		h, err := storeBlob(st, []byte(c))
		if err != nil {
			t.Fatal(err)
		}
		mode := filemode.Regular
		switch p {
		case "scripts/run.sh":
			mode = filemode.Executable
		case "lib/link":
			mode = filemode.Symlink
		}
		ed.changes[p] = &entry{hash: h, mode: mode}
	}
	tree, err := ed.write()
	if err != nil {
		t.Fatal(err)
	}
	when := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	sig := object.Signature{Name: "T", Email: "t@example.org", When: when}
	h, err := storeObject(st, &object.Commit{Author: sig, Committer: sig, Message: "base\n", TreeHash: tree})
	if err != nil {
		t.Fatal(err)
	}
	c, err := object.GetCommit(st, h)
	if err != nil {
		t.Fatal(err)
	}
	return st, c
}

// FuzzApply feeds arbitrary patch text through the diff parser and the hunk
// placement onto a small tree, in memory: no panic, a failure is classified
// (bad input or "does not apply", never an infrastructure error), and a
// patch that applies applies the same way twice.
func FuzzApply(f *testing.F) {
	for _, s := range []string{
		"diff --git a/lib/a.c b/lib/a.c\n--- a/lib/a.c\n+++ b/lib/a.c\n@@ -1,3 +1,3 @@\n int a;\n-int a1 = 0;\n+int a1 = 1;\n int b;\n",
		// Offset, fuzz and a blank context line without its space.
		"--- a/lib/a.c\n+++ b/lib/a.c\n@@ -3,4 +3,5 @@\n int b;\n\n static int f(void)\n+/* f */\n {\n",
		"diff --git a/lib/new.c b/lib/new.c\nnew file mode 100644\n--- /dev/null\n+++ b/lib/new.c\n@@ -0,0 +1,2 @@\n+int n;\n+int m;\n",
		"diff --git a/lib/b.c b/lib/b.c\ndeleted file mode 100644\n--- a/lib/b.c\n+++ /dev/null\n@@ -1 +0,0 @@\n-int b1 = 0;\n",
		"diff --git a/lib/b.c b/lib/c.c\nsimilarity index 100%\nrename from lib/b.c\nrename to lib/c.c\n",
		"diff --git a/scripts/run.sh b/scripts/run.sh\nold mode 100755\nnew mode 100644\n",
		"diff --git a/lib/no-newline.txt b/lib/no-newline.txt\n--- a/lib/no-newline.txt\n+++ b/lib/no-newline.txt\n@@ -1,2 +1,2 @@\n one\n-two\n\\ No newline at end of file\n+two\n",
		"diff --git a/../escape b/../escape\nnew file mode 100644\n--- /dev/null\n+++ b/../escape\n@@ -0,0 +1 @@\n+x\n",
		"diff --git a/lib/link/x b/lib/link/x\nnew file mode 100644\n--- /dev/null\n+++ b/lib/link/x\n@@ -0,0 +1 @@\n+x\n",
		"diff --git a/bin b/bin\nnew file mode 100644\nindex 0000000..1111111\nGIT binary patch\nliteral 0\nHcmV?d00001\n\nliteral 0\nHcmV?d00001\n\n",
	} {
		f.Add(s)
	}
	// Real diffs: the patches of the testdata series (they do not apply to
	// the small tree; they drive the parser).
	if data, err := os.ReadFile(testenv.BackportMbox()); err == nil {
		if msgs, err := mbox.ParseBytes(data, "seed"); err == nil {
			if s, err := series.Resolve(mbox.NewThread(msgs, "seed"), series.Options{}); err == nil {
				for _, p := range s.Patches {
					f.Add(p.Diff)
				}
			}
		}
	}
	when := time.Date(2026, 1, 2, 0, 0, 0, 0, time.UTC)
	committer := object.Signature{Name: "C", Email: "c@example.org", When: when}
	f.Fuzz(func(t *testing.T, diff string) {
		c := Commit{Label: "1/1 fuzz", Author: mbox.Address{Name: "A", Email: "a@example.org"}, AuthorDate: when, Message: "fuzz\n", Diff: diff}
		st, base := fuzzBase(t)
		ac, _, err := applyOne(st, base, c, committer, 1)
		if err != nil {
			if k := fail.KindOf(err); k == fail.KindInfra {
				t.Fatalf("unclassified error (exit 3) for a patch: %v", err)
			}
			return
		}
		st2, base2 := fuzzBase(t)
		ac2, _, err := applyOne(st2, base2, c, committer, 1)
		if err != nil || ac2.Tree != ac.Tree {
			t.Fatalf("not deterministic: %v, tree %s vs %s", err, ac.Tree, ac2.Tree)
		}
		// Every path in the result is inside the tree.
		tree, err := object.GetTree(st, plumbing.NewHash(ac.Tree))
		if err != nil {
			t.Fatal(err)
		}
		tree.Files().ForEach(func(f *object.File) error {
			if strings.HasPrefix(f.Name, "/") || strings.Contains("/"+f.Name+"/", "/../") || strings.Contains("/"+f.Name+"/", "/.git/") {
				t.Fatalf("path %q escapes the tree", f.Name)
			}
			return nil
		})
	})
}

// The fuzz tree is real: the plain seeds apply and the hostile ones are
// refused as bad input or "does not apply".
func TestFuzzApplyTree(t *testing.T) {
	when := time.Date(2026, 1, 2, 0, 0, 0, 0, time.UTC)
	committer := object.Signature{Name: "C", Email: "c@example.org", When: when}
	for _, c := range []struct {
		diff string
		ok   bool
		want string
	}{
		// A binary change sent without its data (git diff without
		// --binary): "does not apply" (exit 1), saying how to resend.
		{"diff --git a/lib/b.c b/lib/b.c\nindex 1111111..2222222 100644\nBinary files a/lib/b.c and b/lib/b.c differ\n", false, "binary patch without data"},
		{"diff --git a/lib/a.c b/lib/a.c\n--- a/lib/a.c\n+++ b/lib/a.c\n@@ -1,3 +1,3 @@\n int a;\n-int a1 = 0;\n+int a1 = 1;\n int b;\n", true, ""},
		{"--- a/lib/a.c\n+++ b/lib/a.c\n@@ -3,4 +3,5 @@\n int b;\n\n static int f(void)\n+/* f */\n {\n", true, ""},
		{"diff --git a/lib/b.c b/lib/b.c\ndeleted file mode 100644\n--- a/lib/b.c\n+++ /dev/null\n@@ -1 +0,0 @@\n-int b1 = 0;\n", true, ""},
		{"diff --git a/../escape b/../escape\nnew file mode 100644\n--- /dev/null\n+++ b/../escape\n@@ -0,0 +1 @@\n+x\n", false, ""},
		{"diff --git a/lib/link/x b/lib/link/x\nnew file mode 100644\n--- /dev/null\n+++ b/lib/link/x\n@@ -0,0 +1 @@\n+x\n", false, ""},
	} {
		st, base := fuzzBase(t)
		_, _, err := applyOne(st, base, Commit{Label: "x", Author: mbox.Address{Email: "a@example.org"}, Message: "m", Diff: c.diff}, committer, 0)
		if (err == nil) != c.ok || err != nil && (fail.KindOf(err) == fail.KindInfra || !strings.Contains(err.Error(), c.want)) {
			t.Errorf("%q: err %v (kind %v), want ok=%v", c.diff[:30], err, fail.KindOf(err), c.ok)
		}
	}
}
