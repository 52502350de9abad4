package main

import (
	"bytes"
	"context"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	"github.com/patcheval/patcheval/evaluate"
	"github.com/patcheval/patcheval/internal/termsafe/ptytest"
	"github.com/patcheval/patcheval/pipelines/store"
)

func runsCLI(t *testing.T, args ...string) (string, string, int) {
	t.Helper()
	var out, errb bytes.Buffer
	code := run(context.Background(), &Env{Stdout: &out, Stderr: &errb, Stdin: strings.NewReader("")}, args)
	return out.String(), errb.String(), code
}

func TestRunsCommand(t *testing.T) {
	state := t.TempDir()
	t.Setenv("PATCHEVAL_STATE_DIR", state)
	if out, _, code := runsCLI(t, "runs"); code != 0 || !strings.Contains(out, "no evaluations") {
		t.Fatalf("empty list: %d %q", code, out)
	}
	st, err := store.Open(filepath.Join(state, store.FileName))
	if err != nil {
		t.Fatal(err)
	}
	e, _, err := st.CreateOrResumeEvaluation("k", store.EvaluationMeta{Pipeline: "ppc-preempt-dynamic",
		SeriesMsgID: "<20261102093000.4121-0-tester@example.org>", SeriesTitle: "powerpc: Enable dynamic preemption", SeriesVersion: 4,
		Tree: "/tmp/linux.git", Base: "v6.1-debian"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.RecordBuild(e.ID, store.Build{Variant: "voluntary", Arch: "ppc64le", Commit: "0123456789abcdef", ConfigHash: "cafe"}); err != nil {
		t.Fatal(err)
	}
	rid, _ := st.BeginRun(e.ID, "voluntary", 0)
	samples := []evaluate.Sample{{Benchmark: "kill", Metric: "ns/op", Value: 955}, {Benchmark: "getppid", Metric: "ns/op", Value: 448}}
	if err := st.FinishRun(rid, store.RunOK, evaluate.Environment{Target: "qemu", KernelRelease: "6.1.0", Deterministic: true},
		[]byte("Linux version 6.1.0\nPATCHEVAL-DONE\n"), samples); err != nil {
		t.Fatal(err)
	}
	st.BeginRun(e.ID, "full", 0)
	st.Close()

	out, _, code := runsCLI(t, "runs")
	if code != 0 || !strings.Contains(out, "ppc-preempt-dynamic") || !strings.Contains(out, "1/2") {
		t.Fatalf("list: %d\n%s", code, out)
	}
	out, _, code = runsCLI(t, "runs", "--json")
	var list []store.Evaluation
	if code != 0 || json.Unmarshal([]byte(out), &list) != nil || len(list) != 1 || list[0].Samples != 2 {
		t.Fatalf("list --json: %d\n%s", code, out)
	}
	out, _, code = runsCLI(t, "runs", "show", "1")
	for _, want := range []string{"voluntary", "ppc64le", "0123456789ab", "running", "kill ns/op: 1", "(deterministic)", "v6.1-debian"} {
		if code != 0 || !strings.Contains(out, want) {
			t.Fatalf("show lacks %q: %d\n%s", want, code, out)
		}
	}
	out, _, code = runsCLI(t, "runs", "show", "1", "--json")
	var shown runsShowJSON
	if code != 0 || json.Unmarshal([]byte(out), &shown) != nil || len(shown.Runs) != 2 || shown.SampleCounts["voluntary"]["getppid ns/op"] != 1 {
		t.Fatalf("show --json: %d\n%s", code, out)
	}
	out, _, code = runsCLI(t, "runs", "console", "1")
	if code != 0 || out != "Linux version 6.1.0\nPATCHEVAL-DONE\n" {
		t.Fatalf("console: %d %q", code, out)
	}
	// --db overrides the state dir.
	other := filepath.Join(t.TempDir(), "other.db")
	if out, _, code := runsCLI(t, "runs", "--db", other); code != 0 || !strings.Contains(out, other) {
		t.Fatalf("--db: %d %q", code, out)
	}
	// Bad input exits 2 and says what is wrong.
	for _, args := range [][]string{{"runs", "show", "7"}, {"runs", "show", "x"}, {"runs", "console"}, {"runs", "frob"}} {
		_, errOut, code := runsCLI(t, args...)
		if code != 2 || errOut == "" {
			t.Errorf("%q: exit %d, stderr %q", args, code, errOut)
		}
	}
}

// TestRunsEscapesControlCharacters: a series title, message id and build
// error holding ESC/OSC sequences (retitle, clear screen), CRs and C1
// controls are printed escaped by `runs` and `runs show`; `runs console`
// escapes on a terminal and stays byte-exact in a pipe.
func TestRunsEscapesControlCharacters(t *testing.T) {
	state := t.TempDir()
	t.Setenv("PATCHEVAL_STATE_DIR", state)
	st, err := store.Open(filepath.Join(state, store.FileName))
	if err != nil {
		t.Fatal(err)
	}
	title := "\x1b]0;pwned\x07\x1b[2Jpowerpc: evil\rfake"
	e, _, err := st.CreateOrResumeEvaluation("k", store.EvaluationMeta{Pipeline: "ppc-preempt-dynamic",
		SeriesMsgID: "<a\x1b[31m@b>", SeriesTitle: title, Tree: "/tmp/linux.git", Base: "v6.1"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.RecordBuild(e.ID, store.Build{Variant: "v\u009b1m", Arch: "ppc64le", Status: "failed", ErrorKind: "kernel",
		ErrorText: "make: \x1b[1;31merror\x1b[0m\r"}); err != nil {
		t.Fatal(err)
	}
	rid, _ := st.BeginRun(e.ID, "v", 0)
	console := "Linux\r\n\x1b]0;guest\x07login:\r\n"
	if err := st.FinishRun(rid, store.RunOK, evaluate.Environment{Target: "qemu"}, []byte(console), nil); err != nil {
		t.Fatal(err)
	}
	st.Close()
	for _, args := range [][]string{{"runs"}, {"runs", "show", "1"}} {
		out, _, code := runsCLI(t, args...)
		if code != 0 || strings.ContainsAny(out, "\x1b\x07\r\u009b") || !strings.Contains(out, `\x1b]0;pwned\x07`) {
			t.Errorf("%q: exit %d, raw control characters or no escapes:\n%q", args, code, out)
		}
	}
	out, _, _ := runsCLI(t, "runs", "console", "1")
	if out != console {
		t.Errorf("console into a pipe: %q, want the stored bytes %q", out, console)
	}
	term, ctl := ptytest.Open(t)
	if err := runsCommand(term, "", false, []string{"console", "1"}); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 4096)
	n, _ := ctl.Read(buf)
	if got, want := string(buf[:n]), "Linux\n\\x1b]0;guest\\x07login:\n"; got != want {
		t.Errorf("console on a terminal: %q, want %q", got, want)
	}
}
