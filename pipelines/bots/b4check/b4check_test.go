package b4check_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/patcheval/patcheval/evaluate"
	"github.com/patcheval/patcheval/evaluate/report"
	"github.com/patcheval/patcheval/internal/testenv"
	"github.com/patcheval/patcheval/internal/testinbox"
	"github.com/patcheval/patcheval/pipelines/bots/b4check"
	"github.com/patcheval/patcheval/pipelines/service"
	"github.com/patcheval/patcheval/pipelines/store"
)

// serve runs a real patcheval service (SQLite, River) on loopback that
// builds and boots nothing itself (it only coordinates), so that what the tests
// store stays as stored.
func serve(t *testing.T, cfg service.Config) (*service.Service, string) {
	t.Helper()
	cfg.Database = filepath.Join(t.TempDir(), "patcheval.db")
	cfg.CacheDir = t.TempDir()
	if cfg.Work == nil {
		cfg.Work = &service.Capabilities{Coordinator: true}
	}
	ctx, cancel := context.WithCancel(context.Background())
	s, err := service.New(ctx, cfg)
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx, ln) }()
	t.Cleanup(func() {
		cancel()
		<-done
		s.Close()
	})
	return s, "http://" + ln.Addr().String()
}

// record stores a finished (or queued, running, failed) evaluation of
// the series msgid with a report whose kill comparison changes by
// killPct (0: equivalent samples).
func record(t *testing.T, s *service.Service, msgid, status string, killPct float64, pp *report.PerPatch) int64 {
	t.Helper()
	st := s.Store()
	e, _, err := st.CreateOrResumeEvaluation(store.Key("b4check", msgid, status), store.EvaluationMeta{
		Pipeline: "ppc-preempt-dynamic", SeriesMsgID: msgid, SeriesTitle: "powerpc: enable dynamic preemption", SeriesVersion: 4,
		Tree: "/srv/linux.git", Base: "0123456789abcdef0123456789abcdef01234567"})
	if err != nil {
		t.Fatal(err)
	}
	variants := []string{"voluntary", "voluntary+dyn"}
	var all []evaluate.Sample
	for b := 0; b < 3; b++ {
		for vi, v := range variants {
			if status == "queued" || status == "running" && b == 2 {
				continue
			}
			runID, err := st.BeginRun(e.ID, v, b)
			if err != nil {
				t.Fatal(err)
			}
			var samples []evaluate.Sample
			for it := 0; it < 5; it++ {
				kill := 1000 * (1 + float64(vi)*killPct/100) * (1 + 0.001*float64((it*7+b*3)%5-2))
				samples = append(samples, evaluate.Sample{Variant: v, Boot: b, Iteration: it, Benchmark: "kill", Metric: "ns/op", Unit: "ns", Value: kill})
			}
			if err := st.FinishRun(runID, store.RunOK, evaluate.Environment{Target: "qemu", Deterministic: false}, nil, samples); err != nil {
				t.Fatal(err)
			}
			all = append(all, samples...)
		}
	}
	if status != "running" {
		if err := st.SetEvaluationStatus(e.ID, status); err != nil {
			t.Fatal(err)
		}
	} else if status == "running" {
		// 2 more boots planned, not finished.
		for _, v := range variants {
			if _, err := st.BeginRun(e.ID, v, 2); err != nil {
				t.Fatal(err)
			}
		}
	}
	if status != "done" {
		return e.ID
	}
	r := &report.Report{Title: "ppc-preempt-dynamic", Generated: time.Now().UTC(), Arch: "ppc64le", PerPatch: pp,
		Confounds: []report.Confound{{Base: "voluntary", Other: "voluntary+dyn", Deltas: []report.ConfigDelta{
			{Symbol: "PREEMPT_DYNAMIC", From: "n", To: "y", Requested: true},
			{Symbol: "PREEMPT_RCU", From: "n", To: "y", Rule: "default y if PREEMPTION", Where: "kernel/rcu/Kconfig:21"},
		}}}}
	for _, v := range variants {
		r.Variants = append(r.Variants, report.Variant{Name: v, Boots: 3})
	}
	if err := r.AddResults(all, report.Spec{Comparisons: []report.Pair{{Base: "voluntary", Other: "voluntary+dyn"}}}); err != nil {
		t.Fatal(err)
	}
	dir := s.OutDir(e.ID)
	os.MkdirAll(dir, 0o755)
	f, err := os.Create(filepath.Join(dir, "report.json"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := report.WriteJSON(f, r); err != nil {
		t.Fatal(err)
	}
	return e.ID
}

func cover(msgid string) []byte {
	return []byte("From: Shrikanth Hegde <sshegde@example.org>\nMessage-ID: <" + msgid + ">\n" +
		"Subject: [PATCH v4 0/2] powerpc: Enable dynamic preemption\n\nThis series enables dynamic preemption.\n")
}

func patch(msgid, root, subject string) []byte {
	return []byte("From: Shrikanth Hegde <sshegde@example.org>\nMessage-ID: <" + msgid + ">\nIn-Reply-To: <" + root + ">\n" +
		"References: <" + root + ">\nSubject: " + subject + "\n\nbody\n---\n" +
		"diff --git a/arch/powerpc/Kconfig b/arch/powerpc/Kconfig\n--- a/arch/powerpc/Kconfig\n+++ b/arch/powerpc/Kconfig\n@@ -1 +1,2 @@\n x\n+y\n")
}

func one(t *testing.T, res []b4check.Result) b4check.Result {
	t.Helper()
	if len(res) != 1 {
		t.Fatalf("want one result, got %d: %+v", len(res), res)
	}
	r := res[0]
	if r.Tool != "patcheval" {
		t.Errorf("tool %q", r.Tool)
	}
	return r
}

// TestSeriesStatuses: the series' evaluation on a real service, in each
// state, answers with the protocol's status and a summary that says why.
func TestSeriesStatuses(t *testing.T) {
	s, base := serve(t, service.Config{})
	regress := record(t, s, "regress@example.org", "done", 15, nil)
	record(t, s, "same@example.org", "done", 0, nil)
	record(t, s, "running@example.org", "running", 0, nil)
	record(t, s, "queued@example.org", "queued", 0, nil)
	failed := record(t, s, "noapply@example.org", "failed", 0, nil)
	err := s.Store().RecordApplyFailure(store.ApplyFailure{EvaluationID: failed, Patch: 2, Total: 2, Label: "2/2 powerpc: static calls",
		File: "arch/powerpc/Kconfig", Hunk: 1, Reason: "hunk 1 does not match", ErrorKind: "failed", Base: "v7.2.13"})
	if err != nil {
		t.Fatal(err)
	}
	cfg := b4check.Config{Server: base, ReportOnly: true}
	cases := []struct {
		msgid, status, summary string
	}{
		{"regress@example.org", "fail", "1 significant regression(s) of 1 comparisons; worst kill ns/op voluntary -> voluntary+dyn +15.0%"},
		{"same@example.org", "pass", "1 comparisons: 1 equivalent"},
		{"running@example.org", "warn", "running: 4/6 boots"},
		{"queued@example.org", "warn", "queued (evaluation"},
		{"noapply@example.org", "fail", "does not apply: 2/2 powerpc: static calls (arch/powerpc/Kconfig, hunk 1)"},
	}
	for _, c := range cases {
		r := one(t, b4check.Check(context.Background(), cfg, cover(c.msgid), ""))
		if r.Status != c.status || !strings.Contains(r.Summary, c.summary) {
			t.Errorf("%s: got %s %q, want %s containing %q", c.msgid, r.Status, r.Summary, c.status, c.summary)
		}
		if !strings.HasPrefix(r.URL, base+"/evaluations/") {
			t.Errorf("%s: url %q", c.msgid, r.URL)
		}
	}
	r := one(t, b4check.Check(context.Background(), cfg, cover("regress@example.org"), ""))
	for _, want := range []string{"Significant and above", "kill ns/op: voluntary -> voluntary+dyn +15.0%", "Kconfig also changed voluntary -> voluntary+dyn: PREEMPT_RCU n -> y (kernel/rcu/Kconfig:21)"} {
		if !strings.Contains(r.Details, want) {
			t.Errorf("details lack %q:\n%s", want, r.Details)
		}
	}
	if r.URL != fmt.Sprintf("%s/evaluations/%d", base, regress) {
		t.Errorf("url %q", r.URL)
	}
	// Report-only and no evaluation: nothing to report.
	if res := b4check.Check(context.Background(), cfg, cover("unknown@example.org"), ""); len(res) != 0 {
		t.Errorf("unknown series: %+v", res)
	}
}

// TestPerPatch: a patch of a series answers from the per-patch results
// (its step against the one before), and with nothing when the series
// has none; a lone patch is the series.
func TestPerPatch(t *testing.T) {
	s, base := serve(t, service.Config{})
	bench := report.Benchmark{Name: "kill", Metric: "ns/op", Unit: "ns"}
	bench.Comparisons = []report.Comparison{}
	pp := &report.PerPatch{Steps: []report.PatchStep{{Label: "base"}, {Label: "1/2"}, {Label: "2/2"}}}
	// Take real comparisons from a report of samples: 1/2 equivalent, 2/2 +15%.
	var samples []evaluate.Sample
	for b, step := range []string{"base", "1/2", "2/2"} {
		f := map[string]float64{"base": 1, "1/2": 1, "2/2": 1.15}[step]
		for boot := 0; boot < 3; boot++ {
			for it := 0; it < 5; it++ {
				samples = append(samples, evaluate.Sample{Variant: step, Boot: boot, Iteration: it, Benchmark: "kill", Metric: "ns/op", Unit: "ns",
					Value: 1000 * f * (1 + 0.001*float64((it*7+boot*3+b)%5-2))})
			}
		}
	}
	r := &report.Report{}
	if err := r.AddResults(samples, report.Spec{Comparisons: []report.Pair{{Base: "base", Other: "1/2"}, {Base: "1/2", Other: "2/2"}}}); err != nil {
		t.Fatal(err)
	}
	pp.Tables = []report.PatchTable{{Variant: "voluntary+dyn", Base: "voluntary", Benchmark: r.Benchmarks[0]}}
	record(t, s, "series@example.org", "done", 15, pp)
	cfg := b4check.Config{Server: base, ReportOnly: true}
	r2 := one(t, b4check.Check(context.Background(), cfg, patch("p2@example.org", "series@example.org", "[PATCH v4 2/2] powerpc: static calls"), ""))
	if r2.Status != "fail" || !strings.HasPrefix(r2.Summary, "patch 2/2: 1 significant regression") {
		t.Errorf("2/2: %s %q", r2.Status, r2.Summary)
	}
	r1 := one(t, b4check.Check(context.Background(), cfg, patch("p1@example.org", "series@example.org", "[PATCH v4 1/2] powerpc: add"), ""))
	if r1.Status != "pass" || !strings.HasPrefix(r1.Summary, "patch 1/2:") {
		t.Errorf("1/2: %s %q", r1.Status, r1.Summary)
	}
	// A series measured without per-patch results: per-patch says nothing.
	record(t, s, "whole@example.org", "done", 15, nil)
	if res := b4check.Check(context.Background(), cfg, patch("w1@example.org", "whole@example.org", "[PATCH 1/2] x"), ""); len(res) != 0 {
		t.Errorf("no per-patch results: %+v", res)
	}
	// A lone patch is its own series.
	record(t, s, "lone@example.org", "done", 15, nil)
	lone := one(t, b4check.Check(context.Background(), cfg, patch("lone@example.org", "", "[PATCH] powerpc: one"), ""))
	if lone.Status != "fail" {
		t.Errorf("lone patch: %s %q", lone.Status, lone.Summary)
	}
}

// TestBadInput: every way of not knowing is a warn result whose summary
// names the cause, within the deadline.
func TestBadInput(t *testing.T) {
	_, tokBase := serve(t, service.Config{Token: []byte("right-token-0123456789")})
	hang := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { time.Sleep(10 * time.Second) })}
	hln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go hang.Serve(hln)
	t.Cleanup(func() { hang.Close() })
	closed, _ := net.Listen("tcp", "127.0.0.1:0")
	closedURL := "http://" + closed.Addr().String()
	closed.Close()
	badTracking := filepath.Join(t.TempDir(), "tracking.json")
	os.WriteFile(badTracking, []byte("{not json"), 0o600)
	cases := []struct {
		name     string
		cfg      b4check.Config
		msg      []byte
		tracking string
		summary  string
	}{
		{"no server", b4check.Config{}, cover("a@b"), "", "no patcheval server configured"},
		{"server down", b4check.Config{Server: closedURL}, cover("a@b"), "", "unreachable"},
		{"server hangs", b4check.Config{Server: "http://" + hln.Addr().String(), Timeout: time.Second}, cover("a@b"), "", "did not answer within 1s"},
		{"wrong token", b4check.Config{Server: tokBase, Token: "wrong-token-0123456789"}, cover("a@b"), "", "refused the token (401 Unauthorized)"},
		{"not a patch", b4check.Config{Server: tokBase}, []byte("Subject: Re: [PATCH 0/2] x\n\nLooks good.\n"), "", "neither a patch nor a cover letter"},
		{"not mail", b4check.Config{Server: tokBase}, []byte("\x00\x01garbage"), "", "stdin"},
		{"tracking", b4check.Config{Server: tokBase}, cover("a@b"), badTracking, "does not parse"},
		{"bad url", b4check.Config{Server: "ftp://x"}, cover("a@b"), "", "not an http:// or https:// URL"},
	}
	for _, c := range cases {
		start := time.Now()
		res := b4check.Check(context.Background(), c.cfg, c.msg, c.tracking)
		if time.Since(start) > 3*time.Second {
			t.Errorf("%s: took %s", c.name, time.Since(start))
		}
		r := one(t, res)
		if r.Status != "warn" || !strings.Contains(r.Summary, c.summary) {
			t.Errorf("%s: got %s %q, want warn with %q", c.name, r.Status, r.Summary, c.summary)
		}
		if _, err := json.Marshal(res); err != nil {
			t.Errorf("%s: %v", c.name, err)
		}
	}
}

