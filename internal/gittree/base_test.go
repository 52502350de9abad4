package gittree_test

import (
	"strings"
	"testing"

	"github.com/patcheval/patcheval/internal/fail"
	"github.com/patcheval/patcheval/internal/gittree"
	"github.com/patcheval/patcheval/internal/gittree/gittest"
)

// TestChooseBaseRule: the one base rule, in order: --base; the series'
// base-commit when the tree has it; the pipeline's [tree] base; the
// tree's HEAD. Each answer names its rule; a --base or a pipeline base the
// tree lacks is bad input naming it (no fallback to something else).
func TestChooseBaseRule(t *testing.T) {
	dir := gittest.NewRepo(t, map[string]string{"a": "1\n"})
	old := strings.TrimSpace(gittest.Run(t, dir, "rev-parse", "HEAD"))
	gittest.WriteFiles(t, dir, map[string]string{"a": "2\n"})
	gittest.Run(t, dir, "commit", "-q", "-am", "second")
	gittest.Run(t, dir, "tag", "v7.2.13")
	head := strings.TrimSpace(gittest.Run(t, dir, "rev-parse", "HEAD"))
	missing := "0123456789abcdef0123456789abcdef01234567"
	for _, c := range []struct {
		name   string
		choice gittree.BaseChoice
		hash   string
		rule   string
		why    string
	}{
		{"flag wins", gittree.BaseChoice{Flag: "base", Series: head, Pipeline: "v7.2.13"}, old, gittree.RuleFlag, "--base base"},
		{"series in the tree", gittree.BaseChoice{Series: old, Pipeline: "v7.2.13"}, old, gittree.RuleSeries, "base-commit " + old[:12] + " given in the series"},
		{"series missing: pipeline", gittree.BaseChoice{Series: missing, Pipeline: "base"}, old, gittree.RulePipeline,
			"the series' base-commit 0123456789ab is not in the tree: using the pipeline's [tree] base base"},
		{"pipeline", gittree.BaseChoice{Pipeline: "base"}, old, gittree.RulePipeline, "the pipeline's [tree] base base"},
		{"HEAD", gittree.BaseChoice{Series: missing}, head, gittree.RuleHead, "the series' base-commit 0123456789ab is not in the tree: using HEAD (master)"},
		{"nothing: HEAD", gittree.BaseChoice{}, head, gittree.RuleHead, "no --base and no base-commit in the series: using HEAD (master)"},
	} {
		b, err := gittree.ChooseBaseAt(dir, c.choice)
		if err != nil || b.Hash != c.hash || b.Rule != c.rule || b.Why != c.why {
			t.Errorf("%s: %s by %q (%q), %v; want %s by %q (%q)", c.name, b.Hash, b.Rule, b.Why, err, c.hash[:12], c.rule, c.why)
		}
	}
	for _, c := range []struct {
		choice gittree.BaseChoice
		want   string
	}{
		{gittree.BaseChoice{Flag: "v6.1-debian", Series: old}, `--base "v6.1-debian": not found in the tree`},
		{gittree.BaseChoice{Pipeline: "v6.1-debian"}, `the pipeline's [tree] base "v6.1-debian" is not in the tree`},
	} {
		_, err := gittree.ChooseBaseAt(dir, c.choice)
		if fail.KindOf(err) != fail.KindInput || !strings.Contains(err.Error(), c.want) || strings.Contains(err.Error(), "\n") {
			t.Errorf("%+v: %v, want one line of bad input %q", c.choice, err, c.want)
		}
	}
}
