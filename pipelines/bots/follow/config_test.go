package follow

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/patcheval/patcheval/internal/testenv"
	"github.com/patcheval/patcheval/mbox"
	"github.com/patcheval/patcheval/pipelines"
	"github.com/patcheval/patcheval/pipelines/runner"
	"github.com/patcheval/patcheval/series"
	"github.com/patcheval/patcheval/series/recipients"
)

func TestLoadConfig(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "config.toml")
	os.WriteFile(file, []byte(`
[[list]]
url = "https://lore.kernel.org/linuxppc-dev/"
paths = ["arch/powerpc/**"]
subject = "powerpc"
allow = ["*@linux.ibm.com"]
pipeline = "ppc-preempt-dynamic"
tree = "/srv/linux.git"
since = "2026-11-01"
quiet = "5m"

[[watch]]
remote = "elsewhere"
`), 0o644)
	ls, err := LoadConfig(file, nil)
	if err != nil {
		t.Fatal(err)
	}
	l := ls[0]
	if len(ls) != 1 || l.Name != "linuxppc-dev" || l.URL != "https://lore.kernel.org/linuxppc-dev" || l.Base != "tree" ||
		l.Quiet != 5*time.Minute || l.IncompleteAfter != 6*time.Hour || l.Poll != 5*time.Minute || l.RFC ||
		!l.Since.Equal(time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)) || !l.Subject.MatchString("powerpc/time: x") {
		t.Errorf("list: %+v", l)
	}
	if ls, err := LoadConfig(filepath.Join(dir, "missing.toml"), nil); err != nil || ls != nil {
		t.Errorf("a missing file: %v, %v", ls, err)
	}
	os.WriteFile(file, []byte(`
[[list]]
url = "lore.kernel.org/x"
pipeline = "p"

[[list]]
url = "https://lore.kernel.org/a"
pipeline = "p"
subject = "("
base = "latest"
quiet = "soon"
colour = "blue"
`), 0o644)
	_, err = LoadConfig(file, nil)
	for _, want := range []string{"[[list]] #1: url \"lore.kernel.org/x\"", "[[list]] has no key \"colour\"", "[[list]] #2: base \"latest\""} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("error %v, want it to name %q", err, want)
		}
	}
}

// The reply addressing keys: address, report, recipients, reviewers.
func TestLoadConfigRecipients(t *testing.T) {
	file := filepath.Join(t.TempDir(), "config.toml")
	os.WriteFile(file, []byte(`
[[list]]
url = "https://lore.kernel.org/linuxppc-dev"
pipeline = "p"
report = "all"
recipients = [{ match = "*@example.com", report = "off" }, { match = "mpe@*" }]
reviewers = true
per_patch = true

[[list]]
url = "https://lore.kernel.org/other"
pipeline = "p"
address = "other@vger.kernel.org"
`), 0o644)
	ls, err := LoadConfig(file, nil)
	if err != nil {
		t.Fatal(err)
	}
	msg := &mbox.Message{To: []mbox.Address{{Email: "linuxppc-dev@lists.ozlabs.org"}}, Cc: []mbox.Address{{Email: "x@example.org"}}}
	p := ls[0].Policy(msg)
	if p.List != "linuxppc-dev@lists.ozlabs.org" || p.Default != recipients.Every || !p.Reviewers ||
		p.ModeOf("a@EXAMPLE.com") != recipients.Off || p.ModeOf("mpe@ellerman.id.au") != recipients.Regressions ||
		p.ModeOf("x@example.org") != recipients.Every {
		t.Errorf("policy %+v", p)
	}
	if !ls[0].PerPatch || ls[1].PerPatch {
		t.Errorf("per_patch: %v %v, want true false", ls[0].PerPatch, ls[1].PerPatch)
	}
	if p := ls[1].Policy(msg); p.List != "other@vger.kernel.org" || p.Default != recipients.Regressions {
		t.Errorf("policy %+v", p)
	}
	os.WriteFile(file, []byte(`
[[list]]
url = "https://lore.kernel.org/a"
pipeline = "p"
report = "often"

[[list]]
url = "https://lore.kernel.org/b"
pipeline = "p"
recipients = [{ match = "x@y", report = "never" }]
`), 0o644)
	_, err = LoadConfig(file, nil)
	for _, want := range []string{`[[list]] #1: report "often": want "regressions", "all" or "off"`, `[[list]] #2: recipients rule #1 (x@y): report "never"`} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("error %v, want it to name %q", err, want)
		}
	}
}

