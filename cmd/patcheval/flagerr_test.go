package main

import (
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/patcheval/patcheval/internal/testenv"
)

// TestUnknownFlagOneLine: a mistyped flag is one line naming the closest
// flag, exit 2 (it was the flag package's 60-line usage dump).
func TestUnknownFlagOneLine(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"lore", "--am-ot", "x"}, "unknown flag --am-ot; did you mean --am-out?"},
		{[]string{"lore", "--pipline", "default", "x"}, "did you mean --pipeline?"},
		{[]string{"serve", "--boots", "2"}, "did you mean --boots-at-once?"},
		{[]string{"apply", "--zzzzzzzzz"}, "unknown flag --zzzzzzzzz (patcheval apply -h lists the flags)"},
		{[]string{"lore", "-v", "x"}, `invalid value "x" for flag -v`},
	} {
		_, errOut, code := runsCLI(t, c.args...)
		if code != 2 || strings.Count(errOut, "\n") != 1 || !strings.Contains(errOut, c.want) {
			t.Errorf("%q: exit %d, %q; want exit 2 and one line with %q", c.args, code, errOut, c.want)
		}
	}
	if _, errOut, code := runsCLI(t, "lore", "-h"); code != 0 || !strings.Contains(errOut, "usage: patcheval lore") || !strings.Contains(errOut, "-am-out") {
		t.Errorf("lore -h: exit %d, %q; want the usage", code, errOut)
	}
}

// TestFlagConventions: across commands a flag's argument name in -h is one
// word (a backquoted phrase in a usage string became "-work patcheval
// worker"), -v is always the series version (as b4's -v), and serve and
// worker say how many boots run at once without the word "workers".
func TestFlagConventions(t *testing.T) {
	for name, c := range commands {
		fs := flag.NewFlagSet(name, flag.ContinueOnError)
		c.setup(fs)
		fs.VisitAll(func(f *flag.Flag) {
			arg, _ := flag.UnquoteUsage(f)
			if strings.ContainsAny(arg, " \t") {
				t.Errorf("%s -%s: argument name %q in -h (a backquoted phrase in its usage)", name, f.Name, arg)
			}
			if f.Name == "v" && !strings.Contains(f.Usage, "version") {
				t.Errorf("%s -v: %q; -v is the series version everywhere (as b4 -v); spell verbose --verbose", name, f.Usage)
			}
		})
		if name == "serve" || name == "worker" {
			if fs.Lookup("boots-at-once") == nil || !strings.HasPrefix(fs.Lookup("workers").Usage, "deprecated") {
				t.Errorf("%s: want --boots-at-once, --workers only as its deprecated name", name)
			}
		}
	}
}

// TestB4ShortOptions: lore takes b4 am's -o DIR, -C, -S and -l with b4's
// meaning.
func TestB4ShortOptions(t *testing.T) {
	t.Setenv("PATCHEVAL_CACHE_DIR", t.TempDir())
	dir := t.TempDir()
	out, errOut, code := runsCLI(t, "lore", "-C", "-S", "-l", "-o", dir, "-m", testenv.BackportMbox())
	if code != 0 {
		t.Fatalf("lore -C -S -l -o: exit %d %q %q", code, out, errOut)
	}
	mbx, _ := filepath.Glob(filepath.Join(dir, "*.mbx"))
	if len(mbx) != 1 {
		t.Fatalf("-o %s wrote %v", dir, mbx)
	}
	data, _ := os.ReadFile(mbx[0])
	if !strings.Contains(string(data), "\nLink: ") {
		t.Errorf("-l: no Link: trailer in %s", mbx[0])
	}
}
