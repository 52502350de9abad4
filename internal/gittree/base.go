package gittree

import (
	"fmt"

	"github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/object"

	"github.com/patcheval/patcheval/internal/fail"
)

// BaseChoice is everything that may choose the commit a series is
// applied on and a pipeline measures. ChooseBase applies the one rule
// every command uses (lore, apply, submit, serve, watch, bisect, the
// default pipeline): Flag when given; else Series when the tree has it;
// else Pipeline; else the tree's HEAD.
type BaseChoice struct {
	Flag     string // --base (or a caller's explicit commit: watch's tag, bisect's step)
	Series   string // the series' base-commit
	Pipeline string // the pipeline's [tree] base
}

// Which rule chose a base.
const (
	RuleFlag     = "--base"
	RuleSeries   = "the series' base-commit"
	RulePipeline = "the pipeline's [tree] base"
	RuleHead     = "the tree's HEAD"
)

// Base is a chosen base.
type Base struct {
	Commit *object.Commit `json:"-"`
	Hash   string         `json:"hash"`
	Ref    string         `json:"ref"`  // what named it: "v7.2.13", a hash, "HEAD (master)"
	Rule   string         `json:"rule"` // one of the Rule constants
	// Why is the whole sentence: "--base v7.2.13", "base-commit
	// 0123456789ab given in the series", "the series' base-commit
	// 0123456789ab is not in the tree: using HEAD (master)".
	Why string `json:"why"`
}

// ChooseBase applies the rule of BaseChoice in repo. A Flag or Pipeline
// base the tree does not have is bad input naming it; a series'
// base-commit the tree does not have is passed over (Why says so).
func ChooseBase(repo *git.Repository, c BaseChoice) (Base, error) {
	if c.Flag != "" {
		cm, err := ResolveIn(repo, c.Flag)
		if err != nil {
			return Base{}, fail.Inputf("--base %q: not found in the tree (give a tag, branch or commit the tree has)", c.Flag)
		}
		return base(cm, c.Flag, RuleFlag, "--base "+c.Flag), nil
	}
	why := "no --base and no base-commit in the series"
	if c.Series != "" {
		if cm, err := ResolveIn(repo, c.Series); err == nil {
			return base(cm, c.Series, RuleSeries, fmt.Sprintf("base-commit %s given in the series", short(c.Series))), nil
		}
		why = fmt.Sprintf("the series' base-commit %s is not in the tree", short(c.Series))
	}
	if c.Pipeline != "" {
		cm, err := ResolveIn(repo, c.Pipeline)
		if err != nil {
			return Base{}, fail.Inputf("the pipeline's [tree] base %q is not in the tree (pass --base REF, or import it: patcheval tree import)", c.Pipeline)
		}
		if c.Series != "" {
			why += ": using the pipeline's [tree] base " + c.Pipeline
		} else {
			why = "the pipeline's [tree] base " + c.Pipeline
		}
		return base(cm, c.Pipeline, RulePipeline, why), nil
	}
	head, err := repo.Reference(plumbing.HEAD, false)
	if err != nil {
		return Base{}, fail.Inputf("the tree has no HEAD: %v (pass --base)", err)
	}
	cm, err := ResolveIn(repo, "HEAD")
	if err != nil {
		return Base{}, fail.Inputf("the tree's HEAD does not resolve to a commit (pass --base): %v", err)
	}
	what := "HEAD"
	if head.Type() == plumbing.SymbolicReference {
		what = "HEAD (" + head.Target().Short() + ")"
	}
	return base(cm, what, RuleHead, why+": using "+what), nil
}

// ChooseBaseAt is ChooseBase on the repository at path.
func ChooseBaseAt(path string, c BaseChoice) (Base, error) {
	r, st, _, err := Open(path, 1)
	if err != nil {
		return Base{}, err
	}
	defer st.Close()
	b, err := ChooseBase(r, c)
	if err != nil {
		return Base{}, fail.Inputf("kernel tree %s: %w", path, err)
	}
	return b, nil
}

func base(c *object.Commit, ref, rule, why string) Base {
	return Base{Commit: c, Hash: c.Hash.String(), Ref: ref, Rule: rule, Why: why}
}

func short(s string) string {
	if len(s) > 12 {
		return s[:12]
	}
	return s
}
