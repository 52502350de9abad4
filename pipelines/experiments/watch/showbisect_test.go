package watch

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/patcheval/patcheval/pipelines/experiments/bisect"
	"github.com/patcheval/patcheval/pipelines/store"
)

// TestShowSaysWhereTheBisectionStands: watch show gives each event's
// bisection as one line (the culprit found, the candidates left, the
// error, or the measurements so far, and the report), not the stored
// state's JSON with every measurement in it (--json keeps that).
func TestShowSaysWhereTheBisectionStands(t *testing.T) {
	state := func(s BisectState) json.RawMessage {
		b, err := json.Marshal(s)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	culprit := &bisect.Commit{Hash: "c3000a4a166fb8cccb96af5c5fbb899a8b794472", Subject: "Linux 7.2.6 (Debian linux-source-7.2 7.2.6-1~bpo13+1)"}
	found := BisectState{Result: bisect.Result{Status: bisect.Found, Culprit: culprit, Confirmed: true, Commits: 1, Measured: 2},
		Report: "/out/bisect-v6.12.117..v7.2.6-kill-ns_op/report.txt",
		Records: []bisect.Record{{Commit: culprit.Hash, Values: []float64{515.6}}}}
	running := BisectState{Result: bisect.Result{Status: BisectRunning}, Records: []bisect.Record{{Commit: culprit.Hash}}}
	failed := BisectState{Result: bisect.Result{Status: BisectFailed}, Error: "infra: qemu: no such file\nmore"}
	ev := func(from, to string, b json.RawMessage) *store.WatchEvent {
		return &store.WatchEvent{Verdict: "regression", From: from, To: to, Variant: "release", Benchmark: "kill", Metric: "ns/op", Bisect: b}
	}
	h := &History{Watch: &store.Watch{Name: "releases"}, Events: []*store.WatchEvent{
		ev("v6.12.117", "v7.2.6", state(found)), ev("v7.2.6", "v7.2.9", state(running)), ev("v7.2.9", "v7.2.11", state(failed))}}
	var out strings.Builder
	if err := WriteText(&out, h); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		`    bisection: found c3000a4a166f "Linux 7.2.6 (Debian linux-source-7.2 7.2.6-1~bpo13+1)" (confirmed; 1 commit(s), 0 build(s), 2 measured); report /out/bisect-v6.12.117..v7.2.6-kill-ns_op/report.txt` + "\n",
		"    bisection: running, 1 measurement(s) so far\n",
		"    bisection: failed: infra: qemu: no such file\n",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("watch show lacks %q:\n%s", want, out.String())
		}
	}
	if strings.Contains(out.String(), `{"`) {
		t.Errorf("watch show prints the bisection's JSON:\n%s", out.String())
	}
}
