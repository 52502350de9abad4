package runner

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"strings"

	"github.com/patcheval/patcheval/internal/fail"
	"github.com/patcheval/patcheval/internal/gittree"
	"github.com/patcheval/patcheval/pipelines"
	"github.com/patcheval/patcheval/series"
	"github.com/patcheval/patcheval/series/apply"
)

// VariantTree is the tree a variant's kernel builds when it is not the
// evaluation's base (or base + series): another ref of the same tree (a
// release A/B) and/or changes reverted on top (the revert experiment).
// Submit resolves and writes it, so a ref the tree lacks or a revert that
// conflicts is refused before anything is recorded.
type VariantTree struct {
	// Ref is the variant's ref as asked ("" for the base), Onto the
	// commit the reverts were made on (the ref's or the base's).
	Ref  string `json:"ref,omitempty"`
	Onto string `json:"onto"`
	// Reverted are the revert commits, in order; Branch points at the
	// last.
	Reverted []apply.Reverted `json:"reverted,omitempty"`
	Branch   string           `json:"branch,omitempty"`
	// Head is the commit the kernel builds.
	Head string `json:"head"`
}

// Describe is the tree for people: "v7.2.13 (0123456789ab) with 1
// change reverted: 1/1 rcu: ...".
func (t VariantTree) Describe(base string) string {
	s := base
	if t.Ref != "" {
		s = t.Ref
	}
	s += " (" + short(t.Onto) + ")"
	if len(t.Reverted) > 0 {
		var labels []string
		for _, r := range t.Reverted {
			labels = append(labels, r.Label)
		}
		s += fmt.Sprintf(" with %d change(s) reverted (%s, branch %s): %s", len(t.Reverted), short(t.Head), t.Branch, strings.Join(labels, "; "))
	}
	return s
}

// variantTrees resolves the ref and reverts of every variant that owns a
// kernel with a tree of its own (keyed by variant name) in the tree at
// in.Tree, whose base is in.BaseHash; s is the evaluated series (for
// msgid: reverts).
func variantTrees(ctx context.Context, p *pipelines.Pipeline, in inputs, s *series.Series) (map[string]VariantTree, error) {
	// Everything is resolved before anything is written: a ref the tree
	// lacks or an unknown revert leaves the tree as it was.
	type job struct {
		name, ontoName string
		undo           []apply.Undo
	}
	var jobs []job
	out := map[string]VariantTree{}
	for _, v := range p.Variants {
		if v.Kernel != v.Name || !v.OwnTree() {
			continue
		}
		t := VariantTree{Ref: v.Ref, Onto: in.BaseHash}
		j := job{name: v.Name, ontoName: in.baseName()}
		if v.Ref != "" {
			c, err := gittree.Resolve(in.Tree, v.Ref)
			if err != nil {
				return nil, fail.Inputf("variant %q: ref %q is not in the tree %s (import the release: patcheval tree import)", v.Name, v.Ref, in.Tree)
			}
			t.Onto, j.ontoName = c.Hash.String(), v.Ref
		}
		t.Head = t.Onto
		if len(v.Revert) > 0 {
			var err error
			if j.undo, err = revertList(in, v, s); err != nil {
				return nil, err
			}
			jobs = append(jobs, j)
		}
		out[v.Name] = t
	}
	// The reverts keep their objects in memory until they apply; the
	// branches are written once every one did.
	for _, j := range jobs {
		t := out[j.name]
		res, err := apply.Revert(ctx, in.Tree, t.Onto, j.undo, apply.RevertOptions{OntoName: j.ontoName})
		if err != nil {
			return nil, fmt.Errorf("variant %q: %w", j.name, err)
		}
		t.Reverted, t.Head = res.Commits, res.Head
		out[j.name] = t
	}
	for _, j := range jobs {
		t := out[j.name]
		t.Branch = in.Branch + "-revert-" + j.name
		if err := apply.WriteBranch(in.Tree, t.Branch, t.Head); err != nil {
			return nil, fmt.Errorf("variant %q: %w", j.name, err)
		}
		out[j.name] = t
	}
	if len(out) == 0 {
		return nil, nil
	}
	return out, nil
}

