package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/patcheval/patcheval/build/buildtest"
	"github.com/patcheval/patcheval/evaluate/report"
	"github.com/patcheval/patcheval/evaluate/stats"
	"github.com/patcheval/patcheval/internal/testenv"
	"github.com/patcheval/patcheval/internal/testgit"
	"github.com/patcheval/patcheval/internal/testinbox"
	"github.com/patcheval/patcheval/internal/xdg"
	"github.com/patcheval/patcheval/pipelines/store"
)

// perPatchPipeline is the end-to-end test's pipeline: the default
// pipeline's x86_64 kernel (tinyconfig and the shipped boot fragment,
// so the base kernel and kcc's store are shared with the other x86_64
// tests) measuring getppid only, base against the series, in
// deterministic QEMU (-icount: ns/op counts executed instructions).
const perPatchPipeline = `name = "perpatch-x86-getppid"
description = "getppid, x86_64 tinyconfig, base vs patched, deterministic QEMU"
deterministic = true

[series]
apply = true

[build]
arch = "x86_64"
config = "tinyconfig"
fragments = ["qemu-boot"]

[[variant]]
name = "base"
description = "the series' base"
apply_series = false

[[variant]]
name = "patched"
description = "the base with the series applied"
apply_series = true

[[benchmark]]
name = "getppid"
iterations = 20000

[repeats]
boots = 2
iterations = 1

[target]
kind = "qemu"
smp = 1
memory = "256M"
timeout = "5m"
kvm = "off"

[[comparison]]
base = "base"
other = "patched"
`

// perPatchSeries writes a 4-patch series on v6.1-debian into the bare
// repository dir (once: the commits are the same in every run) and
// returns it as git format-patch writes it (cover letter, threaded, with
// its base-commit), and the commits. Patches 1, 2 and 4 add a comment to
// a C file; patch 3 puts a loop into getppid() (the watch end-to-end
// test's culprit).
func perPatchSeries(t *testing.T, dir string) (mbox string, commits []string) {
	t.Helper()
	base := testgit.Git(t, nil, nil, "--git-dir="+dir, "rev-parse", buildtest.BaseCommit+"^{commit}")
	parent := base
	patches := []struct{ path, subject string }{
		{"kernel/signal.c", "signal: say where the series starts"},
		{"kernel/fork.c", "fork: a comment on copy_process()"},
		{"kernel/sys.c", "sys: spin a little in getppid()"},
		{"kernel/exit.c", "exit: a comment on do_exit()"},
	}
	for k, p := range patches {
		ref := fmt.Sprintf("refs/perpatch-e2e/%d", k+1)
		if c, err := testgit.Run(nil, nil, "--git-dir="+dir, "rev-parse", "-q", "--verify", ref); err == nil {
			commits, parent = append(commits, c), c
			continue
		}
		old, err := testgit.Blob(dir, parent, p.path)
		if err != nil {
			t.Fatal(err)
		}
		text := old + "\n" + fmt.Sprintf("/* perpatch e2e: change %d */\n", k+1)
		if k == 2 {
			from := "SYSCALL_DEFINE0(getppid)\n{\n\tint pid;\n\n"
			if !strings.Contains(old, from) {
				t.Fatal("kernel/sys.c: getppid() not found")
			}
			text = strings.Replace(old, from, "SYSCALL_DEFINE0(getppid)\n{\n\tint pid, i;\n\n\tfor (i = 0; i < 400; i++)\n\t\tbarrier();\n", 1)
		}
		c := testgit.Commit(t, dir, parent, p.subject, fmt.Sprintf("2026-11-20T10:%02d:00Z", k), map[string]string{p.path: text})
		testgit.Git(t, nil, nil, "--git-dir="+dir, "update-ref", ref, c)
		commits, parent = append(commits, c), c
	}
	env := append(testgit.Identity("2026-11-20T11:00:00Z"), "GIT_CONFIG_GLOBAL=/dev/null")
	mb := testgit.Git(t, env, nil, "--git-dir="+dir, "format-patch", "--stdout", "--thread=shallow", "--cover-letter",
		"--base="+base, "--from=Ann Dev <ann@example.org>", "--to=test@example.org", base+".."+parent)
	mb = strings.ReplaceAll(mb, "*** SUBJECT HERE ***", "sys: four small changes")
	mb = strings.ReplaceAll(mb, "*** BLURB HERE ***", "Four small changes; one of them costs getppid() time.")
	return mb + "\n", commits
}

