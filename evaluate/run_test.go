package evaluate

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/patcheval/patcheval/evaluate/guest"
	"github.com/patcheval/patcheval/internal/fail"
)

func TestClassify(t *testing.T) {
	info := guest.Record{Type: "info", Info: &guest.Info{Release: "6.1.0"}}.Line()
	res := guest.Record{Type: "result", Result: &guest.Result{Benchmark: "kill", NsPerOp: 1}}.Line()
	done := guest.Record{Type: "done", OK: true}.Line()
	bad := guest.Record{Type: "error", Error: "benchmark kill: EPERM"}.Line() + guest.Record{Type: "done"}.Line()
	for _, c := range []struct {
		name, console string
		exit          error
		timedOut      bool
		phase         string
		kind          fail.Kind
	}{
		{"ok", "Linux version 6.1\n" + info + res + done, nil, false, "", 0},
		{"panic", "Linux version 6.1\nVFS: Unable to mount root fs\nKernel panic - not syncing: VFS\n", errors.New("exit 0"), false, PhaseKernelPanic, fail.KindFailed},
		{"init died", "Linux version 6.1\n" + info + "panic: boom\nKernel panic - not syncing: Attempted to kill init!\n", nil, false, PhaseAgentFailure, fail.KindInfra},
		{"agent error", "Linux version 6.1\n" + info + bad, nil, false, PhaseAgentFailure, fail.KindInfra},
		{"hang", "Linux version 6.1\n" + info + res, nil, true, PhaseKernelHang, fail.KindFailed},
		{"no output", "", nil, true, PhaseNoBoot, fail.KindInfra},
		{"qemu failed", "", errors.New("exit status 1: qemu: could not load kernel"), false, PhaseInfra, fail.KindInfra},
		{"stopped", "Linux version 6.1\n", nil, false, PhaseKernelHang, fail.KindFailed},
	} {
		out, _ := guest.ParseBytes([]byte(c.console))
		err := Classify("v", []byte(c.console), out, c.exit, c.timedOut)
		if c.phase == "" {
			if err != nil {
				t.Errorf("%s: %v", c.name, err)
			}
			continue
		}
		var be *BootError
		if !errors.As(err, &be) || be.Phase != c.phase || fail.KindOf(err) != c.kind {
			t.Errorf("%s: got %v, want phase %s kind %v", c.name, err, c.phase, c.kind)
			continue
		}
		if c.console != "" && !strings.Contains(err.Error(), "console tail") {
			t.Errorf("%s: no console tail in %q", c.name, err)
		}
	}
}

func TestSamples(t *testing.T) {
	res := &BootResult{Started: time.Unix(100, 0), Duration: time.Second, Env: Environment{Deterministic: true},
		Output: &guest.Output{Results: []guest.Result{
			{Benchmark: "kill", Iteration: 1, Iterations: 10, DurationNS: 1000, NsPerOp: 100, OpsPerSec: 1e7},
			{Benchmark: "rcu", Iterations: 4, NsPerOp: 5, OpsPerSec: 2e8, Runs: []guest.RunStat{{Calls: 2, MeanNS: 5, MinNS: 4, MaxNS: 6}, {Calls: 2, MeanNS: 5, MinNS: 5, MaxNS: 5}}},
			{Benchmark: "bridge", Skipped: "no bridge support"},
		}}}
	s, skipped := Samples("full", 3, res)
	if len(s) != 6 || len(skipped) != 1 || !strings.Contains(skipped[0], "bridge") {
		t.Fatalf("samples %+v skipped %v", s, skipped)
	}
	if s[0].Metric != "ns/op" || s[0].Value != 100 || s[0].HigherIsBetter || s[0].Boot != 3 || s[0].Iteration != 1 || !s[0].Deterministic || s[0].Variant != "full" {
		t.Errorf("ns/op sample %+v", s[0])
	}
	if s[1].Metric != "ops/s" || !s[1].HigherIsBetter {
		t.Errorf("ops/s sample %+v", s[1])
	}
	if s[4].Metric != "mean_ns" || s[4].Extra["min_ns"] != 4 || s[5].Extra["run"] != 1 {
		t.Errorf("rcu run samples %+v %+v", s[4], s[5])
	}
	// The bridge loop's system time per loop, as time(1)'s sys.
	res.Output.Results = []guest.Result{{Benchmark: "bridge", Iterations: 100, DurationNS: 2e9, NsPerOp: 2e7, OpsPerSec: 50,
		Counters: map[string]float64{guest.CounterSysNS: 4e8, guest.CounterUserNS: 1e7}}}
	s, _ = Samples("base", 0, res)
	if len(s) != 3 || s[2].Metric != "sys ns/op" || s[2].Value != 4e6 || s[2].HigherIsBetter || s[2].Extra["user_ns"] != 1e7 {
		t.Errorf("bridge samples %+v", s)
	}
}
