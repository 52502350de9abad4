package runner

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/patcheval/patcheval/build"
	"github.com/patcheval/patcheval/build/buildtest"
	"github.com/patcheval/patcheval/evaluate"
	"github.com/patcheval/patcheval/evaluate/guest"
	"github.com/patcheval/patcheval/evaluate/guest/selinux"
	"github.com/patcheval/patcheval/evaluate/report"
	"github.com/patcheval/patcheval/evaluate/stats"
	"github.com/patcheval/patcheval/evaluate/target/qemu"
	"github.com/patcheval/patcheval/internal/progress"
	"github.com/patcheval/patcheval/internal/testenv"
	"github.com/patcheval/patcheval/mbox"
	"github.com/patcheval/patcheval/pipelines"
)

// TestRunSELinuxTax runs the shipped selinux-tax pipeline for real on the
// thread of seed 002: one ppc64le kernel with SELinux, booted disabled
// (selinux=0), enforcing and permissive with the minimal policy compiled
// by checkpolicy and loaded by the agent through selinuxfs (a boot whose
// agent could not load it or set the mode fails, so every sample is of
// the mode it names). Checks the thread's table (enforcing, permissive,
// disabled, SELinux tax) and that the AVC check costs: kill() is slower
// enforcing than disabled.
func TestRunSELinuxTax(t *testing.T) {
	testenv.SkipUnlessLong(t, "a ppc64le kernel with SELinux (a build of its own) and 6 deterministic QEMU boots with stress-ng")
	repo := buildtest.Repo(t)
	p, err := pipelines.Builtin("selinux-tax")
	if err != nil {
		t.Fatal(err)
	}
	thread, err := os.ReadFile(filepath.Join(testenv.ThreadsDir(), "generic-entry-v5-report.mbox"))
	if err != nil {
		t.Fatal(err)
	}
	out := t.TempDir()
	opts := Options{Mbox: thread, Tree: repo, OutDir: out, Boots: 2,
		From: mbox.Address{Name: "Kernel Tester", Email: "tester@example.org"}}
	env := Env{Store: openStore(t, filepath.Join(t.TempDir(), "patcheval.db")), CacheDir: buildtest.Options(t).CacheDir, Progress: progress.New(os.Stderr)}
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Minute)
	defer cancel()
	start := time.Now()
	res, err := Run(ctx, env, p, opts)
	if err != nil {
		t.Fatalf("run: %v", err)
	}
	t.Logf("selinux-tax: %s wall", time.Since(start).Round(time.Second))
	r := res.Report
	if len(r.Tables) != 1 || r.Tables[0].Name != "SELinux tax" {
		t.Fatalf("tables %+v", r.Tables)
	}
	rows := map[string]report.TableRow{}
	for _, row := range r.Tables[0].Rows {
		rows[row.Benchmark+" "+row.Metric] = row
		t.Logf("%-28s %-26s enforcing %.1f permissive %.1f disabled %.1f tax %+.2f%%", row.Benchmark, row.Metric,
			row.Means[0], row.Means[1], row.Means[2], row.Change.Change)
	}
	for _, k := range []string{"kill ns/op", "kill-child ns/op", "stress-ng --kill 1 -t 5 bogo-ops/s (real time)"} {
		row, ok := rows[k]
		if !ok || row.Change == nil {
			t.Errorf("table has no row %q with a tax: %+v", k, r.Tables[0].Rows)
			continue
		}
		for i, n := range row.N {
			if n < 2 {
				t.Errorf("%s: %d samples of %s", k, n, r.Tables[0].Columns[i])
			}
		}
	}
	if c := rows["kill ns/op"].Change; c != nil && (c.Verdict != stats.Regression || c.Change <= 0) {
		t.Errorf("kill ns/op enforcing vs disabled: %+.2f%% %s, want the AVC check to cost", c.Change, c.Label())
	}
	txt, err := os.ReadFile(res.Text)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"SELinux tax\n===", "enforcing  permissive  disabled  SELinux tax", "SELinux enforcing (policy minimal loaded through selinuxfs)"} {
		if !strings.Contains(string(txt), want) {
			t.Errorf("report.txt lacks %q", want)
		}
	}
	t.Logf("report:\n%s", txt)
}

