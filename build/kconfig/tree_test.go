package kconfig

// Real-data fixtures: Debian's linux-source-6.1 tarball, extracted once
// into the cache (Kconfig files, Makefiles, scripts/ and the files the
// backport touches), and final configs made by the kernel's own kconfig
// (`make tinyconfig`, merge_config.sh, `make olddefconfig`).

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/patcheval/patcheval/internal/gittree"
	"github.com/patcheval/patcheval/internal/testenv"
	"github.com/patcheval/patcheval/internal/xdg"
)

// treeVersion names the extraction layout; bump it when the list changes.
const treeVersion = "linux-6.1-kconfig-test-v1"

var extractPatterns = []string{
	"*Kconfig*", "*Makefile*", "*Kbuild*",
	"*/scripts/*", "*/arch/*/configs/*", "*/kernel/configs/*", "*/arch/*/tools/*",
	"*/arch/powerpc/kernel/interrupt.c", "*/arch/powerpc/lib/vmx-helper.c",
}

var workDir string // per-run scratch (O= build dirs), removed by TestMain

func TestMain(m *testing.M) {
	d, err := os.MkdirTemp("", "kconfig-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(3)
	}
	workDir = d
	code := m.Run()
	os.RemoveAll(d)
	os.Exit(code)
}

func slow(t testing.TB) {
	t.Helper()
	testenv.SkipIfSlow(t, "the real 6.1 tree")
}

func run(dir string, name string, args ...string) error {
	cmd := exec.Command(name, args...)
	cmd.Dir = dir
	out, err := cmd.CombinedOutput()
	if err != nil {
		return fmt.Errorf("%s %s in %s: %v\n%s", name, strings.Join(args, " "), dir, err, out)
	}
	return nil
}

// cached runs fill into cacheDir/name once (across processes: flock and a
// marker file) and returns the directory.
func cached(name string, fill func(dir string) error) (string, error) {
	base := filepath.Join(xdg.CacheDir(), "src")
	if err := os.MkdirAll(base, 0o755); err != nil {
		return "", err
	}
	dest := filepath.Join(base, name)
	marker := filepath.Join(dest, ".patcheval-complete")
	if _, err := os.Stat(marker); err == nil {
		return dest, nil
	}
	release, err := gittree.LockFile(context.Background(), filepath.Join(base, "."+name+".lock"), syscall.LOCK_EX, nil)
	if err != nil {
		return "", err
	}
	defer release()
	if _, err := os.Stat(marker); err == nil {
		return dest, nil
	}
	tmp, err := os.MkdirTemp(base, name+".tmp-")
	if err != nil {
		return "", err
	}
	defer os.RemoveAll(tmp)
	if err := fill(tmp); err != nil {
		return "", err
	}
	if err := os.WriteFile(filepath.Join(tmp, ".patcheval-complete"), nil, 0o644); err != nil {
		return "", err
	}
	os.RemoveAll(dest)
	if err := os.Rename(tmp, dest); err != nil {
		return "", err
	}
	return dest, nil
}

var (
	treeOnce, patchedOnce sync.Once
	treeDir, patchedDir   string
	treeErr, patchedErr   error
)

// linuxTree is the extracted (partial) Debian 6.1 tree.
func linuxTree(t testing.TB) string {
	t.Helper()
	slow(t)
	treeOnce.Do(func() {
		tarball := os.Getenv("PATCHEVAL_LINUX_TARBALL")
		if tarball == "" {
			tarball = "/usr/src/linux-source-6.1.tar.xz"
		}
		if _, err := os.Stat(tarball); err != nil {
			treeErr = fmt.Errorf("%v (apt-get install linux-source-6.1)", err)
			return
		}
		treeDir, treeErr = cached(treeVersion, func(dir string) error {
			x := filepath.Join(dir, "x")
			if err := os.Mkdir(x, 0o755); err != nil {
				return err
			}
			args := append([]string{"-xJf", tarball, "-C", x, "--wildcards"}, extractPatterns...)
			if err := run(dir, "tar", args...); err != nil {
				return err
			}
			ents, err := os.ReadDir(x)
			if err != nil || len(ents) != 1 {
				return fmt.Errorf("unexpected tarball layout in %s: %v", tarball, err)
			}
			// Move the tree's contents up to dir.
			top := filepath.Join(x, ents[0].Name())
			kids, err := os.ReadDir(top)
			if err != nil {
				return err
			}
			for _, k := range kids {
				if err := os.Rename(filepath.Join(top, k.Name()), filepath.Join(dir, k.Name())); err != nil {
					return err
				}
			}
			return os.RemoveAll(x)
		})
	})
	if treeErr != nil {
		t.Fatalf("linux 6.1 tree: %v", treeErr)
	}
	return treeDir
}

