// Package buildtest gives tests across patcheval the same real, cached
// ppc64le kernels: Debian's 6.1 tree (internal/testenv), base and with
// the v6.1 backport of "powerpc: enable dynamic preemption", built with the
// shipped pseries boot fragment over tinyconfig.
//
// Builds are content-addressed in the shared cache (PATCHEVAL_CACHE_DIR), so
// the first test process builds and every later one gets cache hits; builds
// from different test processes are serialised with a lock file, so the
// machine never runs two of them at once. Set PATCHEVAL_SKIP_SLOW=1 to skip
// the tests that need the tree or a kernel build.
package buildtest

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/patcheval/patcheval/build"
	"github.com/patcheval/patcheval/internal/gittree"
	"github.com/patcheval/patcheval/internal/progress"
	"github.com/patcheval/patcheval/internal/testenv"
	"github.com/patcheval/patcheval/internal/xdg"
)

// BaseCommit is the tag of the imported 6.1 tree.
const BaseCommit = testenv.BaseCommit

// Ref names (in the cached tree) of the commits buildtest creates.
const (
	PatchedRef = "refs/tags/patcheval-test/v6.1-backport"
	BrokenRef  = "refs/tags/patcheval-test/v6.1-backport-broken"
)

// Variants buildtest knows: name -> (patched?, symbols).
var Variants = map[string]struct {
	Patched bool
	Symbols map[string]string
}{
	"base-voluntary":    {false, map[string]string{"PREEMPT_VOLUNTARY": "y"}},
	"patched-voluntary": {true, map[string]string{"PREEMPT_VOLUNTARY": "y"}},
	"patched-dynamic":   {true, map[string]string{"PREEMPT_VOLUNTARY": "y", "PREEMPT_DYNAMIC": "y"}},
	"patched-full":      {true, map[string]string{"PREEMPT": "y"}},
}

// X86BenchSymbols are what the one lean x86_64 test kernel adds to the
// q35 boot fragment so that every agent benchmark runs in it: MEMBARRIER
// (rcu: membarrier(MEMBARRIER_CMD_GLOBAL)) and NET, INET and BRIDGE
// (bridge-sh: RTM_NEWLINK kind bridge, ifconfig's AF_INET ioctls), with
// what INET and BRIDGE would pull in by default and no benchmark uses
// switched off. evaluate/target/qemu's TestAllBenchmarks and
// TestOtherArches/x86_64 boot it (X86Bench); the farm's real-kernel
// bench reuses it from the cache.
var X86BenchSymbols = map[string]string{
	"MEMBARRIER": "y", "NET": "y", "INET": "y", "BRIDGE": "y",
	"IPV6": "n", "WIRELESS": "n", "ETHTOOL_NETLINK": "n", "INET_DIAG": "n", "BRIDGE_IGMP_SNOOPING": "n",
}

// X86Bench returns the cached (or freshly built) lean x86_64 kernel of
// the 6.1 tree: tinyconfig, the q35 boot fragment and X86BenchSymbols.
func X86Bench(tb testing.TB) *build.Artifact {
	tb.Helper()
	syms := map[string]string{}
	for k, v := range X86BenchSymbols {
		syms[k] = v
	}
	return Build(tb, build.Request{Repo: Repo(tb), Commit: BaseCommit, Arch: "x86_64", BaseConfig: build.BootConfigBase,
		Fragments: []string{BootFragment(tb, "x86_64")}, Symbols: syms, Variant: "bench-x86_64"})
}

// SkipIfSlow skips tb when PATCHEVAL_SKIP_SLOW=1.
func SkipIfSlow(tb testing.TB) {
	tb.Helper()
	testenv.SkipIfSlow(tb, "the kernel tree or a kernel build")
}

// Repo returns the cached Debian 6.1 tree (importing it on first use).
func Repo(tb testing.TB) string {
	tb.Helper()
	return testenv.LinuxTree(tb)
}

// ReleaseRepo returns the release-history tree with Debian's release of
// version imported (testenv.LinuxRelease: "7.2.13" gives tag v7.2.13).
func ReleaseRepo(tb testing.TB, version string) string {
	tb.Helper()
	return testenv.LinuxRelease(tb, version)
}

func git(repo string, env []string, stdin []byte, args ...string) (string, error) {
	cmd := exec.Command("git", append([]string{"--git-dir=" + repo}, args...)...)
	cmd.Env = append(os.Environ(), env...)
	if stdin != nil {
		cmd.Stdin = bytes.NewReader(stdin)
	}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("git %s: %v: %s", strings.Join(args, " "), err, stderr.String())
	}
	return strings.TrimSpace(string(out)), nil
}

