package pipelines

import (
	"reflect"
	"strings"
	"testing"

	"github.com/patcheval/patcheval/internal/fail"
)

const treesPipeline = `name = "rel"
[build]
arch = "ppc64le"
fragments = ["ppc64le-pseries"]

[[variant]]
name = "v6.12"
ref = "v6.12.117"

[[variant]]
name = "v7.2"
ref = "v7.2.13"

[[variant]]
name = "v7.2-reverted"
ref = "v7.2.13"
revert = ["0123456789ab", "v7.2.12..v7.2.13", "msgid:<20250101.rcu@example.org>"]

[[variant]]
name = "v7.2-reverted@full"
kernel = "v7.2-reverted"
cmdline = "preempt=full"

[[benchmark]]
name = "kill"
`

func TestRefAndRevertVariants(t *testing.T) {
	p, err := Parse([]byte(treesPipeline), "rel.toml")
	if err != nil {
		t.Fatal(err)
	}
	r := p.Variant("v7.2-reverted")
	if r.Ref != "v7.2.13" || !reflect.DeepEqual(r.Revert, []string{"0123456789ab", "v7.2.12..v7.2.13", "msgid:20250101.rcu@example.org"}) {
		t.Fatalf("variant %+v", r)
	}
	if r.ApplySeries || p.Variant("v6.12").ApplySeries {
		t.Error("a variant with ref or revert applies no series")
	}
	if rt := p.Variant("v7.2-reverted@full"); rt.Ref != "v7.2.13" || len(rt.Revert) != 3 {
		t.Errorf("the runtime variant boots its kernel's tree: %+v", rt)
	}
	// Each tree is its own kernel: v7.2 and v7.2-reverted do not share a
	// build although their symbols are the same.
	builds := p.Builds()
	if len(builds) != 3 {
		t.Fatalf("%d builds, want 3: %+v", len(builds), builds)
	}
	if builds[2].Ref != "v7.2.13" || len(builds[2].Revert) != 3 || !reflect.DeepEqual(builds[2].Variants, []string{"v7.2-reverted", "v7.2-reverted@full"}) {
		t.Errorf("build %+v", builds[2])
	}
	// The trees are part of the evaluation key.
	q, _ := Parse([]byte(strings.Replace(treesPipeline, `ref = "v6.12.117"`, `ref = "v6.12.116"`, 1)), "rel.toml")
	if q.Hash() == p.Hash() {
		t.Error("another ref, same hash")
	}
}

func TestRefAndRevertBadInput(t *testing.T) {
	for name, c := range map[string]struct{ old, new, want string }{
		"ref in another repository": {`ref = "v6.12.117"`, `ref = "../stable.git:v6.12.117"`,
			`rel.toml:8: variant "v6.12": ref "../stable.git:v6.12.117" is a path, not a revision of the tree: every variant's ref must be a tag, branch or commit of the evaluation's one tree (--tree)`},
		"ref a URL":       {`ref = "v6.12.117"`, `ref = "https://git.kernel.org/stable.git"`, `is a URL, not a revision of the tree`},
		"ref repo:ref":    {`ref = "v6.12.117"`, `ref = "stable:v6.12.117"`, `names another repository (repo:ref)`},
		"empty revert":    {`"0123456789ab", `, `"", `, `revert "" is empty: want a commit of the tree, A..B or msgid:<id>`},
		"empty msgid":     {`"msgid:<20250101.rcu@example.org>"`, `"msgid:"`, `revert "msgid:": want msgid:<message-id`},
		"range to a path": {`"v7.2.12..v7.2.13"`, `"v7.2.12../tmp/x"`, `revert "v7.2.12../tmp/x" is a path`},
		"revert with the series": {`ref = "v7.2.13"
revert`, `ref = "v7.2.13"
apply_series = true
revert`, `apply_series with ref or revert: the series is applied to the evaluation's base only`},
		"runtime variant with a ref": {`cmdline = "preempt=full"`, `cmdline = "preempt=full"
ref = "v6.12.117"`, `boots "v7.2-reverted"'s kernel (kernel = ...) and cannot set ref or revert`},
		"release pair without common intent": {"name = \"v7.2\"\nref = \"v7.2.13\"", "name = \"v7.2\"\nref = \"v7.2.13\"\nsymbols = { PREEMPT_LAZY = \"y\" }",
			`rel.toml:10: comparison v6.12 -> v7.2 crosses releases (v6.12.117 vs v7.2.13) and requests different symbols (PREEMPT_LAZY=unset vs y): no common config intent`},
	} {
		t.Run(name, func(t *testing.T) {
			src := strings.Replace(treesPipeline, c.old, c.new, 1)
			if src == treesPipeline {
				t.Fatal("case does not change the pipeline")
			}
			_, err := Parse([]byte(src), "rel.toml")
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("got %v\nwant %q", err, c.want)
			}
			if fail.KindOf(err) != fail.KindInput {
				t.Errorf("kind %v, want bad input (exit 2)", fail.KindOf(err))
			}
		})
	}
}

// A chain that crosses releases with the same intent, then changes the
// config on one release, is the decomposition "config or code?".
func TestReleaseChainSameIntent(t *testing.T) {
	src := treesPipeline + `
[[variant]]
name = "v7.2-lazy"
ref = "v7.2.13"
symbols = { PREEMPT_LAZY = "y" }

[[comparison]]
base = "v6.12"
other = "v7.2"

[[chain]]
variants = ["v6.12", "v7.2", "v7.2-lazy"]
`
	if _, err := Parse([]byte(src), "rel.toml"); err != nil {
		t.Fatalf("same intent across releases, config on one: %v", err)
	}
	bad := strings.Replace(src, `variants = ["v6.12", "v7.2", "v7.2-lazy"]`, `variants = ["v6.12", "v7.2-lazy"]`, 1)
	if _, err := Parse([]byte(bad), "rel.toml"); err == nil || !strings.Contains(err.Error(), "chain step v6.12 -> v7.2-lazy crosses releases") {
		t.Fatalf("a chain step across releases and configs: %v", err)
	}
}
