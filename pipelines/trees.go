package pipelines

import (
	"fmt"
	"sort"
	"strings"
)

// MsgIDPrefix marks a revert entry that names a series by its thread:
// "msgid:<id>" reverts the evaluated series' patches (the thread given
// on the command line), last patch first.
const MsgIDPrefix = "msgid:"

// variantTree reads a variant's ref and revert: the tree its kernel
// builds when that is not the evaluation's base (or base + series).
func (ps *parser) variantTree(v *Variant, rv rawVariant, path string) {
	if ref := strings.TrimSpace(rv.Ref); ref != "" || rv.Ref != "" {
		if why := notARevision(ref); why != "" {
			ps.errorf(path+".ref", "variant %q: ref %q %s: every variant's ref must be a tag, branch or commit of the evaluation's one tree (--tree); import the releases into one repository (patcheval tree import 6.12 7.2)", v.Name, rv.Ref, why)
		}
		v.Ref = ref
	}
	for _, r := range rv.Revert {
		r = strings.TrimSpace(r)
		if id, ok := strings.CutPrefix(r, MsgIDPrefix); ok {
			id = strings.Trim(strings.TrimSpace(id), "<>")
			if id == "" || strings.ContainsAny(id, " \t\n") {
				ps.errorf(path+".revert", "variant %q: revert %q: want msgid:<message-id of the series' thread>", v.Name, r)
				continue
			}
			v.Revert = append(v.Revert, MsgIDPrefix+id)
			continue
		}
		a, b, isRange := strings.Cut(r, "..")
		why := notARevision(a)
		if isRange && why == "" {
			why = notARevision(b)
		}
		if r == "" || why != "" {
			if r == "" {
				why = "is empty"
			}
			ps.errorf(path+".revert", "variant %q: revert %q %s: want a commit of the tree, A..B or msgid:<id>", v.Name, r, why)
			continue
		}
		v.Revert = append(v.Revert, r)
	}
	if v.OwnTree() {
		if rv.ApplySeries != nil && *rv.ApplySeries {
			ps.errorf(path+".apply_series", "variant %q: apply_series with ref or revert: the series is applied to the evaluation's base only; measure base + series and the reverted or other-release kernel as separate variants", v.Name)
		}
		v.ApplySeries = false
	}
}

// notARevision says why s cannot name a revision of the evaluation's
// tree ("" when it can): a URL, a path or another repository's
// "repo:ref".
func notARevision(s string) string {
	switch {
	case s == "":
		return "is empty"
	case strings.Contains(s, "://"):
		return "is a URL, not a revision of the tree"
	case strings.HasPrefix(s, "/") || strings.HasPrefix(s, "./") || strings.HasPrefix(s, "../") || strings.HasPrefix(s, "~"):
		return "is a path, not a revision of the tree"
	case strings.Contains(s, ":"):
		return "names another repository (repo:ref), not a revision of the tree"
	case strings.ContainsAny(s, " \t\n\\*?["):
		return "is not a valid revision"
	}
	return ""
}

// releasePairs refuses a comparison or chain step across two refs
// (releases) whose variants request different Kconfig symbols: the
// change would mix the release with the config, with no common config
// intent to hold still.
func (ps *parser) releasePairs(p *Pipeline) {
	check := func(a, b, what string) {
		va, vb := p.Variant(a), p.Variant(b)
		if va == nil || vb == nil || va.Ref == vb.Ref {
			return
		}
		if diff := symbolsDiff(va.Symbols, vb.Symbols); diff != "" {
			ps.errorf(fmt.Sprintf("variant[%d]", variantIndex(p, b)),
				"%s %s -> %s crosses releases (%s vs %s) and requests different symbols (%s): no common config intent; request the same symbols on both releases and change the config in a step of its own on one release",
				what, a, b, refName(va.Ref), refName(vb.Ref), diff)
		}
	}
	for _, c := range p.Comparisons {
		check(c.Base, c.Other, "comparison")
	}
	for _, ch := range p.Chains {
		for i := 1; i < len(ch.Variants); i++ {
			check(ch.Variants[i-1], ch.Variants[i], "chain step")
		}
	}
}

func refName(r string) string {
	if r == "" {
		return "the base"
	}
	return r
}

func variantIndex(p *Pipeline, name string) int {
	for i, v := range p.Variants {
		if v.Name == name {
			return i
		}
	}
	return 0
}

// symbolsDiff lists the symbols a and b request differently
// ("PREEMPT_VOLUNTARY=y vs unset"), "" when none.
func symbolsDiff(a, b map[string]string) string {
	keys := map[string]bool{}
	for k := range a {
		keys[k] = true
	}
	for k := range b {
		keys[k] = true
	}
	var out []string
	for k := range keys {
		va, oka := a[k]
		vb, okb := b[k]
		if oka && okb && va == vb {
			continue
		}
		if !oka {
			va = "unset"
		}
		if !okb {
			vb = "unset"
		}
		out = append(out, fmt.Sprintf("%s=%s vs %s", k, va, vb))
	}
	sort.Strings(out)
	return strings.Join(out, ", ")
}

// SeriesReverted is p for a series its base already has (lore
// --revert-if-merged): the variants that applied the series build the
// base as it is (which has the series), and those that built the plain
// base build it with the series reverted (revert = ["msgid:<id>"]).
// Comparisons and chains stay as they are, so "base -> patched" still
// reads as what the series does. It returns the new pipeline, the
// variants now reverted and those now measuring the base as it is; a
// pipeline with no variant without the series has nothing to revert
// (an error).
func (p *Pipeline) SeriesReverted(msgid string) (*Pipeline, []string, []string, error) {
	q := *p
	q.Series.Apply = false
	q.Variants = make([]Variant, len(p.Variants))
	var reverted, asIs []string
	for i, v := range p.Variants {
		v.Revert = append([]string(nil), v.Revert...)
		if v.Kernel == v.Name {
			switch {
			case v.ApplySeries:
				v.ApplySeries = false
				asIs = append(asIs, v.Name)
			case !v.OwnTree():
				v.Revert = []string{MsgIDPrefix + msgid}
				reverted = append(reverted, v.Name)
			}
		}
		q.Variants[i] = v
	}
	for i := range q.Variants {
		v := &q.Variants[i]
		if v.Kernel != v.Name {
			owner := q.Variant(v.Kernel)
			v.ApplySeries, v.Revert = owner.ApplySeries, owner.Revert
		}
	}
	if len(reverted) == 0 || len(asIs) == 0 {
		return nil, nil, nil, fmt.Errorf("pipeline %s has no pair of variants with and without the series to turn into the base with it reverted against the base as it is", p.Name)
	}
	return &q, reverted, asIs, nil
}
