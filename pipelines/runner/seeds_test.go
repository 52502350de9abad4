package runner

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/patcheval/patcheval/build/buildtest"
	"github.com/patcheval/patcheval/evaluate/report"
	"github.com/patcheval/patcheval/evaluate/stats"
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
