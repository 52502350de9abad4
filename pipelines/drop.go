package pipelines

import (
	"fmt"
	"slices"
	"strings"
)

// WithoutVariants is a copy of p without the variants named in drop, and
// without everything that needs them: the runtime-only variants that
// boot a dropped variant's kernel, the comparisons and tables that name a
// dropped variant, the chain steps through one (a chain left with fewer
// than two variants goes). notes say, one line each, what else went and
// why. Dropping every variant is an error: nothing would be left to run.
func (p *Pipeline) WithoutVariants(drop []string) (q *Pipeline, notes []string, err error) {
	gone := map[string]bool{}
	for _, n := range drop {
		if p.Variant(n) == nil {
			return nil, nil, fmt.Errorf("pipeline %s has no variant %q", p.Name, n)
		}
		gone[n] = true
	}
	cp := *p
	cp.Variants = nil
	for _, v := range p.Variants {
		switch {
		case gone[v.Name]:
		case gone[v.Kernel]:
			gone[v.Name] = true
			notes = append(notes, fmt.Sprintf("variant %s dropped too: it boots variant %s's kernel", v.Name, v.Kernel))
		default:
			cp.Variants = append(cp.Variants, v)
		}
	}
	if len(cp.Variants) == 0 {
		return nil, nil, fmt.Errorf("pipeline %s: no variant left to run", p.Name)
	}
	cp.Comparisons = nil
	for _, c := range p.Comparisons {
		if gone[c.Base] || gone[c.Other] {
			notes = append(notes, fmt.Sprintf("comparison %s vs %s dropped", c.Base, c.Other))
			continue
		}
		cp.Comparisons = append(cp.Comparisons, c)
	}
	cp.Chains = nil
	for _, c := range p.Chains {
		left := slices.DeleteFunc(slices.Clone(c.Variants), func(n string) bool { return gone[n] })
		if len(left) == len(c.Variants) {
			cp.Chains = append(cp.Chains, c)
			continue
		}
		if len(left) < 2 {
			notes = append(notes, fmt.Sprintf("chain %q dropped", c.Name))
			continue
		}
		notes = append(notes, fmt.Sprintf("chain %q runs %s", c.Name, strings.Join(left, " -> ")))
		cp.Chains = append(cp.Chains, Chain{Name: c.Name, Variants: left})
	}
	cp.Tables = nil
	for _, t := range p.Tables {
		cols := slices.DeleteFunc(slices.Clone(t.Columns), func(n string) bool { return gone[n] })
		if t.Change != nil && (gone[t.Change.Base] || gone[t.Change.Other]) {
			t.Change = nil
		}
		if len(cols) == 0 {
			notes = append(notes, fmt.Sprintf("table %q dropped", t.Name))
			continue
		}
		t.Columns = cols
		cp.Tables = append(cp.Tables, t)
	}
	return &cp, notes, nil
}
