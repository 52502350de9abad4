package recipients

import (
	"os"
	"strings"
	"testing"

	"github.com/patcheval/patcheval/internal/testenv"
	"github.com/patcheval/patcheval/mbox"
	"github.com/patcheval/patcheval/series"
	"github.com/patcheval/patcheval/series/maintainers"
)

func emails(l []mbox.Address) string {
	var out []string
	for _, a := range l {
		out = append(out, a.Email)
	}
	return strings.Join(out, ",")
}

func TestResolveSettings(t *testing.T) {
	author := mbox.Address{Name: "A Author", Email: "author@example.org"}
	maint := []maintainers.Recipient{
		{Name: "M One", Email: "m1@example.org", Kind: maintainers.Maintainer, Role: "maintainer:FOO"},
		{Name: "R One", Email: "r1@example.org", Kind: maintainers.Reviewer, Role: "reviewer:FOO"},
		{Name: "M Two", Email: "M2@Example.org", Kind: maintainers.Maintainer, Role: "supporter:BAR"},
		{Email: "foo-list@example.org", Kind: maintainers.List, Role: "open list:FOO"},
		{Name: "A Author", Email: "author@example.org", Kind: maintainers.Maintainer, Role: "maintainer:BAR"},
	}
	for _, c := range []struct {
		name      string
		p         Policy
		regressed bool
		to, cc    string
		left      int
	}{
		{"regression: author, list, M: entries only", Policy{List: "list@example.org"}, true,
			"author@example.org", "list@example.org,m1@example.org,M2@Example.org", 0},
		{"no regression: nobody by default", Policy{List: "list@example.org"}, false, "", "", 4},
		{"no regression: the list asked for everything", Policy{List: "list@example.org",
			Rules: []Rule{{Match: "LIST@example.org", Mode: Every}}}, false, "list@example.org", "", 3},
		{"default all, one opted out by glob", Policy{List: "list@example.org", Default: Every,
			Rules: []Rule{{Match: "m2@*", Mode: Off}}}, false, "author@example.org", "list@example.org,m1@example.org", 1},
		{"the author opted out: the list becomes To", Policy{List: "list@example.org",
			Rules: []Rule{{Match: "author@example.org", Mode: Off}}}, true, "list@example.org", "m1@example.org,M2@Example.org", 1},
		{"reviewers", Policy{Reviewers: true}, true, "author@example.org", "m1@example.org,r1@example.org,M2@Example.org", 0},
	} {
		a := Resolve(c.p, author, maint, c.regressed)
		if emails(a.To) != c.to || emails(a.Cc) != c.cc || len(a.Left) != c.left {
			t.Errorf("%s: To %q Cc %q left %q; want To %q Cc %q and %d left", c.name, emails(a.To), emails(a.Cc), a.Left, c.to, c.cc, c.left)
		}
	}
	a := Resolve(Policy{List: "list@example.org"}, author, maint, true)
	if a.Why["m2@example.org"] != "supporter:BAR" || a.Why["author@example.org"] != "author" {
		t.Errorf("why = %v", a.Why)
	}
}

func TestPolicyValidate(t *testing.T) {
	for _, c := range []struct {
		p    Policy
		want string
	}{
		{Policy{Default: "sometimes"}, `default report "sometimes": want`},
		{Policy{Rules: []Rule{{Match: "[", Mode: Every}}}, `rule #1: match "["`},
		{Policy{Rules: []Rule{{Match: "a@b", Mode: "loud"}}}, `rule #1 (a@b): report "loud"`},
		{Policy{List: "linuxppc-dev"}, `list address "linuxppc-dev" is not an e-mail address`},
	} {
		if err := c.p.Validate(); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: %v, want %q", c.p, err, c.want)
		}
	}
	if err := (Policy{List: "l@x", Default: Every, Rules: []Rule{{Match: "*@x", Mode: Off}}}).Validate(); err != nil {
		t.Error(err)
	}
}

// TestForSeriesBackport addresses the v6.1 backport (arch/powerpc) from
// the 6.1 tree's MAINTAINERS: the powerpc maintainer, not a bystander
// the thread Cc'd.
func TestForSeriesBackport(t *testing.T) {
	tree := testenv.LinuxTree(t)
	data, err := os.ReadFile(testenv.BackportMbox())
	if err != nil {
		t.Fatal(err)
	}
	data = []byte(strings.ReplaceAll(string(data), "\nCc: Shrikanth Hegde <sshegde@linux.ibm.com>\n",
		"\nCc: Shrikanth Hegde <sshegde@linux.ibm.com>, Bystander <bystander@example.com>\n"))
	msgs, err := mbox.ParseBytes(data, "backport")
	if err != nil {
		t.Fatal(err)
	}
	s, err := series.Resolve(mbox.NewThread(msgs, "backport"), series.Options{})
	if err != nil {
		t.Fatal(err)
	}
	var patches [][]byte
	for _, p := range s.Patches {
		patches = append(patches, p.Msg.Raw)
	}
	maint, err := ForSeries(tree, testenv.BaseCommit, patches)
	if err != nil {
		t.Fatal(err)
	}
	list := ListAddress("linuxppc-dev", s.First())
	if list != "linuxppc-dev@lists.ozlabs.org" {
		t.Errorf("ListAddress = %q", list)
	}
	a := Resolve(Policy{List: list}, s.Author, maint, true)
	if got, want := emails(a.To)+" | "+emails(a.Cc), s.Author.Email+" | linuxppc-dev@lists.ozlabs.org,mpe@ellerman.id.au"; got != want {
		t.Errorf("addressing %q, want %q (maintainers: %v)", got, want, maint)
	}
	if a.Why["mpe@ellerman.id.au"] != "supporter:LINUX FOR POWERPC (32-BIT AND 64-BIT)" {
		t.Errorf("why = %v", a.Why)
	}
	if _, err := ForSeries(tree, "no-such-rev", patches); err == nil || !strings.Contains(err.Error(), "no-such-rev") {
		t.Errorf("a bad base: %v", err)
	}
}