// lockRepo serialises commit creation in the cached tree across processes.
func lockRepo(tb testing.TB, repo string) func() {
	release, err := gittree.LockFile(context.Background(), filepath.Join(repo, "patcheval-test.lock"), syscall.LOCK_EX, nil)
	if err != nil {
		tb.Fatal(err)
	}
	return release
}

// fixed committer identity and date: the commits are the same in every run.
var committer = []string{
	"GIT_COMMITTER_NAME=patcheval test", "GIT_COMMITTER_EMAIL=test@patcheval.invalid",
	"GIT_COMMITTER_DATE=2026-11-02T10:00:00Z",
}

// PatchedCommit returns the commit of the v6.1 backport series applied on
// BaseCommit (created once in the cached tree with git apply --cached at
// object level, deterministic), as PatchedRef.
func PatchedCommit(tb testing.TB) string {
	tb.Helper()
	repo := Repo(tb)
	if c, err := git(repo, nil, nil, "rev-parse", "--verify", "-q", PatchedRef+"^{commit}"); err == nil && c != "" {
		return c
	}
	defer lockRepo(tb, repo)()
	if c, err := git(repo, nil, nil, "rev-parse", "--verify", "-q", PatchedRef+"^{commit}"); err == nil && c != "" {
		return c
	}
	tmp := tb.TempDir()
	mbox := testenv.BackportMbox()
	must := func(s string, err error) string {
		tb.Helper()
		if err != nil {
			tb.Fatal(err)
		}
		return s
	}
	must(git(repo, nil, nil, "mailsplit", "-o"+tmp, mbox))
	idx := []string{"GIT_INDEX_FILE=" + filepath.Join(tmp, "index")}
	parent := must(git(repo, nil, nil, "rev-parse", BaseCommit+"^{commit}"))
	must(git(repo, idx, nil, "read-tree", parent))
	mails, _ := filepath.Glob(filepath.Join(tmp, "0*"))
	for _, m := range mails {
		data, err := os.ReadFile(m)
		if err != nil {
			tb.Fatal(err)
		}
		if !bytes.Contains(data, []byte("\ndiff --git ")) {
			continue // the cover letter
		}
		msg, patch := filepath.Join(tmp, "msg"), filepath.Join(tmp, "patch")
		info := must(git(repo, nil, data, "mailinfo", msg, patch))
		hdr := map[string]string{}
		for _, l := range strings.Split(info, "\n") {
			if k, v, ok := strings.Cut(l, ": "); ok {
				hdr[k] = v
			}
		}
		must(git(repo, idx, nil, "apply", "--cached", patch))
		tree := must(git(repo, idx, nil, "write-tree"))
		body, _ := os.ReadFile(msg)
		env := append([]string{"GIT_AUTHOR_NAME=" + hdr["Author"], "GIT_AUTHOR_EMAIL=" + hdr["Email"],
			"GIT_AUTHOR_DATE=" + hdr["Date"]}, committer...)
		parent = must(git(repo, env, []byte(hdr["Subject"]+"\n\n"+string(body)), "commit-tree", tree, "-p", parent))
	}
	must(git(repo, nil, nil, "update-ref", PatchedRef, parent))
	return parent
}

// BrokenLine is the line of kernel/sched/core.c that BrokenCommit breaks.
var brokenLine = "static int patcheval_broken(void) { return 1 }"

// BrokenCommit returns a commit on top of PatchedCommit whose
// kernel/sched/core.c ends with a syntax error, and that error's line.
func BrokenCommit(tb testing.TB) (commit string, line int) {
	tb.Helper()
	return appendCommit(tb, PatchedCommit(tb), BrokenRef, brokenLine, "sched: break the build (test)")
}

// CommentCommit returns a commit on top of BaseCommit that only appends a
// comment to kernel/sched/core.c: another tree with the same Kconfig
// inputs, as most bisection steps are.
func CommentCommit(tb testing.TB) string {
	tb.Helper()
	c, _ := appendCommit(tb, BaseCommit, "refs/patcheval-test/comment", "/* patcheval test: a C-only change */",
		"sched: a comment (test)")
	return c
}

