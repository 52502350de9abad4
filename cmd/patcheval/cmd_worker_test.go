package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestWorkerRefuses: worker's bad flags exit 2 before it looks at the
// machine or the database.
func TestWorkerRefuses(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"worker", "--compiler-cache", "sccache", "--database", "postgres://u@127.0.0.1:1/x"}, "want kcc, ccache or none"},
		{[]string{"worker", "--workers", "0"}, "at least 1"},
		{[]string{"worker", "extra"}, "unexpected arguments"},
	} {
		_, errOut, code := runsCLI(t, c.args...)
		if code != 2 || !strings.Contains(errOut, c.want) {
			t.Errorf("%v: exit %d, %q; want 2 and %q", c.args, code, errOut, c.want)
		}
	}

	// --compiler-cache ccache on a machine without ccache: refused at
	// start rather than taking build jobs that each fail on it. PATH is
	// a directory holding only what the check looks for: nothing, then
	// a ccache (found as the builds find it, build.LookCCache).
	t.Setenv("PATCHEVAL_CONFIG_DIR", t.TempDir())
	bin := t.TempDir()
	t.Setenv("PATH", bin)
	args := []string{"worker", "--compiler-cache", "ccache", "--build", "none", "--boot", "none", "--capabilities"}
	_, errOut, code := runsCLI(t, args...)
	if want := "--compiler-cache ccache: ccache is not installed here"; code != 2 || !strings.Contains(errOut, want) {
		t.Errorf("%v without ccache in PATH: exit %d, %q; want 2 and %q", args, code, errOut, want)
	}
	if err := os.WriteFile(filepath.Join(bin, "ccache"), []byte("#!/bin/sh\necho 'ccache version 4.8'\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	if out, errOut, code := runsCLI(t, args...); code != 0 || !strings.Contains(out, "queues: ") {
		t.Errorf("%v with a ccache in PATH: exit %d, %q %q; want 0 and the capabilities", args, code, out, errOut)
	}
}
