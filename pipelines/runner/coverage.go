package runner

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/object"

	"github.com/patcheval/patcheval/build"
	"github.com/patcheval/patcheval/build/coverage"
	"github.com/patcheval/patcheval/evaluate/report"
	"github.com/patcheval/patcheval/internal/fail"
	"github.com/patcheval/patcheval/internal/gittree"
	"github.com/patcheval/patcheval/pipelines"
)

// seriesCoverage says for every file the series changes (base..patched)
// whether the measured patched kernels compiled it, and for C files they
// did not, the Kconfig symbols that would (build/coverage).
func seriesCoverage(repo, base, patched string, specs []pipelines.BuildSpec, byKey map[string]*build.Artifact, multiArch bool) ([]report.FileCoverage, error) {
	r, st, _, err := gittree.Open(repo, 16)
	if err != nil {
		return nil, fmt.Errorf("coverage: opening %s: %w", repo, err)
	}
	defer st.Close()
	tree := func(rev string) (*object.Tree, error) {
		c, err := r.CommitObject(plumbing.NewHash(rev))
		if err != nil {
			return nil, fmt.Errorf("coverage: commit %s: %w", rev, err)
		}
		return c.Tree()
	}
	bt, err := tree(base)
	if err != nil {
		return nil, err
	}
	pt, err := tree(patched)
	if err != nil {
		return nil, err
	}
	changes, err := object.DiffTree(bt, pt)
	if err != nil {
		return nil, fmt.Errorf("coverage: diff %s..%s: %w", base, patched, err)
	}
	var files []string
	deleted := map[string]bool{}
	for _, c := range changes {
		if c.To.Name == "" {
			files = append(files, c.From.Name)
			deleted[c.From.Name] = true
		} else {
			files = append(files, c.To.Name)
		}
	}
	sort.Strings(files)
	readFile := func(p string) ([]byte, error) {
		f, err := pt.File(p)
		if err != nil {
			return nil, err
		}
		s, err := f.Contents()
		return []byte(s), err
	}
	isDeleted := func(p string) bool { return deleted[p] }
	// Per file: the patched kernels that compiled or included it.
	byFile := map[string]*report.FileCoverage{}
	var first []coverage.File
	for _, s := range specs {
		a := byKey[s.Key]
		if !s.ApplySeries || a == nil {
			continue
		}
		rec, err := a.Coverage()
		if err != nil {
			return nil, err
		}
		label := strings.Join(s.Variants, ", ")
		if multiArch {
			label += " (" + s.Arch + ")"
		}
		cov := coverage.Check(files, rec, readFile, isDeleted)
		if first == nil {
			first = cov
		}
		for _, c := range cov {
			fc := byFile[c.Path]
			if fc == nil {
				fc = &report.FileCoverage{Path: c.Path, Status: c.Status, Symbols: c.Symbols, Why: c.Why, Note: c.Note}
				byFile[c.Path] = fc
			}
			if c.Status == coverage.Compiled || c.Status == coverage.Included {
				if fc.Status == coverage.NotBuilt || fc.Status == coverage.Included && c.Status == coverage.Compiled {
					fc.Status, fc.Symbols, fc.Why, fc.Note = c.Status, nil, nil, ""
				}
				fc.Kernels = append(fc.Kernels, label)
			}
		}
	}
	if first == nil {
		return nil, nil // no kernel with the series
	}
	out := make([]report.FileCoverage, 0, len(files))
	for _, f := range files {
		out = append(out, *byFile[f])
	}
	return out, nil
}

// withCover returns a copy of p whose kernels also get the Kconfig
// symbols that would build the series' C files (read from the patched
// tree's Makefiles), written as the fragment dir/cover.config.
func withCover(p *pipelines.Pipeline, repo, patched string, files []string, dir string) (*pipelines.Pipeline, string, error) {
	r, st, _, err := gittree.Open(repo, 16)
	if err != nil {
		return nil, "", fail.Infraf("--cover: opening %s: %w", repo, err)
	}
	defer st.Close()
	c, err := r.CommitObject(plumbing.NewHash(patched))
	if err != nil {
		return nil, "", fail.Infraf("--cover: %w", err)
	}
	t, err := c.Tree()
	if err != nil {
		return nil, "", fail.Infraf("--cover: %w", err)
	}
	readFile := func(p string) ([]byte, error) {
		f, err := t.File(p)
		if err != nil {
			return nil, err
		}
		s, err := f.Contents()
		return []byte(s), err
	}
	var frag strings.Builder
	var syms []string
	seen := map[string]bool{}
	for _, f := range files {
		if !strings.HasSuffix(f, ".c") && !strings.HasSuffix(f, ".S") {
			continue
		}
		if _, err := t.File(f); err != nil {
			continue // deleted by the series
		}
		s, why := coverage.Gates(f, readFile)
		for i, sym := range s {
			if seen[sym] {
				continue
			}
			seen[sym] = true
			syms = append(syms, sym)
			line := ""
			if i < len(why) {
				line = " (" + why[i] + ")"
			}
			fmt.Fprintf(&frag, "# builds %s%s\n%s=y\n", f, line, sym)
		}
	}
	if len(syms) == 0 {
		return p, "--cover: the series' C files need no Kconfig symbol beyond the pipeline's (obj-y)", nil
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, "", fail.Infra(err)
	}
	path := filepath.Join(dir, "cover.config")
	if err := os.WriteFile(path, []byte(frag.String()), 0o644); err != nil {
		return nil, "", fail.Infra(err)
	}
	cp := *p
	cp.Fragments = append(append([]pipelines.Fragment(nil), p.Fragments...), pipelines.Fragment{Path: path})
	cp.Variants = append([]pipelines.Variant(nil), p.Variants...)
	for i, v := range cp.Variants {
		m := map[string]string{}
		for k, val := range v.Symbols {
			m[k] = val
		}
		for _, s := range syms {
			if _, set := m[strings.TrimPrefix(s, "CONFIG_")]; !set {
				m[strings.TrimPrefix(s, "CONFIG_")] = "y"
			}
		}
		cp.Variants[i].Symbols = m
	}
	return &cp, "--cover: every kernel also gets " + strings.Join(syms, ", ") + " (" + path + ")", nil
}