// appendCommit returns the commit at ref, made once (same hash in every
// run) as parent with line appended to kernel/sched/core.c, and the line
// number the appended line lands on.
func appendCommit(tb testing.TB, parent, ref, text, subject string) (commit string, line int) {
	tb.Helper()
	repo := Repo(tb)
	must := func(s string, err error) string {
		tb.Helper()
		if err != nil {
			tb.Fatal(err)
		}
		return s
	}
	src := must(git(repo, nil, nil, "cat-file", "blob", parent+":kernel/sched/core.c"))
	line = strings.Count(src, "\n") + 2
	if c, err := git(repo, nil, nil, "rev-parse", "--verify", "-q", ref+"^{commit}"); err == nil && c != "" {
		return c, line
	}
	defer lockRepo(tb, repo)()
	blob := must(git(repo, nil, []byte(src+"\n"+text+"\n"), "hash-object", "-w", "--stdin"))
	idx := []string{"GIT_INDEX_FILE=" + filepath.Join(tb.TempDir(), "index")}
	must(git(repo, idx, nil, "read-tree", parent))
	must(git(repo, idx, nil, "update-index", "--cacheinfo", "100644,"+blob+",kernel/sched/core.c"))
	tree := must(git(repo, idx, nil, "write-tree"))
	env := append([]string{"GIT_AUTHOR_NAME=patcheval test", "GIT_AUTHOR_EMAIL=test@patcheval.invalid",
		"GIT_AUTHOR_DATE=2026-11-02T10:00:00Z"}, committer...)
	c := must(git(repo, env, []byte(subject+"\n"), "commit-tree", tree, "-p", parent))
	must(git(repo, nil, nil, "update-ref", ref, c))
	return c, line
}

// Options are the build options tests use: the shared cache, -j2, nice 10,
// no network, progress on stderr.
func Options(tb testing.TB) build.Options {
	return build.Options{CacheDir: xdg.CacheDir(), Jobs: 2, Nice: 10, NoNetwork: true,
		Progress: progress.New(os.Stderr), Timeout: 40 * time.Minute,
		// Every test build recompiles a sample of kcc's answers directly.
		VerifyCompilerCache: 16}
}

// BootFragment writes the ppc64le pseries boot fragment into the cache
// and returns its path.
func BootFragment(tb testing.TB, arch string) string {
	tb.Helper()
	p, err := build.WriteBootConfig(arch, filepath.Join(xdg.CacheDir(), "boot-configs"))
	if err != nil {
		tb.Fatal(err)
	}
	return p
}

// Request is the build request for one of the Variants.
func Request(tb testing.TB, variant string) build.Request {
	tb.Helper()
	v, ok := Variants[variant]
	if !ok {
		tb.Fatalf("buildtest: unknown variant %q", variant)
	}
	commit := BaseCommit
	if v.Patched {
		commit = PatchedCommit(tb)
	}
	syms := map[string]string{}
	for k, x := range v.Symbols {
		syms[k] = x
	}
	return build.Request{Repo: Repo(tb), Commit: commit, Arch: "ppc64le", BaseConfig: build.BootConfigBase,
		Fragments: []string{BootFragment(tb, "ppc64le")}, Symbols: syms, Variant: variant}
}

// Serialize runs fn holding the cross-process test build lock, so that
// test binaries running in parallel never build two kernels at once.
func Serialize(tb testing.TB, fn func()) {
	tb.Helper()
	dir := filepath.Join(xdg.CacheDir(), "builds")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		tb.Fatal(err)
	}
	release, err := gittree.LockFile(context.Background(), filepath.Join(dir, ".buildtest.lock"), syscall.LOCK_EX, func() {
		tb.Logf("buildtest: waiting for another test process's kernel build")
	})
	if err != nil {
		tb.Fatal(err)
	}
	defer release()
	fn()
}

// Build builds req under the test build lock and fails tb on error.
func Build(tb testing.TB, req build.Request) *build.Artifact {
	tb.Helper()
	if a, err := build.Cached(context.Background(), req, Options(tb)); err == nil && a != nil {
		return a
	}
	var a *build.Artifact
	var err error
	Serialize(tb, func() { a, err = build.Build(context.Background(), req, Options(tb)) })
	if err != nil {
		tb.Fatalf("build %s: %v", req.Variant, err)
	}
	if len(a.BuildID()) != 40 {
		tb.Fatalf("build %s: build-id %q, want the vmlinux's 160-bit GNU build-id in metadata.json", req.Variant, a.BuildID())
	}
	return a
}

// PPC64 returns the cached (or freshly built) ppc64le pseries kernel for
// variant: "base-voluntary", "patched-voluntary", "patched-dynamic" or
// "patched-full".
func PPC64(tb testing.TB, variant string) *build.Artifact {
	tb.Helper()
	return Build(tb, Request(tb, variant))
}