// The git remote settings of #patcheval test: defaults when unset, and
// a scheme that is not fetched on a mail's word, a bad network or host
// named; the trust policy: "arc" needs the list's authserv-id.
func TestConfigGitRemotes(t *testing.T) {
	file := filepath.Join(t.TempDir(), "config.toml")
	os.WriteFile(file, []byte(`
[[list]]
url = "https://lore.kernel.org/a"
pipeline = "p"

[[list]]
url = "https://lore.kernel.org/b"
pipeline = "p"
git_hosts = ["git.internal.example", "*.example.org"]
git_schemes = ["https"]
git_networks = ["10.1.0.0/16", "fd00::1"]
`), 0o644)
	ls, err := LoadConfig(file, nil)
	if err != nil {
		t.Fatal(err)
	}
	if trustOf(ls[0]) != TrustDKIM {
		t.Errorf("default trust %q, want dkim", trustOf(ls[0]))
	}
	if p := ls[0].GitPolicy(); !reflect.DeepEqual(p.Hosts, DefaultGitHosts) || !reflect.DeepEqual(p.Schemes, DefaultGitSchemes) || p.Networks != nil {
		t.Errorf("default git policy %+v", p)
	}
	p := ls[1].GitPolicy()
	if fmt.Sprint(p.Hosts, p.Schemes, p.Networks) != "[git.internal.example *.example.org] [https] [10.1.0.0/16 fd00::1/128]" {
		t.Errorf("git policy %v %v %v", p.Hosts, p.Schemes, p.Networks)
	}
	os.WriteFile(file, []byte(`
[[list]]
url = "https://lore.kernel.org/a"
pipeline = "p"
git_schemes = ["https", "ssh"]

[[list]]
url = "https://lore.kernel.org/b"
pipeline = "p"
git_networks = ["10.0.0.0/40"]

[[list]]
url = "https://lore.kernel.org/c"
pipeline = "p"
git_hosts = ["https://github.com"]

[[list]]
url = "https://lore.kernel.org/d"
pipeline = "p"
trust = "arc"

[[list]]
url = "https://lore.kernel.org/e"
pipeline = "p"
trust = "maybe"
`), 0o644)
	_, err = LoadConfig(file, nil)
	for _, want := range []string{`#1: git_schemes "ssh": want some of https, http, git`, `#2: git_networks: "10.0.0.0/40" is not a network`,
		`#3: git_hosts "https://github.com": want host names`, `#4: trust "arc": arc_authserv_id missing`,
		`#5: trust "maybe": want "dkim" (default), "arc" or "any"`} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("error %v, want it to name %q", err, want)
		}
	}
}

// capture is a Service that records what it was asked to evaluate.
type capture struct{ o []runner.Options }

func (c *capture) Submit(ctx context.Context, p *pipelines.Pipeline, o runner.Options) (int64, bool, error) {
	c.o = append(c.o, o)
	return int64(len(c.o)), true, nil
}

func (c *capture) Cancel(ctx context.Context, id int64) error { return nil }

// A list's per_patch reaches the evaluation's options for a series of
// more than one patch only (one patch has nothing to take apart).
func TestSubmitPerPatch(t *testing.T) {
	data, err := os.ReadFile(testenv.BackportMbox())
	if err != nil {
		t.Fatal(err)
	}
	msgs, err := mbox.ParseBytes(data, "backport")
	if err != nil {
		t.Fatal(err)
	}
	th := mbox.NewThread(msgs, "backport")
	one, err := series.Resolve(th, series.Options{})
	if err != nil {
		t.Fatal(err)
	}
	two := *one
	two.Patches = append(append([]*series.Patch{}, one.Patches...), one.Patches...)
	p, err := pipelines.Builtin("selinux-tax")
	if err != nil {
		t.Fatal(err)
	}
	c := &capture{}
	ss := ServiceSubmitter{Service: c, Find: func(string) (*pipelines.Pipeline, error) { return p, nil }}
	l := List{Name: "l", URL: "https://lore.example/l", Pipeline: "selinux-tax", PerPatch: true}
	for _, s := range []*series.Series{one, &two} {
		if _, err := ss.Submit(context.Background(), l, s, th); err != nil {
			t.Fatal(err)
		}
	}
	l.PerPatch = false
	if _, err := ss.Submit(context.Background(), l, &two, th); err != nil {
		t.Fatal(err)
	}
	if got := []bool{c.o[0].PerPatch, c.o[1].PerPatch, c.o[2].PerPatch}; got[0] || !got[1] || got[2] {
		t.Errorf("PerPatch of a 1-patch series, a 2-patch one, and without per_patch: %v, want false true false", got)
	}
}