// runSeed runs shipped pipeline name for real with boots boots per
// variant and no series, and returns its report and report text.
func runSeed(t *testing.T, name string, boots int) (*report.Report, string) {
	t.Helper()
	repo := buildtest.Repo(t)
	p, err := pipelines.Builtin(name)
	if err != nil {
		t.Fatal(err)
	}
	opts := Options{Tree: repo, OutDir: t.TempDir(), Boots: boots}
	env := Env{Store: openStore(t, filepath.Join(t.TempDir(), "patcheval.db")), CacheDir: buildtest.Options(t).CacheDir, Progress: progress.New(os.Stderr)}
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Minute)
	defer cancel()
	start := time.Now()
	res, err := Run(ctx, env, p, opts)
	if err != nil {
		t.Fatalf("run %s: %v", name, err)
	}
	t.Logf("%s: %s wall", name, time.Since(start).Round(time.Second))
	txt, err := os.ReadFile(res.Text)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("report:\n%s", txt)
	return res.Report, string(txt)
}

// logTables logs every table row of r.
func logTables(t *testing.T, r *report.Report) map[string]report.TableRow {
	rows := map[string]report.TableRow{}
	for _, tb := range r.Tables {
		for _, row := range tb.Rows {
			rows[tb.Name+": "+row.Benchmark+" "+row.Metric] = row
			ch := ""
			if row.Change != nil {
				ch = fmt.Sprintf(" %s %+.2f%% (%s)", tb.ChangeName, row.Change.Change, row.Change.Label())
			}
			t.Logf("%s: %s %s %v = %v%s", tb.Name, row.Benchmark, row.Metric, tb.Columns, row.Means, ch)
		}
	}
	return rows
}

// TestRunARM64Kill runs seed 004's arm64 pipeline for real: the arm64
// boot kernel (cached) and the same with PREEMPT_DYNAMIC (a build of its
// own), unpinned and pinned to CPU 0. Cross-process kill costs more per
// op than self-kill, and the confound report names PREEMPT_RCU.
func TestRunARM64Kill(t *testing.T) {
	testenv.SkipUnlessLong(t, "an arm64 kernel with PREEMPT_DYNAMIC (a build of its own) and 8 deterministic QEMU boots with stress-ng")
	r, _ := runSeed(t, "arm64-kill", 2)
	rows := logTables(t, r)
	self, cross := rows["self-kill vs cross-process kill: kill ns/op"], rows["self-kill vs cross-process kill: kill-child ns/op"]
	if self.N == nil || cross.N == nil || self.N[0] < 2 || cross.Means[0] <= self.Means[0] {
		t.Errorf("self-kill %+v, cross-process kill %+v: want both measured, cross-process dearer", self, cross)
	}
	for _, k := range []string{"PREEMPT_DYNAMIC on arm64: kill ns/op", "PREEMPT_DYNAMIC on arm64, taskset: kill-child ns/op",
		"PREEMPT_DYNAMIC on arm64: stress-ng --kill 1 -t 5 bogo-ops/s (real time)"} {
		if row, ok := rows[k]; !ok || row.Change == nil {
			t.Errorf("no row %q with a delta", k)
		}
	}
	rcu := false
	for _, cf := range r.Confounds {
		for _, d := range cf.Deltas {
			rcu = rcu || (cf.Base == "vol-nodynamic" && cf.Other == "vol-dynamic" && d.Symbol == "PREEMPT_RCU" && d.To == "y")
		}
	}
	if !rcu {
		t.Errorf("the confound report does not name PREEMPT_RCU between vol-nodynamic and vol-dynamic: %+v", r.Confounds)
	}
}

