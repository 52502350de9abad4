package pipelines

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"

	"github.com/patcheval/patcheval/evaluate"
	"github.com/patcheval/patcheval/evaluate/guest"
)

// BuildSpec is one kernel to build: the variants listed share it (the
// first is the one that declared it). It maps onto build.Request: Tree.Path
// and the commit (base, or base + series when ApplySeries), Arch,
// BaseConfig, Fragments (a Name is build/configs/<Name>.config), Symbols.
type BuildSpec struct {
	// Key identifies the spec within the pipeline (stable across runs).
	Key         string   `json:"key"`
	Variant     string   `json:"variant"`
	Variants    []string `json:"variants"`
	Arch        string   `json:"arch"`
	ApplySeries bool     `json:"apply_series"`
	// Ref and Revert are the owning variant's (its kernel's tree).
	Ref        string            `json:"ref,omitempty"`
	Revert     []string          `json:"revert,omitempty"`
	BaseConfig string            `json:"base_config"`
	Fragments  []Fragment        `json:"fragments"`
	Symbols    map[string]string `json:"symbols"`
}

// Builds returns the distinct kernels: for each arch, one per variant that
// owns a kernel, with the runtime-only variants that boot it. Variants
// with identical build inputs also share one build.
func (p *Pipeline) Builds() []BuildSpec {
	var out []BuildSpec
	for _, arch := range p.Arches {
		byKey := map[string]int{}
		for _, v := range p.Variants {
			owner := p.Variant(v.Kernel)
			key := p.buildKey(arch, owner)
			if i, ok := byKey[key]; ok {
				out[i].Variants = append(out[i].Variants, v.Name)
				continue
			}
			byKey[key] = len(out)
			var frags []Fragment
			for _, f := range p.Fragments {
				if f.Name == BootFragment {
					f.Name = bootConfigFor(arch)
				}
				frags = append(frags, f)
			}
			out = append(out, BuildSpec{
				Key: key, Variant: owner.Name, Variants: []string{v.Name}, Arch: arch, ApplySeries: owner.ApplySeries,
				Ref: owner.Ref, Revert: owner.Revert, BaseConfig: p.BaseConfig, Fragments: frags, Symbols: owner.Symbols,
			})
		}
	}
	return out
}

func (p *Pipeline) buildKey(arch string, v *Variant) string {
	b, _ := json.Marshal(struct {
		Arch        string
		ApplySeries bool
		Symbols     map[string]string
		Ref         string   `json:",omitempty"`
		Revert      []string `json:",omitempty"`
	}{arch, v.ApplySeries, v.Symbols, v.Ref, v.Revert})
	h := sha256.Sum256(b)
	return arch + "-" + hex.EncodeToString(h[:6])
}

// BootPlan is one boot as the pipeline plans it: variant Variant's kernel
// (build BuildKey) booted for the Boot-th time on Target, running Plan.
// Once the kernel is built the runner makes it an evaluate.PlannedBoot.
type BootPlan struct {
	// BootKey names the boot; its Variant is the name samples and the
	// store use: the variant's name, or "name/arch" when the pipeline has
	// more than one arch.
	evaluate.BootKey
	// Name is the variant's name in the pipeline.
	Name     string `json:"name"`
	Arch     string `json:"arch"`
	BuildKey string `json:"build_key"`
	// Cmdline is the target's and the variant's command line additions.
	Cmdline       string     `json:"cmdline,omitempty"`
	Plan          guest.Plan `json:"plan"`
	Deterministic bool       `json:"deterministic"`
	Target        Target     `json:"target"`
}

// Runs returns every boot in execution order: boots interleaved across
// variants (A B C A B C ...) so that drift spreads evenly, arch by arch.
// A resuming runner skips the (Variant, Boot) pairs already finished.
func (p *Pipeline) Runs() []BootPlan { return p.runs(0, p.Repeats.Boots) }

// RunsBetween plans boots [from, to) of every variant, interleaved (an
// adaptive round is RunsBetween(n, n+1)).
func (p *Pipeline) RunsBetween(from, to int) []BootPlan { return p.runs(from, to) }

// runs plans boots [from, to) of every variant, interleaved.
func (p *Pipeline) runs(from, to int) []BootPlan {
	builds := map[string]string{} // arch/variant -> build key
	for _, b := range p.Builds() {
		for _, v := range b.Variants {
			builds[b.Arch+"/"+v] = b.Key
		}
	}
	var benches []guest.Bench
	for _, b := range p.Benchmarks {
		benches = append(benches, b.Guest())
	}
	out := make([]BootPlan, 0, len(p.Arches)*max(to-from, 0)*len(p.Variants))
	for _, arch := range p.Arches {
		for boot := from; boot < to; boot++ {
			for _, v := range p.Variants {
				label := v.Name
				if len(p.Arches) > 1 {
					label += "/" + arch
				}
				cmd := strings.TrimSpace(p.Target.Cmdline + " " + v.Cmdline)
				plan := guest.Plan{
					Benchmarks: append([]guest.Bench(nil), benches...),
					Iterations: p.Repeats.Iterations,
					Preempt:    v.SchedPreempt,
					Sysctls:    v.Sysctls,
					CPUs:       v.CPUs,
				}
				if v.SELinux != "" {
					plan.SELinux = &guest.SELinux{Mode: v.SELinux}
					if p.SELinuxPolicy != nil && v.SELinux != guest.SELinuxDisabled {
						plan.SELinux.PolicyName = p.SELinuxPolicy.Label()
					}
				}
				out = append(out, BootPlan{BootKey: evaluate.BootKey{Variant: label, Boot: boot}, Name: v.Name, Arch: arch, BuildKey: builds[arch+"/"+v.Name],
					Cmdline: cmd, Plan: plan, Deterministic: p.Deterministic, Target: p.Target})
			}
		}
	}
	return out
}

// Hash is a content hash of everything that decides what the pipeline
// builds and runs (not its comments, description, file name or verdict
// threshold; fragment files by content): part of an evaluation's key.
func (p *Pipeline) Hash() string {
	c := *p
	c.Description, c.Warnings = "", nil
	c.Compare = Compare{} // judging, not measuring
	c.Tables = nil        // presentation
	// How many lost boots in a row to bear, not what is measured: raised
	// after a machine came back, it resumes the same evaluation.
	c.Target.MaxLostBoots = 0
	c.Fragments = nil
	for _, f := range p.Fragments {
		if f.Path != "" {
			data, _ := os.ReadFile(f.Path)
			sum := sha256.Sum256(data)
			c.Fragments = append(c.Fragments, Fragment{Path: "sha256:" + hex.EncodeToString(sum[:])})
		} else {
			c.Fragments = append(c.Fragments, f)
		}
	}
	if c.BaseConfig != "" && filepath.IsAbs(c.BaseConfig) {
		data, _ := os.ReadFile(c.BaseConfig)
		sum := sha256.Sum256(data)
		c.BaseConfig = "sha256:" + hex.EncodeToString(sum[:])
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.Encode(c) // maps marshal with sorted keys
	sum := sha256.Sum256(buf.Bytes())
	return hex.EncodeToString(sum[:])
}
