package dashboard

import (
	"fmt"
	"net/url"
	"slices"
	"strconv"
	"strings"

	"github.com/patcheval/patcheval/pipelines/store"
)

// listStatuses are the evaluation states the index filters by.
var listStatuses = []string{"queued", "running", "done", "failed", "cancelled"}

// filterValues are f's filters as query parameters (paging left out).
func filterValues(f store.ListFilter) url.Values {
	v := url.Values{}
	for _, kv := range [][2]string{{"status", f.Status}, {"pipeline", f.Pipeline}, {"series", f.Series}, {"tree", f.Tree}, {"arch", f.Arch}} {
		if kv[1] != "" {
			v.Set(kv[0], kv[1])
		}
	}
	return v
}

// union is a's names, then b's that a lacks.
func union(a, b []string) []string {
	out := slices.Clone(a)
	for _, s := range b {
		if !slices.Contains(out, s) {
			out = append(out, s)
		}
	}
	return out
}

// badFilter is one line naming the first query parameter of f whose
// value is unknown (a status that does not exist; a pipeline neither
// configured nor stored; a tree, or an arch, no stored evaluation has),
// "" when all are known: a mistyped or stale link gets a 400 saying
// which parameter is wrong, not a list that is silently empty.
func badFilter(f store.ListFilter, pipelines []string, ch store.ListChoices) string {
	for _, c := range []struct {
		param, value, what string
		known              []string
	}{
		{"status", f.Status, "no such status", listStatuses},
		{"pipeline", f.Pipeline, "no such pipeline", pipelines},
		{"tree", f.Tree, "no evaluation is on this tree", ch.Trees},
		{"arch", f.Arch, "no evaluation has a build for this arch", ch.Arches},
	} {
		if c.value != "" && !slices.Contains(c.known, c.value) {
			return fmt.Sprintf("%s %q: %s (known: %s)", c.param, c.value, c.what, knownList(c.known))
		}
	}
	return ""
}

// knownList names up to 12 values, then how many more there are.
func knownList(all []string) string {
	const most = 12
	switch {
	case len(all) == 0:
		return "none yet"
	case len(all) > most:
		return strings.Join(all[:most], ", ") + fmt.Sprintf(" and %d more", len(all)-most)
	}
	return strings.Join(all, ", ")
}

// pageNumber is the index's ?page= (1 when absent), or a line saying
// why it is not a page number.
func pageNumber(v string) (int, string) {
	if v == "" {
		return 1, ""
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 {
		return 0, fmt.Sprintf("page %q: want a page number from 1", v)
	}
	return n, ""
}

// activeFilter is one filter the index applies, shown with a link to
// the same list without it.
type activeFilter struct{ Param, Value, Without string }

// activeFilters are f's filters in the order of the form.
func activeFilters(f store.ListFilter) []activeFilter {
	v := filterValues(f)
	var out []activeFilter
	for _, k := range []string{"status", "pipeline", "tree", "arch", "series"} {
		if v.Get(k) == "" {
			continue
		}
		rest := url.Values{}
		for k2, vs := range v {
			if k2 != k {
				rest[k2] = vs
			}
		}
		without := "/"
		if len(rest) > 0 {
			without = "/?" + rest.Encode()
		}
		out = append(out, activeFilter{Param: k, Value: v.Get(k), Without: without})
	}
	return out
}