// TestRunBridgeLoop runs seed 003's bridge loop for real: the pseries
// kernel with BRIDGE=y (a build of its own, mostly compiler-cache hits),
// 100 runs of the thread's bridge.sh per measurement, time and sys time
// per loop.
func TestRunBridgeLoop(t *testing.T) {
	testenv.SkipUnlessLong(t, "a ppc64le kernel with BRIDGE (a build of its own) and 6 deterministic QEMU boots")
	r, txt := runSeed(t, "bridge-loop", 2)
	rows := logTables(t, r)
	for _, m := range []string{"ns/op", "sys ns/op"} {
		row, ok := rows["bridge.sh, 100 loops: bridge-sh "+m]
		if !ok || row.Change == nil || row.N[0] < 4 || row.Means[0] <= 0 {
			t.Errorf("bridge %s: %+v", m, row)
		}
	}
	if !strings.Contains(txt, "bridge-sh [agent loop] (sys ns/op") {
		t.Errorf("report has no sys time per loop")
	}
}

// TestSELinuxTaxKernelNeedsSecuritySelinux boots the selinux-tax kernel
// (cached once TestRunSELinuxTax built it) with the enforcing plan, once
// without and once with security=selinux. Its CONFIG_LSM (tinyconfig's)
// does not list selinux, so without the parameter the kernel never starts
// SELinux and the agent fails the boot: what the validator's "add
// security=selinux" guards against, seen on the real kernel.
func TestSELinuxTaxKernelNeedsSecuritySelinux(t *testing.T) {
	testenv.SkipUnlessLong(t, "the selinux-tax ppc64le kernel (a build of its own unless cached) and 2 deterministic QEMU boots")
	p, err := pipelines.Builtin("selinux-tax")
	if err != nil {
		t.Fatal(err)
	}
	specs := p.Builds()
	if len(specs) != 1 {
		t.Fatalf("selinux-tax builds %+v", specs)
	}
	spec := specs[0]
	art := buildtest.Build(t, build.Request{Repo: buildtest.Repo(t), Commit: buildtest.BaseCommit, Arch: spec.Arch,
		BaseConfig: spec.BaseConfig, Fragments: []string{buildtest.BootFragment(t, spec.Arch)}, Symbols: spec.Symbols, Variant: spec.Variant})
	cfg, err := build.ReadConfigFile(art.Config)
	if err != nil {
		t.Fatal(err)
	}
	lsm := cfg["LSM"]
	if lsm == "" || strings.Contains(lsm, "selinux") {
		t.Fatalf("CONFIG_LSM=%s: want a list without selinux (tinyconfig's)", lsm)
	}
	src, err := selinux.Source(p.SELinuxPolicy.Label())
	if err != nil {
		t.Fatal(err)
	}
	pol, err := selinux.Compile(context.Background(), p.SELinuxPolicy.Label(), src, buildtest.Options(t).CacheDir)
	if err != nil {
		t.Fatal(err)
	}
	plan := guest.Plan{SELinux: &guest.SELinux{Mode: guest.SELinuxEnforcing, Policy: pol, PolicyName: p.SELinuxPolicy.Label()},
		Benchmarks: []guest.Bench{{Name: guest.BenchKill, Ops: 1000}}}
	boot := func(cmdline string) (*evaluate.BootResult, error) {
		return qemu.New(qemu.Config{Deterministic: true, Timeout: 20 * time.Minute}).Boot(context.Background(),
			evaluate.Kernel{Variant: "enforcing", Arch: spec.Arch, Image: art.Image, Cmdline: cmdline}, plan)
	}
	_, err = boot("")
	if err == nil || !strings.Contains(err.Error(), "SELinux is not enabled") || !strings.Contains(err.Error(), "add security=selinux") {
		t.Errorf("enforcing without security=selinux: %v, want the agent to find SELinux not enabled and name the missing security=selinux", err)
	}
	t.Logf("without security=selinux: %v", err)
	res, err := boot("security=selinux")
	if err != nil {
		t.Fatalf("enforcing with security=selinux: %v", err)
	}
	if info := res.Output.Info; info == nil || info.SELinux != guest.SELinuxEnforcing {
		t.Errorf("with security=selinux: info %+v, want SELinux %s", info, guest.SELinuxEnforcing)
	}
	t.Logf("with security=selinux: SELinux %s, kill %.1f ns/op", res.Output.Info.SELinux, res.Output.Results[0].NsPerOp)
}
