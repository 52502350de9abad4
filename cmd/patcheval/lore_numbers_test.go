package main

import (
	"bytes"
	"context"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	"github.com/patcheval/patcheval/internal/testenv"
)

// lore shows the numbers the thread reports after the series, and lists
// them under "thread_numbers" with --json; a thread without numbers gives
// the same output as before.
func TestLoreThreadNumbers(t *testing.T) {
	v4 := filepath.Join(testenv.ThreadsDir(), "ppc-dynamic-preempt-v4.mbox")
	out, errs, code := loreCLI(t, "", "-m", v4)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	for _, want := range []string{
		"Numbers reported in the thread (30 in 8 table(s)",
		"  Jirka Hladky, <20260727000300.40b5a8af-2-jhladky@redhat.com> line 13 (stress-ng, POWER10): kill bogo-ops/sec",
		"    6.16 (eln150)      70,281 (-32%)\n",
		"    Permissive  70,248 (+1.6% vs enforcing)\n",
		"    voluntary -> full+PREEMPT_RCU  -30.2%\n",
		"    __rcu_read_lock     6.15 (no PREEMPT_RCU) ~0%, 6.16 (PREEMPT_RCU) 4.52%\n",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("summary lacks %q:\n%s", want, out)
		}
	}
	if i, j := strings.Index(out, "Patches:"), strings.Index(out, "Numbers reported"); i < 0 || j < i {
		t.Errorf("the numbers do not follow the series:\n%s", out)
	}

	// A table that mixes what it measures names it per row.
	out, errs, code = loreCLI(t, "", "-m", filepath.Join(testenv.ThreadsDir(), "rcu-gp-qs-v2.mbox"))
	if want := "    task-clock (synchronize_rcu ms)  Baseline 1,008, With Patch 898 (-11% vs Baseline)\n"; code != 0 || !strings.Contains(out, want) {
		t.Errorf("rcu: exit %d, lacks %q:\n%s%s", code, want, out, errs)
	}

	out, errs, code = loreCLI(t, "", "-m", v4, "--json")
	if code != 0 {
		t.Fatalf("--json: exit %d: %s", code, errs)
	}
	var doc struct {
		Title   string `json:"title"`
		Numbers []struct {
			Benchmark string   `json:"benchmark"`
			Metric    string   `json:"metric"`
			Label     string   `json:"label"`
			Value     *float64 `json:"value"`
			Change    *float64 `json:"change_pct"`
			MessageID string   `json:"message_id"`
			Author    string   `json:"author"`
			Line      int      `json:"line"`
			Platform  string   `json:"platform"`
		} `json:"thread_numbers"`
	}
	if err := json.Unmarshal([]byte(out), &doc); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	found := false
	for _, n := range doc.Numbers {
		if n.Label == "6.16 (eln150)" {
			found = n.Benchmark == "kill" && n.Metric == "bogo-ops/sec" && n.Value != nil && *n.Value == 70281 &&
				n.Change != nil && *n.Change == -32 && n.Author == "Jirka Hladky" && n.Line == 14 &&
				n.MessageID == "20260727000300.40b5a8af-2-jhladky@redhat.com" && n.Platform == "POWER10"
		}
	}
	if len(doc.Numbers) != 30 || !found || doc.Title == "" {
		t.Errorf("--json: %d numbers, 6.16 row right: %v, title %q\n%s", len(doc.Numbers), found, doc.Title, out)
	}

	// No numbers: the summary and --json are what they were.
	out, _, code = loreCLI(t, "", "-m", backport)
	if code != 0 || strings.Contains(out, "Numbers reported") {
		t.Errorf("backport: exit %d\n%s", code, out)
	}
	out, _, _ = loreCLI(t, "", "-m", backport, "--json")
	var b bytes.Buffer
	_, s, err := (&loreFlags{file: backport}).resolve(context.Background(), &Env{Stderr: &b}, nil)
	if err != nil {
		t.Fatal(err)
	}
	b.Reset()
	if err := writeLoreJSON(&b, &loreResult{Series: s}); err != nil {
		t.Fatal(err)
	}
	if out != b.String() {
		t.Errorf("--json of a thread without numbers is not the bare series:\n%s", out)
	}
}