// revertList resolves v's revert entries: msgid:<id> is the evaluated
// series (its patches, last first), the rest commits and ranges of the
// tree.
func revertList(in inputs, v pipelines.Variant, s *series.Series) ([]apply.Undo, error) {
	var out []apply.Undo
	for _, r := range v.Revert {
		id, isMsg := strings.CutPrefix(r, pipelines.MsgIDPrefix)
		if !isMsg {
			undo, err := apply.ResolveRevert(in.Tree, []string{r})
			if err != nil {
				return nil, fmt.Errorf("variant %q: %w", v.Name, err)
			}
			out = append(out, undo...)
			continue
		}
		if s == nil || !seriesHas(s, id) {
			return nil, fail.Inputf("variant %q: revert %q: not the evaluated series; give its thread (patcheval lore %s --pipeline ...) or name its commits", v.Name, r, id)
		}
		commits := apply.FromSeries(s, in.AM)
		for i := len(commits) - 1; i >= 0; i-- {
			c := commits[i]
			_, title, _ := strings.Cut(c.Label, " ")
			out = append(out, apply.Undo{Label: c.Label, Subject: title, Diff: c.Diff, MessageID: c.MessageID})
		}
	}
	return out, nil
}

// seriesHas reports whether id is one of s's messages (cover or patch).
func seriesHas(s *series.Series, id string) bool {
	if s.CoverMessageID == id {
		return true
	}
	for _, p := range s.Patches {
		if p != nil && p.MessageID == id {
			return true
		}
	}
	return false
}

// treeKeyParts are the variant trees' part of the evaluation key.
func treeKeyParts(trees map[string]VariantTree) []string {
	var names []string
	for n := range trees {
		names = append(names, n)
	}
	sort.Strings(names)
	var out []string
	for _, n := range names {
		out = append(out, "tree "+n+"="+trees[n].Head)
	}
	return out
}

// merged checks whether in's base already has the whole series s. When
// it does not, p is returned as it is. When it does, without
// --revert-if-merged that is bad input before anything is recorded (the
// AlreadyError offers the flag); with it the pipeline becomes the base
// with the series reverted against the base as it is, and in says so
// (Merged, a note).
func merged(ctx context.Context, p *pipelines.Pipeline, in *inputs, s *series.Series) (*pipelines.Pipeline, error) {
	ae, err := apply.InBase(ctx, in.Tree, in.BaseHash, apply.FromSeries(s, in.AM))
	if err != nil || ae == nil {
		if err == nil && in.RevertIfMerged {
			in.Notes = append(in.Notes, fmt.Sprintf("--revert-if-merged: the series is not (wholly) in %s; evaluated as a patch on it", in.baseName()))
		}
		return p, err
	}
	ae.Base = in.baseName()
	if !in.RevertIfMerged {
		return p, ae
	}
	first := s.First()
	if first == nil || first.MessageID == "" {
		return p, fail.Inputf("--revert-if-merged: the series' first message has no Message-ID to name it by")
	}
	np, reverted, asIs, err := p.SeriesReverted(first.MessageID)
	if err != nil {
		return p, fail.Inputf("--revert-if-merged: %v", err)
	}
	if in.Pipeline, err = json.Marshal(np); err != nil {
		return p, fail.Inputf("pipeline %s: %v", p.Name, err)
	}
	base := in.baseName()
	in.Merged = fmt.Sprintf("The series is already in %s (%s), so patcheval measured %s with the series reverted (%s) against %s as it is (%s): --revert-if-merged.",
		base, strings.Join(ae.Lines(), "; "), base, strings.Join(reverted, ", "), base, strings.Join(asIs, ", "))
	in.Notes = append(in.Notes, in.Merged)
	return np, nil
}
