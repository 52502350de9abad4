package build

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"

	"github.com/patcheval/patcheval/build/kconfig"
	"github.com/patcheval/patcheval/internal/fail"
)

// DiffInput names two final configs to compare and where their Kconfig
// rules come from.
type DiffInput struct {
	// A and B are .config files or artifact directories.
	A, B string
	// Requested are the Variants' symbols; nil takes them from the
	// artifacts' metadata.
	Requested map[string]string
	// Tree is a kernel source directory or a git repository (then Commit
	// names the revision); empty takes B's (else A's) repository and
	// commit from its metadata.
	Tree, Commit string
	// Arch; empty takes it from the metadata.
	Arch string
	// CommitA, when set and not Commit, is A's revision in the same
	// repository (a release A/B): both trees' Kconfig are read and the
	// rules only one of them has are named (kconfig.DiffTrees).
	CommitA string
}

// DiffReport is the confound report: every symbol that differs between A
// and B, requested first, then derived ones with the Kconfig rule that
// changed them.
type DiffReport struct {
	A, B    string
	Arch    string
	Source  string // where the Kconfig rules were read
	Changes []kconfig.SymbolChange
}

// ConfigDiff compares two final configs and explains each derived change
// from the tree's Kconfig files.
func ConfigDiff(in DiffInput) (*DiffReport, error) {
	rep := &DiffReport{}
	var metas [2]*Metadata
	var cfgs [2]kconfig.Config
	req := map[string]string{}
	for i, p := range []string{in.A, in.B} {
		cfgPath := p
		if fi, err := os.Stat(p); err == nil && fi.IsDir() {
			a, err := LoadArtifact(p)
			if err != nil {
				return nil, err
			}
			metas[i] = &a.Meta
			cfgPath = a.Config
			for k, v := range a.Meta.Patcheval.RequestedSymbols {
				req[k] = v
			}
		} else if err != nil {
			return nil, fail.Inputf("%s: %w", p, err)
		}
		c, err := kconfig.ReadConfig(cfgPath)
		if err != nil {
			return nil, fail.Inputf("%s: %w", cfgPath, err)
		}
		cfgs[i] = c
		if i == 0 {
			rep.A = cfgPath
		} else {
			rep.B = cfgPath
		}
	}
	if in.Requested != nil {
		req = in.Requested
	}
	rep.Arch = in.Arch
	for _, m := range []*Metadata{metas[1], metas[0]} {
		if rep.Arch == "" && m != nil {
			rep.Arch = m.Build.TargetArch
		}
	}
	if rep.Arch == "" {
		return nil, fail.Inputf("--arch is needed when A and B are plain .config files")
	}
	ai, err := lookupArch(rep.Arch)
	if err != nil {
		return nil, err
	}
	var kc *kconfig.Kconfig
	switch {
	case in.Tree != "" && isSourceDir(in.Tree):
		rep.Source = in.Tree
		kc, err = kconfig.Parse(in.Tree, ai.SrcArch)
		if err != nil {
			return nil, fail.Inputf("Kconfig of %s: %w", in.Tree, err)
		}
	default:
		repo, commit := in.Tree, in.Commit
		for _, m := range []*Metadata{metas[1], metas[0]} {
			if m == nil {
				continue
			}
			if repo == "" {
				repo = m.Git.URL
			}
			if commit == "" && (in.Tree == "" || in.Tree == m.Git.URL) {
				commit = m.Git.Commit
			}
		}
		if repo == "" {
			return nil, fail.Inputf("--tree (kernel source or git repository) is needed when A and B are plain .config files")
		}
		if commit == "" {
			commit = "HEAD"
		}
		rep.Source = repo + "@" + short(commit)
		kc, err = KconfigAt(repo, commit, ai.Name)
		if err != nil {
			return nil, err
		}
		if in.CommitA != "" && in.CommitA != commit {
			ka, err := KconfigAt(repo, in.CommitA, ai.Name)
			if err != nil {
				return nil, err
			}
			rep.Source = repo + "@" + short(in.CommitA) + ".." + short(commit)
			rep.Changes = kconfig.DiffTrees(ka, kc, cfgs[0], cfgs[1], req)
			return rep, nil
		}
	}
	rep.Changes = kconfig.Diff(kc, cfgs[0], cfgs[1], req)
	return rep, nil
}

func isSourceDir(p string) bool {
	fi, err := os.Stat(filepath.Join(p, "Kconfig"))
	return err == nil && fi.Mode().IsRegular()
}

// Change returns the change of sym, or nil.
func (r *DiffReport) Change(sym string) *kconfig.SymbolChange {
	for i := range r.Changes {
		if r.Changes[i].Symbol == sym {
			return &r.Changes[i]
		}
	}
	return nil
}

// Derived lists the derived (not requested) symbols that changed, sorted.
func (r *DiffReport) Derived() []string {
	var s []string
	for _, c := range r.Changes {
		if !c.Requested {
			s = append(s, c.Symbol)
		}
	}
	sort.Strings(s)
	return s
}

// Format writes the report for a terminal.
func (r *DiffReport) Format(w io.Writer) error {
	nreq := 0
	for _, c := range r.Changes {
		if c.Requested {
			nreq++
		}
	}
	fmt.Fprintf(w, "config-diff %s -> %s (%s, Kconfig from %s): %d symbols differ, %d requested, %d derived\n",
		r.A, r.B, r.Arch, r.Source, len(r.Changes), nreq, len(r.Changes)-nreq)
	if len(r.Changes) == 0 {
		return nil
	}
	return kconfig.FormatDiff(w, r.Changes)
}
