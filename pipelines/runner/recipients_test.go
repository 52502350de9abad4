package runner

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/patcheval/patcheval/evaluate/report"
	"github.com/patcheval/patcheval/evaluate/stats"
	"github.com/patcheval/patcheval/internal/testenv"
	"github.com/patcheval/patcheval/mbox"
	"github.com/patcheval/patcheval/series/recipients"
)

// TestReportAddressing writes the reply of an evaluation of the v6.1
// backport (a thread that also Cc'd a bystander) with and without a bot's
// recipients policy: reply-all without one; with one, the author, the
// list and the powerpc maintainer when something regressed, and no draft
// when nothing did and nobody asked for every result.
func TestReportAddressing(t *testing.T) {
	tree := testenv.LinuxTree(t)
	data := strings.ReplaceAll(string(mustRead(t, testenv.BackportMbox())), "\nCc: Shrikanth Hegde <sshegde@linux.ibm.com>\n",
		"\nCc: Shrikanth Hegde <sshegde@linux.ibm.com>, Bystander <bystander@example.com>\n")
	base, err := resolveCommit(tree, testenv.BaseCommit)
	if err != nil {
		t.Fatal(err)
	}
	regression := &report.Report{Title: "t", ID: "t-1", Benchmarks: []report.Benchmark{{Name: "kill", Metric: "ns/op",
		Comparisons: []report.Comparison{{Base: "base", Other: "patched", Comparison: stats.Comparison{Verdict: stats.Regression, Change: 9}}}}}}
	quiet := &report.Report{Title: "t", ID: "t-1"}
	policy := &recipients.Policy{List: "linuxppc-dev@lists.ozlabs.org"}
	for _, c := range []struct {
		name   string
		policy *recipients.Policy
		r      *report.Report
		to, cc string // "" to: no draft
	}{
		{"reply-all", nil, quiet, "tester@example.org", "linuxppc-dev@lists.ozlabs.org,sshegde@linux.ibm.com,bystander@example.com"},
		{"bot, regression", policy, regression, "tester@example.org", "linuxppc-dev@lists.ozlabs.org,mpe@ellerman.id.au"},
		{"bot, no regression", policy, quiet, "", ""},
		{"bot, no regression, the list takes every result", &recipients.Policy{List: "linuxppc-dev@lists.ozlabs.org",
			Rules: []recipients.Rule{{Match: "linuxppc-dev@*", Mode: recipients.Every}}}, quiet, "linuxppc-dev@lists.ozlabs.org", ""},
	} {
		in := inputs{Options: Options{Mbox: []byte(data), Tree: tree, Recipients: c.policy,
			From: mbox.Address{Name: "Bot", Email: "bot@example.net"}}, BaseHash: base}
		r, err := resolveSeries(context.Background(), in)
		if err != nil {
			t.Fatal(err)
		}
		dir := t.TempDir()
		var out Outcome
		if err := writeOutputs(c.r, &evaluation{in: in, series: r.series}, dir, &out); err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if c.to == "" {
			if out.Mail != nil || out.Addressing == nil || len(out.Addressing.Left) != 3 {
				t.Errorf("%s: want no draft and 3 left out; draft %v, addressing %+v", c.name, out.Mail, out.Addressing)
			}
			if _, err := os.Stat(filepath.Join(dir, "reply.eml")); err == nil {
				t.Errorf("%s: reply.eml written", c.name)
			}
			continue
		}
		if out.Mail == nil {
			t.Fatalf("%s: no draft (addressing %+v)", c.name, out.Addressing)
		}
		var to, cc []string
		for _, a := range out.Mail.To {
			to = append(to, a.Email)
		}
		for _, a := range out.Mail.Cc {
			cc = append(cc, a.Email)
		}
		if strings.Join(to, ",") != c.to || strings.Join(cc, ",") != c.cc {
			t.Errorf("%s: To %v Cc %v, want To %s Cc %s", c.name, to, cc, c.to, c.cc)
		}
		eml, err := os.ReadFile(out.Draft)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(out.Mail.Body, "- reproducer: `patcheval repro 0` writes the kernels'") {
			t.Errorf("%s: the draft does not name the reproducer:\n%s", c.name, out.Mail.Body)
		}
		if c.policy != nil && strings.Contains(string(eml), "bystander") {
			t.Errorf("%s: the bystander is in reply.eml", c.name)
		}
	}
}