// TestServePerPatchFindsThePatchOnRealKernels is issue 21's per-patch
// test on real kernels, through `patcheval serve` (this test binary as a
// child process): a list on a real local public-inbox is followed with
// per_patch; a 4-patch series on Debian's 6.1 tree, in which patch 3
// slows getppid(), arrives there. serve evaluates the whole series
// (x86_64 kernels built with kcc, booted in deterministic QEMU), measures
// it after each patch, finds the whole-series regression, bisects inside
// the series, and only then marks the evaluation done: its report names
// patch 3/4 in the per-patch table and in the bisection, and so does the
// reply draft. It is opt-in (PATCHEVAL_LONG_TESTS=1): besides the cached
// base it builds the series' kernels (incremental, kcc hits but for
// kernel/sys.c).
func TestServePerPatchFindsThePatchOnRealKernels(t *testing.T) {
	testenv.SkipUnlessLong(t, "x86_64 kernels of a 4-patch series (incremental, kcc) and about 20 deterministic boots")
	src := buildtest.Repo(t)
	// The tree serve applies the series to: the watch end-to-end test's
	// hard-linked clone of the 6.1 tree in the cache (pipelines/service
	// TestWatchRetestsNewTagAndBisectsTheRegression), whose build
	// workspace for this recipe has a full O= directory already, so the
	// series' kernels are incremental builds there instead of a new
	// workspace's first build. Its lock keeps the two tests apart.
	root := filepath.Join(xdg.CacheDir(), "trees", "retest-e2e")
	if err := os.MkdirAll(root, 0o755); err != nil {
		t.Fatal(err)
	}
	lock, err := os.OpenFile(filepath.Join(root, ".lock"), os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	defer lock.Close()
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX); err != nil {
		t.Fatal(err)
	}
	tree := filepath.Join(root, "local.git")
	if _, err := os.Stat(filepath.Join(tree, "HEAD")); err != nil {
		testgit.Git(t, nil, nil, "clone", "-q", "--bare", "--local", src, tree)
	}
	series, commits := perPatchSeries(t, tree)

	dir := t.TempDir()
	seed := filepath.Join(dir, "seed.mbox")
	if err := os.WriteFile(seed, []byte("From nobody Mon Nov  2 09:00:00 2026\nFrom: Old Timer <old@example.org>\nTo: test@example.org\n"+
		"Subject: hello list\nMessage-ID: <seed@example.org>\nDate: Mon, 02 Nov 2026 09:00:00 +0000\n\nHello.\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	inbox := testinbox.StartWith(t, testinbox.Options{Bulk: true, NoAll: true}, seed)
	pipeline := filepath.Join(dir, "perpatch-x86-getppid.toml")
	if err := os.WriteFile(pipeline, []byte(perPatchPipeline), 0o644); err != nil {
		t.Fatal(err)
	}
	// serve mirrors a followed list's inbox into the cache's lists/: this
	// run's inbox is new, so the last run's mirror goes.
	if err := os.RemoveAll(filepath.Join(xdg.CacheDir(), "lists", "perpatch-e2e.git")); err != nil {
		t.Fatal(err)
	}
	state, cfgDir := filepath.Join(dir, "state"), filepath.Join(dir, "config")
	os.MkdirAll(state, 0o755)
	os.MkdirAll(cfgDir, 0o755)
	t.Setenv("PATCHEVAL_STATE_DIR", state)
	t.Setenv("PATCHEVAL_CONFIG_DIR", cfgDir)
	config := fmt.Sprintf(`
[[list]]
name = "perpatch-e2e"
url = "%s/%s"
pipeline = %q
tree = %q
base = "series"
quiet = "1s"
poll = "1s"
per_patch = true
`, inbox.URL, inbox.Inbox, pipeline, tree)
	if err := os.WriteFile(filepath.Join(cfgDir, "config.toml"), []byte(config), 0o600); err != nil {
		t.Fatal(err)
	}
	srv := startServeChild(t, "--from", "Patch Bot <bot@example.com>", "-j", "2", "--builds-at-once", "1")
	st, err := store.Open(filepath.Join(state, store.FileName))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	waitUntil := func(what string, d time.Duration, ok func() bool) {
		t.Helper()
		for deadline := time.Now().Add(d); !ok(); time.Sleep(time.Second) {
			if time.Now().After(deadline) {
				t.Fatalf("timed out after %s waiting for %s", d, what)
			}
		}
	}
	waitUntil("the follower's first poll", 2*time.Minute, func() bool {
		ls, _ := st.FollowListState("perpatch-e2e")
		return ls != nil && ls.LastCommit != ""
	})

	mb := filepath.Join(dir, "series.mbox")
	if err := os.WriteFile(mb, []byte(series), 0o644); err != nil {
		t.Fatal(err)
	}
	posted := time.Now()
	inbox.Add(t, mb)
	var ev *store.Evaluation
	waitUntil("the series' evaluation to end", 90*time.Minute, func() bool {
		ss, _ := st.FollowSeriesList("perpatch-e2e", "")
		for _, s := range ss {
			if s.EvaluationID != 0 {
				ev, _ = st.Evaluation(s.EvaluationID)
			}
		}
		return ev != nil && (ev.Status == store.StatusDone || ev.Status == "failed" || ev.Status == "cancelled")
	})
	wall := time.Since(posted)
	out := filepath.Join(state, "evaluations", fmt.Sprint(ev.ID))
	txt, _ := os.ReadFile(filepath.Join(out, "report.txt"))
	t.Logf("evaluation %d %s %s after the series was posted; report.txt:\n%s", ev.ID, ev.Status, wall.Round(time.Second), txt)
	if ev.Status != store.StatusDone {
		t.Fatalf("evaluation %d is %s", ev.ID, ev.Status)
	}
	f, err := os.Open(filepath.Join(out, "report.json"))
	if err != nil {
		t.Fatal(err)
	}
	r, err := report.ReadJSON(f)
	f.Close()
	if err != nil {
		t.Fatal(err)
	}
	// The whole series: a getppid regression.
	regressed := false
	for _, bm := range r.Benchmarks {
		for _, c := range bm.Comparisons {
			t.Logf("whole series: %s -> %s %s %s %+.1f%%: %s", c.Base, c.Other, bm.Name, bm.Metric, c.Change, c.Verdict)
			if bm.Name == "getppid" && c.Verdict == stats.Regression {
				regressed = true
			}
		}
	}
	if !regressed {
		t.Fatalf("the whole series shows no getppid regression")
	}
	// Per patch: only 3/4 moves getppid.
	if r.PerPatch == nil || len(r.PerPatch.Tables) == 0 {
		t.Fatalf("report.json has no per-patch table: %+v", r.PerPatch)
	}
	sawGetppid := false
	for _, tb := range r.PerPatch.Tables {
		mv := tb.Movers()
		t.Logf("per patch: %s %s %s moved by %v", tb.Variant, tb.Name, tb.Metric, mv)
		if tb.Name == "getppid" {
			sawGetppid = true
			if len(mv) != 1 || !strings.HasPrefix(mv[0], "3/4 ") {
				t.Errorf("getppid moved by %v, want 3/4 only", mv)
			}
		}
	}
	if !sawGetppid {
		t.Error("the per-patch tables have no getppid table")
	}
	// The bisection inside the series names patch 3/4, confirmed.
	b := r.PerPatch.Bisection
	if b == nil || b.Status != "found" || b.Patch != 3 || b.Patches != 4 || b.Commit == "" || !b.Confirmed {
		t.Fatalf("bisection inside the series: %+v; want patch 3/4 found and confirmed", b)
	}
	if b.Subject != "sys: spin a little in getppid()" || b.Builds > b.Bound {
		t.Errorf("bisection: %q, %d builds (bound %d)", b.Subject, b.Builds, b.Bound)
	}
	// The commit it names is the one serve made of patch 3 (the same
	// tree as the culprit the test wrote).
	if got, err := testgit.Run(nil, nil, "--git-dir="+tree, "rev-parse", b.Commit+"^{tree}"); err != nil ||
		got != testgit.Git(t, nil, nil, "--git-dir="+tree, "rev-parse", commits[2]+"^{tree}") {
		t.Errorf("the bisection names %s (tree %s, %v), not patch 3's tree", b.Commit, got, err)
	}
	t.Logf("bisection: %s", b.Sentence())
	eml, _ := os.ReadFile(filepath.Join(out, "reply.eml"))
	if !strings.Contains(string(eml), "patch 3/4") {
		t.Errorf("the reply draft does not name patch 3/4:\n%s", eml)
	}
	srv.stop(syscall.SIGTERM)
}
