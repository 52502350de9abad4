package main

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/patcheval/patcheval/build/buildtest"
	"github.com/patcheval/patcheval/evaluate/report"
	"github.com/patcheval/patcheval/evaluate/target/testlab"
	"github.com/patcheval/patcheval/internal/testenv"
	"github.com/patcheval/patcheval/pipelines/runner"
	"github.com/patcheval/patcheval/pipelines/store"
)

// TestLabPipeline compares two x86_64 kernels on the emulated lab host
// (evaluate/target/testlab) through the whole hardware path, as `patcheval lore
// --pipeline` runs it: Debian's 6.1 without and with a series that makes
// getppid() spin (20,000 barrier() rounds a call: under TCG in real time
// the lab's clock is too coarse and noisy for less), built with the lab's
// fragment, each boot a kexec over SSH into the kernel under test,
// verified (build-id, command line) before its benchmark, 3 boots each
// of 5 getppid runs (with 3 samples a variant Welch's test, at df near 2,
// did not call even a +18,000% change) interleaved base patched base patched
// ...; the
// machine is lost once (QEMU killed as the third kexec'd kernel starts)
// and the boot hook power-cycles it. The report finds the regression,
// every run carries its kernel's build-id, and no sample comes from a
// kernel other than the one asked for. Long: the lab kernel (886
// objects, shared with evaluate/target/ssh's TestLabKexec) and the
// patched one (kernel/sys.c and the link).
func TestLabPipeline(t *testing.T) {
	testenv.SkipUnlessLong(t, "two x86_64 lab kernels and their kexec boots on the emulated lab host")
	buildtest.SkipIfSlow(t)
	repo := buildtest.Repo(t)
	art := testlab.Kernel(t)
	h := testlab.Start(t, art.Image)
	dir := t.TempDir()
	t.Setenv("PATCHEVAL_STATE_DIR", dir)
	testlab.FragmentFile(t, dir)
	opts, _ := json.Marshal(h.SSHOptions())
	toml := fmt.Sprintf(`name = "lab-getppid"
description = "base vs a getppid() regression on the emulated lab host, by kexec"

[tree]
base = "v6.1-debian"

[build]
arch = "x86_64"
fragments = ["x86_64-q35", "lab-x86_64.config"]
symbols = { PREEMPT_VOLUNTARY = "y" }

[[variant]]
name = "base"
apply_series = false

[[variant]]
name = "patched"

[[benchmark]]
name = "getppid"
iterations = 20000

[repeats]
boots = 3
iterations = 5

[compare]
threshold = "2%%"

[target]
kind = "ssh"
host = %q
boot = "kexec"
initrd = %q
identity = %q
ssh_options = %s
boot_hook = %q
timeout = "15m"
`, h.URL, h.Initrd, h.Identity, opts, h.RestartHook)
	pipeline := filepath.Join(dir, "lab.toml")
	os.WriteFile(pipeline, []byte(toml), 0o644)
	branch := fmt.Sprintf("patcheval/test-lab-%d", os.Getpid())
	t.Cleanup(func() { exec.Command("git", "--git-dir="+repo, "branch", "-D", branch).Run() })

	// Lose the machine once: kill QEMU as the third kexec'd kernel starts.
	before := strings.Count(readText(h.Console), "Linux version")
	lost := make(chan bool, 1)
	stop := make(chan struct{})
	defer close(stop)
	go func() {
		for {
			select {
			case <-stop:
				lost <- false
				return
			case <-time.After(300 * time.Millisecond):
			}
			if strings.Count(readText(h.Console), "Linux version") >= before+3 {
				h.Kill()
				lost <- true
				return
			}
		}
	}()
	start := time.Now()
	out := filepath.Join(dir, "out")
	stdout, stderr, code := loreCLI(t, "", "-m", filepath.Join("testdata", "lab-getppid.mbox"), "--pipeline", pipeline, "--tree", repo,
		"--branch", branch, "--db", filepath.Join(dir, "lab.db"), "--out", out, "--from", "Lab Bot <lab-bot@patcheval.invalid>")
	wall := time.Since(start)
	if code != 0 {
		t.Fatalf("exit %d\n%s\n%s\nconsole:\n%s", code, stdout, stderr, h.ConsoleTail(30))
	}
	if !<-lost {
		t.Error("the machine was never lost: the recovery was not tested")
	}
	var r report.Report
	b, err := os.ReadFile(filepath.Join(out, "report.json"))
	if err != nil || json.Unmarshal(b, &r) != nil {
		t.Fatalf("report.json: %v", err)
	}
	if !strings.Contains(strings.Join(r.Notes, "\n"), runner.LayoutNotChecked) {
		t.Errorf("a real-time report does not say that code layout was not checked: %q", r.Notes)
	}
	ids := map[string]string{}
	for _, v := range r.Variants {
		ids[v.Name] = v.Kernel.BuildID
	}
	if len(ids["base"]) != 40 || len(ids["patched"]) != 40 || ids["base"] != art.BuildID() || ids["base"] == ids["patched"] {
		t.Errorf("variant build-ids %v (lab kernel %s)", ids, art.BuildID())
	}
	var verdict string
	for _, bm := range r.Benchmarks {
		for _, run := range bm.Runs {
			if run.BuildID != ids[run.Variant] {
				t.Errorf("%s boot %d ran on %s, want %s", run.Variant, run.Boot, run.BuildID, ids[run.Variant])
			}
		}
		if bm.Name == "getppid" && bm.Metric == "ns/op" {
			for _, c := range bm.Comparisons {
				verdict = fmt.Sprintf("%s %+.1f%% [%+.1f%%, %+.1f%%]", c.Verdict, c.Change, c.CILow, c.CIHigh)
				if c.Verdict != "regression" {
					t.Errorf("getppid: %s, want a regression", verdict)
				}
			}
		}
	}
	st, err := store.Open(filepath.Join(dir, "lab.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	evs, _ := st.ListEvaluations()
	runs, _ := st.RunsOf(evs[0].ID)
	var okRuns, infra int
	var evidence string
	for _, run := range runs {
		switch run.Status {
		case store.RunOK:
			okRuns++
			if !run.Env.Verified || run.Env.BuildID != ids[run.Variant] {
				t.Errorf("run %d (%s) not verified: %+v", run.ID, run.Variant, run.Env)
			}
			c, _ := st.Console(run.ID)
			for _, l := range strings.Split(string(c), "\n") {
				if strings.HasPrefix(l, "--- verified") && evidence == "" {
					evidence = l
				}
				if strings.HasPrefix(l, "--- boot hook (recover)") {
					t.Logf("run %d (%s #%d) recovered: %s", run.ID, run.Variant, run.Boot+1, l)
				}
			}
		default:
			infra++
			if run.Samples != 0 {
				t.Errorf("run %d (%s): %s with %d samples", run.ID, run.Variant, run.Status, run.Samples)
			}
		}
	}
	if okRuns != 6 {
		t.Errorf("%d finished boots, want 6", okRuns)
	}
	t.Logf("lab pipeline: %v wall, %d boots (%d verified, %d infra), getppid patched vs base: %s", wall.Round(time.Second), len(runs), okRuns, infra, verdict)
	t.Logf("verify evidence: %s", evidence)
}

func readText(p string) string {
	b, _ := os.ReadFile(p)
	return string(b)
}