// TestQueues: a series the service does not know is queued with the
// configured pipeline on the configured tree, the base from b4's
// tracking file; a second check finds that evaluation instead of
// queueing another.
func TestQueues(t *testing.T) {
	testenv.SkipIfSlow(t, "public-inbox and the kernel tree")
	repo := testenv.LinuxTree(t)
	inbox := testinbox.Start(t, testenv.BackportMbox())
	s, base := serve(t, service.Config{AllowTrees: []string{repo}, Lore: inbox.URL})
	tracking := filepath.Join(t.TempDir(), "tracking.json")
	os.WriteFile(tracking, []byte(`{"series": {"base-commit": "`+testenv.BaseCommit+`", "link": "https://lore.kernel.org/r/x@y", "revision": 1}}`), 0o600)
	msgid := "20261102093000.4121-0-tester@example.org"
	cfg := b4check.Config{Server: base, Pipeline: "ppc-preempt-dynamic", Tree: repo, Timeout: 30 * time.Second}
	// b4's base reaches the service: one the tree lacks is refused there.
	badBase := filepath.Join(t.TempDir(), "tracking.json")
	os.WriteFile(badBase, []byte(`{"series": {"base-commit": "0badc0de0badc0de0badc0de0badc0de0badc0d"}}`), 0o600)
	r := one(t, b4check.Check(context.Background(), cfg, cover(msgid), badBase))
	if r.Status != "warn" || !strings.Contains(r.Summary, "0badc0de") {
		t.Errorf("a base the tree lacks: got %s %q", r.Status, r.Summary)
	}
	r = one(t, b4check.Check(context.Background(), cfg, cover(msgid), tracking))
	if r.Status != "warn" || !strings.Contains(r.Summary, "queued just now (evaluation 1, ppc-preempt-dynamic)") {
		t.Fatalf("got %s %q", r.Status, r.Summary)
	}
	e, err := s.Store().Evaluation(1)
	if err != nil {
		t.Fatal(err)
	}
	want, err := exec.Command("git", "--git-dir="+repo, "rev-parse", testenv.BaseCommit+"^{commit}").Output()
	if err != nil {
		t.Fatal(err)
	}
	if e.SeriesMsgID != msgid || e.Pipeline != "ppc-preempt-dynamic" || e.Base != strings.TrimSpace(string(want)) {
		t.Errorf("stored evaluation %+v", e.EvaluationMeta)
	}
	r = one(t, b4check.Check(context.Background(), cfg, cover(msgid), tracking))
	if r.Status != "warn" || !strings.Contains(r.Summary, "(evaluation 1, ppc-preempt-dynamic)") || strings.Contains(r.Summary, "just now") {
		t.Errorf("second check: %s %q", r.Status, r.Summary)
	}
}
