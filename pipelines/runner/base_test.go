package runner

import (
	"context"
	"path/filepath"
	"strings"
	"testing"

	"github.com/patcheval/patcheval/internal/fail"
	"github.com/patcheval/patcheval/internal/gittree"
	"github.com/patcheval/patcheval/internal/gittree/gittest"
	"github.com/patcheval/patcheval/pipelines"
)

// TestShippedPipelineOnAnyTree: the README's headline (lore --pipeline
// ppc-preempt-dynamic --tree linux.git) on a tree without Debian's
// v6.1-debian tag takes the tree's HEAD by the base rule and records
// which rule chose it; a --base the tree lacks is one line of bad input.
func TestShippedPipelineOnAnyTree(t *testing.T) {
	tree := gittest.NewRepo(t, map[string]string{"Makefile": "VERSION = 7\n"})
	head := strings.TrimSpace(gittest.Run(t, tree, "rev-parse", "HEAD"))
	p, err := pipelines.Builtin("ppc-preempt-dynamic")
	if err != nil {
		t.Fatal(err)
	}
	env := Env{Store: openStore(t, filepath.Join(t.TempDir(), "db"))}
	id, _, err := Submit(context.Background(), env, p, Options{Mbox: backportMbox(t), Tree: tree})
	if err != nil {
		t.Fatalf("submit on a tree without v6.1-debian: %v", err)
	}
	st, err := Load(env.Store, id)
	if err != nil {
		t.Fatal(err)
	}
	ev, err := load(env, id)
	if err != nil {
		t.Fatal(err)
	}
	if st.BaseHash != head || st.BaseRef != "HEAD (master)" || ev.in.BaseRule != gittree.RuleHead || !strings.HasSuffix(st.BaseWhy, ": using HEAD (master)") {
		t.Errorf("base %s %q rule %q (%q), want HEAD %s by the tree's HEAD", st.BaseHash, st.BaseRef, ev.in.BaseRule, st.BaseWhy, head)
	}
	_, _, err = Submit(context.Background(), env, p, Options{Mbox: backportMbox(t), Tree: tree, Base: "v6.1-debian"})
	if fail.KindOf(err) != fail.KindInput || !strings.Contains(err.Error(), `--base "v6.1-debian": not found`) || strings.Contains(err.Error(), "\n") {
		t.Errorf("--base the tree lacks: %v, want one line of bad input", err)
	}
}
