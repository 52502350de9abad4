package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"path/filepath"
	"strings"

	"github.com/patcheval/patcheval/internal/fail"
	"github.com/patcheval/patcheval/series"
	"github.com/patcheval/patcheval/series/apply"
)

// applyFlags are the flags that put a series onto a tree; shared by
// `patcheval apply` and `patcheval lore --tree`.
type applyFlags struct {
	tree     string
	base     string
	branch   string
	fuzz     int
	threeWay bool
}

func (f *applyFlags) add(fs *flag.FlagSet, treeDefault, treeHelp string) {
	f.tree = treeDefault
	fs.Var(absPathValue{&f.tree}, "tree", treeHelp)
	fs.StringVar(&f.base, "base", "", "apply on this tag, branch or commit (default: the series' base-commit when the tree has it, else the pipeline's [tree] base, else HEAD)")
	fs.StringVar(&f.branch, "branch", "", "branch to write (default patcheval/<slug>-v<N>)")
	fs.IntVar(&f.fuzz, "fuzz", 0, "let hunks apply with up to `N` context lines ignored at each end (reported)")
	fs.BoolVar(&f.threeWay, "3way", false, "when a patch does not apply, fall back to git am -3 (needs the git CLI)")
}

// defaultBranch is patcheval/<slug>-v<N>.
func defaultBranch(s *series.Series) string {
	slug := strings.TrimPrefix(s.Slug(), fmt.Sprintf("v%d_", s.Version))
	slug = strings.Trim(strings.ReplaceAll(slug, "_", "-"), "-.")
	if len(slug) > 80 {
		slug = strings.Trim(slug[:80], "-.")
	}
	return fmt.Sprintf("patcheval/%s-v%d", slug, s.Version)
}

// run applies s and prints the result (as JSON to jsonOut when non-nil).
func (f *applyFlags) run(ctx context.Context, s *series.Series, am series.AMOptions, out io.Writer, jsonOut io.Writer) (*apply.Result, error) {
	if len(s.Patches) == 0 {
		return nil, fail.Inputf("the series %q has no patches to apply", s.Title)
	}
	if len(s.Missing) > 0 {
		return nil, fail.Inputf("the series %q v%d is incomplete (missing patches %v): not applying it", s.Title, s.Version, s.Missing)
	}
	for i, p := range s.Patches {
		if p.Broken != "" {
			return nil, fail.Inputf("patch %d/%d %q is cut short: %s", i+1, len(s.Patches), p.Subject.Title, p.Broken)
		}
	}
	branch := f.branch
	if branch == "" {
		branch = defaultBranch(s)
	}
	res, err := apply.Apply(ctx, f.tree, apply.FromSeries(s, am), apply.Options{
		Base:       f.base,
		SeriesBase: s.Base.Commit,
		Branch:     branch,
		Fuzz:       f.fuzz,
		ThreeWay:   f.threeWay,
	})
	if err != nil {
		return nil, err
	}
	if jsonOut != nil {
		enc := json.NewEncoder(jsonOut)
		enc.SetIndent("", "  ")
		if err := enc.Encode(res); err != nil {
			return nil, fail.Infraf("writing JSON: %w", err)
		}
		return res, nil
	}
	printApplied(out, res)
	return res, nil
}

func printApplied(w io.Writer, res *apply.Result) {
	fmt.Fprintf(w, "base: %s (%s)\n", res.Base, res.BaseReason)
	for _, c := range res.Commits {
		fmt.Fprintf(w, "  %s %s\n", c.Hash[:12], c.Label)
		for _, n := range c.Notes {
			fmt.Fprintf(w, "      %s\n", n)
		}
	}
	for _, n := range res.Notes {
		fmt.Fprintf(w, "note: %s\n", n)
	}
	state := "updated"
	switch {
	case !res.BranchUpdated:
		state = "unchanged"
	case res.BranchPrevious == "":
		state = "created"
	default:
		state = "updated, was " + res.BranchPrevious[:12]
	}
	fmt.Fprintf(w, "branch: %s -> %s (%s)\n", res.Branch, res.Head[:12], state)
}

func init() {
	register(&command{
		name:    "apply",
		summary: "apply a series onto a kernel git tree as a branch (object level: worktree, index and HEAD untouched)",
		usage:   "patcheval apply [flags] <msgid | lore URL>   or   patcheval apply [flags] -m FILE|- [msgid]",
		setup: func(fs *flag.FlagSet) func(ctx context.Context, env *Env, args []string) error {
			var lf loreFlags
			lf.add(fs)
			var af applyFlags
			af.add(fs, ".", "kernel git tree (normal or bare clone)")
			asJSON := fs.Bool("json", false, "print the result as JSON")
			return func(ctx context.Context, env *Env, args []string) error {
				_, s, err := lf.resolve(ctx, env, args)
				if err != nil {
					return err
				}
				var jsonOut io.Writer
				if *asJSON {
					jsonOut = env.Stdout
				}
				_, err = af.run(ctx, s, series.AMOptions{LinkMask: lf.linkMask}, env.Stdout, jsonOut)
				return err
			}
		},
	})
}

// absPathValue is a path flag stored absolute, as given relative to the
// directory the command ran in: what is recorded (an evaluation's tree,
// a reproducer's TREE=) must not depend on where it is read later.
type absPathValue struct{ p *string }

func (v absPathValue) String() string {
	if v.p == nil {
		return ""
	}
	return *v.p
}

func (v absPathValue) Set(s string) error {
	if s == "" {
		*v.p = ""
		return nil
	}
	abs, err := filepath.Abs(s)
	if err != nil {
		return err
	}
	*v.p = abs
	return nil
}