// patchedTree is linuxTree with the v6.1 backport of "powerpc: enable
// dynamic preemption" applied by git apply.
func patchedTree(t testing.TB) string {
	t.Helper()
	src := linuxTree(t)
	patchedOnce.Do(func() {
		mbox, err := testenv.BackportMbox(), error(nil)
		if err != nil {
			patchedErr = err
			return
		}
		patchedDir, patchedErr = cached(treeVersion+"-ppc-dynamic-preempt-v2", func(dir string) error {
			if err := run("", "cp", "-a", src+"/.", dir); err != nil {
				return err
			}
			os.Remove(filepath.Join(dir, ".patcheval-complete"))
			// The cache may sit inside a git checkout (CI keeps it in
			// the clone): stop git from finding that repository, or
			// git apply would silently skip every path "outside" it.
			cmd := exec.Command("git", "apply", mbox)
			cmd.Dir = dir
			cmd.Env = append(os.Environ(), "GIT_CEILING_DIRECTORIES="+filepath.Dir(dir))
			if out, err := cmd.CombinedOutput(); err != nil {
				return fmt.Errorf("git apply %s in %s: %v\n%s", mbox, dir, err, out)
			}
			kc, err := os.ReadFile(filepath.Join(dir, "arch/powerpc/Kconfig"))
			if err != nil || !strings.Contains(string(kc), "select HAVE_PREEMPT_DYNAMIC_KEY") {
				return fmt.Errorf("git apply %s in %s left arch/powerpc/Kconfig unpatched (%v)", mbox, dir, err)
			}
			return nil
		})
	})
	if patchedErr != nil {
		t.Fatalf("patched 6.1 tree: %v", patchedErr)
	}
	return patchedDir
}

var (
	cfgMu    sync.Mutex
	cfgCache = map[string]Config{}
	// tinyCache is tinyconfig's .config per tree and arch (under cfgMu).
	tinyCache = map[string][]byte{}
	kcMu      sync.Mutex
	kcCache   = map[string]*Kconfig{}
)

// finalConfig makes a real final .config: tinyconfig, the fragments
// merged with merge_config.sh, then olddefconfig, for ppc64le.
func finalConfig(t testing.TB, tree string, frags ...string) Config {
	t.Helper()
	return finalConfigArch(t, tree, "powerpc", "powerpc64le-linux-gnu-", frags...)
}

// finalConfigArch is finalConfig for another ARCH and CROSS_COMPILE.
func finalConfigArch(t testing.TB, tree, arch, cross string, frags ...string) Config {
	t.Helper()
	cfgMu.Lock()
	defer cfgMu.Unlock()
	key := tree + "|" + arch + "|" + strings.Join(frags, "|")
	if c, ok := cfgCache[key]; ok {
		return c
	}
	// One O= directory per tree, so scripts/kconfig/conf is built once.
	out := filepath.Join(workDir, filepath.Base(tree)+"-"+arch)
	if err := os.MkdirAll(out, 0o755); err != nil {
		t.Fatal(err)
	}
	os.Remove(filepath.Join(out, ".config"))
	mk := []string{"-n", "10", "make", "-s", "ARCH=" + arch, "CROSS_COMPILE=" + cross, "O=" + out}
	// tinyconfig (three Kconfig runs with the toolchain probes) once per
	// tree and arch; olddefconfig below runs for every fragment set.
	tinyKey := tree + "|" + arch
	if b, ok := tinyCache[tinyKey]; ok {
		if err := os.WriteFile(filepath.Join(out, ".config"), b, 0o644); err != nil {
			t.Fatal(err)
		}
	} else {
		if err := run(tree, "nice", append(mk, "tinyconfig")...); err != nil {
			t.Fatal(err)
		}
		b, err := os.ReadFile(filepath.Join(out, ".config"))
		if err != nil {
			t.Fatal(err)
		}
		tinyCache[tinyKey] = b
	}
	merge := []string{"-m", "-O", out, filepath.Join(out, ".config")}
	for _, f := range frags {
		abs, err := filepath.Abs(filepath.Join("testdata", f))
		if filepath.IsAbs(f) {
			abs = f
		}
		if err != nil {
			t.Fatal(err)
		}
		merge = append(merge, abs)
	}
	// merge_config.sh makes its temporary files in the working directory.
	if err := run(out, filepath.Join(tree, "scripts/kconfig/merge_config.sh"), merge...); err != nil {
		t.Fatal(err)
	}
	if err := run(tree, "nice", append(mk, "olddefconfig")...); err != nil {
		t.Fatal(err)
	}
	c, err := ReadConfig(filepath.Join(out, ".config"))
	if err != nil {
		t.Fatal(err)
	}
	cfgCache[key] = c
	return c
}

// treeKconfig parses a tree's Kconfig once per run.
func treeKconfig(t testing.TB, tree, arch string) *Kconfig {
	t.Helper()
	kcMu.Lock()
	defer kcMu.Unlock()
	key := tree + "|" + arch
	if kc, ok := kcCache[key]; ok {
		return kc
	}
	kc, err := Parse(tree, arch)
	if err != nil {
		t.Fatalf("Parse(%s, %s): %v", tree, arch, err)
	}
	kcCache[key] = kc
	return kc
}

// fragment reads a testdata fragment as a request.
func fragment(t testing.TB, name string) map[string]string {
	t.Helper()
	c, err := ReadConfig(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return c
}
