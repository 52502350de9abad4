package pipelines

import (
	"fmt"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/patcheval/patcheval/evaluate/guest"
)

// MaxBoots bounds repeats.boots and repeats.max_boots (and --boots): boots
// per variant.
const MaxBoots = 1000

// MaxRuns bounds the boots of one evaluation: boots (or max_boots) x
// variants x arches. The plan is made whole (Runs), about 30 µs and a
// kilobyte per boot: a 26 KB pipeline file of 1000 variants on three
// arches with boots = 1000 kept patcheval planning for two minutes (found
// by FuzzParse running at 80 executions per second).
const MaxRuns = 20000

// CheckRuns says what is wrong when boots per variant make more than
// MaxRuns boots of p ("" when nothing).
func (p *Pipeline) CheckRuns(boots int) string {
	boots = max(boots, p.Repeats.MaxBoots)
	if n := boots * len(p.Variants) * len(p.Arches); n > MaxRuns {
		return fmt.Sprintf("%d boot(s) x %d variant(s) x %d arch(es) = %d boots: at most %d in one evaluation", boots, len(p.Variants), len(p.Arches), n, MaxRuns)
	}
	return ""
}

// Pipeline is a validated pipeline file.
type Pipeline struct {
	Name        string `json:"name"`
	Description string `json:"description"`
	// File is where the pipeline was read from (a path, or
	// "pipelines/<name>.toml" for a builtin); Dir resolves its relative
	// paths ("" for builtins).
	File string `json:"-"`
	Dir  string `json:"-"`

	Tree   Tree   `json:"tree"`
	Series Series `json:"series"`
	// Arches are normalised: ppc64le, arm64, x86_64.
	Arches []string `json:"arches"`
	// BaseConfig is a make target ("tinyconfig") or an absolute file path.
	BaseConfig string     `json:"base_config"`
	Fragments  []Fragment `json:"fragments"`
	// Symbols apply to every variant (the variant's own win).
	Symbols map[string]string `json:"symbols,omitempty"`

	Variants   []Variant   `json:"variants"`
	Benchmarks []Benchmark `json:"benchmarks"`
	Repeats    Repeats     `json:"repeats"`
	// Compare is how the comparisons are judged (not part of Hash: the
	// same samples can be judged again with another threshold).
	Compare     Compare      `json:"compare,omitzero"`
	Target      Target       `json:"target"`
	Comparisons []Comparison `json:"comparisons"`
	Chains      []Chain      `json:"chains,omitempty"`
	// SELinuxPolicy is the policy that variants with SELinux enforcing
	// or permissive load ([selinux] policy).
	SELinuxPolicy *Policy `json:"selinux_policy,omitempty"`
	// Tables are the thread's tables the report reproduces (not part of
	// Hash: presentation only).
	Tables []Table `json:"tables,omitempty"`
	// Deterministic runs QEMU with -icount shift=0,sleep=off: timings are
	// functions of executed instructions, and every result says so.
	Deterministic bool `json:"deterministic"`

	// Warnings are problems that do not stop the pipeline (file:line: ...).
	Warnings []string `json:"-"`
	// Source is the TOML text it was parsed from (kept with an
	// evaluation's inputs, for people).
	Source []byte `json:"-"`
}

// Tree is the kernel tree and the base the series applies to.
type Tree struct {
	// Path of the git repository; "" means Debian's 6.1 tree as
	// scripts/linux-tree.sh provides it (or --tree on the command line).
	Path string `json:"path,omitempty"`
	Base string `json:"base"`
}

// Series says which thread the pipeline was written for; the command line
// names the series to evaluate and overrides MsgID.
type Series struct {
	MsgID string `json:"msgid,omitempty"`
	// Apply is the default of Variant.ApplySeries.
	Apply bool `json:"apply"`
}

// Fragment is a config fragment: a boot config shipped in build/configs
// (Name, e.g. "ppc64le-pseries", the file build/configs/<Name>.config) or
// a file (Path, absolute). In Pipeline.Fragments, Name may be BootFragment;
// BuildSpec.Fragments have it resolved for the spec's arch.
type Fragment struct {
	Name string `json:"name,omitempty"`
	Path string `json:"path,omitempty"`
}

func (f Fragment) String() string {
	if f.Name != "" {
		return f.Name
	}
	return f.Path
}

// Variant is one configuration under test.
type Variant struct {
	Name        string `json:"name"`
	Description string `json:"description,omitempty"`
	// Kernel is the variant whose kernel this one boots: its own name, or
	// the variant named by `kernel = ...` for a runtime-only variant.
	Kernel      string `json:"kernel"`
	ApplySeries bool   `json:"apply_series"`
	// Symbols are the effective Kconfig symbols (pipeline-wide ones merged
	// with the variant's own), without CONFIG_: SYM -> y, n, m or a value.
	Symbols map[string]string `json:"symbols,omitempty"`
	// Cmdline is added to the kernel command line.
	Cmdline string `json:"cmdline,omitempty"`
	// SchedPreempt is written to /sys/kernel/debug/sched/preempt
	// (none, voluntary, full, lazy): needs a PREEMPT_DYNAMIC kernel.
	SchedPreempt string            `json:"sched_preempt,omitempty"`
	Sysctls      map[string]string `json:"sysctls,omitempty"`
	// CPUs pins the benchmarks like taskset -c.
	CPUs string `json:"cpus,omitempty"`
	// SELinux is the mode the agent sets after boot: enforcing or
	// permissive (with the pipeline's SELinuxPolicy loaded), or disabled
	// (checked: the command line's selinux=0 took).
	SELinux string `json:"selinux,omitempty"`
	// AlignedOf names the variant this one rebuilds with forced
	// function alignment (Compare.Layout); "" for the pipeline's own.
	AlignedOf string `json:"aligned_of,omitempty"`
	// Ref is the revision the variant's kernel builds instead of the
	// evaluation's base (a release A/B: "v6.12.117" beside "v7.2.13"),
	// in the evaluation's one tree; "" is the base.
	Ref string `json:"ref,omitempty"`
	// Revert lists what the variant's kernel reverts on top of its base
	// (or Ref): commits ("0123abc"), ranges ("A..B") and series by their
	// thread ("msgid:<id>", the evaluated series), newest first as
	// resolved (series/apply.Revert).
	Revert []string `json:"revert,omitempty"`
	Line   int      `json:"-"`
}

// OwnTree reports whether v's kernel builds another tree than the base
// (or base + series): a ref of its own or reverts.
func (v *Variant) OwnTree() bool { return v.Ref != "" || len(v.Revert) > 0 }

// Policy is an SELinux policy source: a shipped one (Name, see
// evaluate/guest/selinux) or a file (Path, absolute). SHA256 is the source's
// hash, so that editing it changes Hash.
type Policy struct {
	Name   string `json:"name,omitempty"`
	Path   string `json:"path,omitempty"`
	SHA256 string `json:"sha256"`
	// Source is kept in the pipeline as a stage stores it: the boot
	// stage compiles the policy from the stored pipeline.
	Source []byte `json:"source,omitempty"`
}

// Label names the policy in reports: its name or file name.
func (p *Policy) Label() string {
	if p.Name != "" {
		return p.Name
	}
	return filepath.Base(p.Path)
}

// Table is a table of the thread the report reproduces in the thread's
// shape: one row per benchmark and metric, the mean of each of Columns
// (variants), then Change, the change of Change.Other over Change.Base
// with its confidence interval (a [[comparison]] of the pipeline).
type Table struct {
	Name    string   `json:"name"`
	Columns []string `json:"columns"`
	// Benchmarks, when set, keeps the rows whose benchmark label starts
	// with one of them ("perf bench", "getpgid").
	Benchmarks []string     `json:"benchmarks,omitempty"`
	Change     *TableChange `json:"change,omitempty"`
}

// TableChange is a Table's change column ("SELinux tax": enforcing over
// disabled).
type TableChange struct {
	Name  string `json:"name"`
	Base  string `json:"base"`
	Other string `json:"other"`
}

// Benchmark is one benchmark and its parameters.
type Benchmark struct {
	// Name is an agent benchmark (guest.Benchmarks): kill, kill-child,
	// getppid, getpgid, fork, execve, rcu, bridge.
	Name string `json:"name"`
	// Iterations is the loop count of one measurement (guest.Bench.Ops);
	// 0 means the agent's default.
	Iterations int `json:"iterations,omitempty"`
	// Calls and Runs shape rcu: Runs runs of Calls timed synchronize_rcu()
	// calls (membarrier(MEMBARRIER_CMD_GLOBAL)).
	Calls int `json:"calls,omitempty"`
	Runs  int `json:"runs,omitempty"`
	// Args are the arguments of a tool benchmark (guest.ToolBenchmarks):
	// stress-ng ["--kill", "1", "-t", "23"], perf-bench ["syscall", "basic"].
	Args []string `json:"args,omitempty"`
}

// Guest is the agent's request for this benchmark.
func (b Benchmark) Guest() guest.Bench {
	return guest.Bench{Name: b.Name, Ops: b.Iterations, Calls: b.Calls, Runs: b.Runs, Args: b.Args}
}

// Tools are the userland tools the pipeline's benchmarks run in the
// guest ("perf", "stress-ng"), sorted; none for the agent's loops alone.
func (p *Pipeline) Tools() []string {
	var out []string
	for _, b := range p.Benchmarks {
		if t := guest.ToolOf(b.Name); t != "" && !contains(out, t) {
			out = append(out, t)
		}
	}
	sort.Strings(out)
	return out
}

// Repeats is the design: Boots boots per variant (interleaved), each
// running every benchmark Iterations times. With MaxBoots > Boots sampling
// is adaptive: after Boots, the variants of every comparison whose verdict
// is still inconclusive get one more boot each, round after round, until
// every verdict resolves ±Compare.Threshold (significant, or equivalent)
// or MaxBoots is reached (stats.NeedMore; the report says why sampling
// stopped).
type Repeats struct {
	Boots      int `json:"boots"`
	Iterations int `json:"iterations"`
	MaxBoots   int `json:"max_boots,omitempty"`
}

// Compare says how comparisons are judged.
type Compare struct {
	// Threshold is T in percent, the smallest change that matters
	// (stats.Options.Threshold): a significant change smaller than T is
	// reported as below it, a non-significant one is equivalent when its
	// confidence interval lies inside ±T and inconclusive when it reaches
	// past ±T; adaptive sampling (Repeats.MaxBoots) aims at resolving ±T.
	// Default stats.DefaultThreshold (1%), stats.DefaultDeterministicThreshold
	// (0.5%) for deterministic pipelines.
	Threshold float64 `json:"threshold_pct"`
	// Layout ([compare] layout = true) rebuilds every compared kernel
	// with CONFIG_DEBUG_FORCE_FUNCTION_ALIGN_64B=y (variants named
	// NAME+AlignSuffix) and compares those too: a change that survives
	// aligned functions is layout-stable, one that does not is
	// layout-sensitive (code layout, not the code). The aligned variants
	// are in Variants and their comparisons in Comparisons (Aligned set).
	Layout bool `json:"layout,omitempty"`
}

// AlignSuffix names the function-aligned rebuild of a variant.
const AlignSuffix = "+align64"

// AlignSymbols are what an aligned rebuild adds to its variant's
// symbols: -falign-functions=64 through the kernel's own option (every
// architecture of internal/arch has it since 5.7; it depends on EXPERT).
var AlignSymbols = map[string]string{"DEBUG_FORCE_FUNCTION_ALIGN_64B": "y", "EXPERT": "y"}

// LayoutArches are the architectures whose Kconfig offers
// DEBUG_FORCE_FUNCTION_ALIGN_64B (lib/Kconfig.debug: X86_64, ARM64, PPC32,
// PPC64, ARC): compare.layout is refused for the others (riscv64).
var LayoutArches = map[string]bool{"x86_64": true, "arm64": true, "ppc64le": true}

// Target is where kernels run.
type Target struct {
	Kind string `json:"kind"` // "qemu" or "ssh"
	// Host is the ssh URL (ssh://user@host[:port]) for Kind "ssh".
	Host string `json:"host,omitempty"`
	// BootHook runs on the host before a boot and boots the kernel (Boot
	// "hook"), or brings a lost machine back (Boot "kexec").
	BootHook string `json:"boot_hook,omitempty"`
	// Boot is how an ssh target boots each kernel: "none" (the machine's
	// running kernel is measured, verified to be the one built), "hook"
	// or "kexec" (evaluate/target/ssh). Empty for QEMU.
	Boot string `json:"boot,omitempty"`
	// Initrd is the initramfs a kexec boot loads (absolute path).
	Initrd string `json:"initrd,omitempty"`
	// ConsoleLog is the file (absolute path) this host logs the machine's
	// console to: a crash there is the kernel's failed boot, silence
	// without one a lost machine (evaluate/target/ssh).
	ConsoleLog string `json:"console_log,omitempty"`
	// Identity (an absolute path) and SSHOptions (ssh -o) reach an ssh
	// target (besides ~/.ssh/config).
	Identity   string        `json:"identity,omitempty"`
	SSHOptions []string      `json:"ssh_options,omitempty"`
	SMP        int           `json:"smp"`
	MemoryMiB  int           `json:"memory_mib"`
	Timeout    time.Duration `json:"timeout"`
	// KVM is "auto" (when /dev/kvm works), "on" or "off". Deterministic
	// pipelines always run under TCG.
	KVM string `json:"kvm"`
	// Cmdline is added to every variant's kernel command line.
	Cmdline string `json:"cmdline,omitempty"`
	// MaxLostBoots is how many boots in a row may fail for infrastructure
	// reasons (a lost machine, a QEMU that does not start), each after
	// the target's own retries, before the evaluation stops as an
	// infrastructure failure instead of trying every boot left; 0 is
	// DefaultMaxLostBoots (LostBoots).
	MaxLostBoots int `json:"max_lost_boots,omitempty"`
}

// DefaultMaxLostBoots is Target.MaxLostBoots when a pipeline sets none.
const DefaultMaxLostBoots = 3

// LostBoots is the target's budget of boots in a row that may fail for
// infrastructure reasons (Target.MaxLostBoots).
func (t Target) LostBoots() int {
	if t.MaxLostBoots > 0 {
		return t.MaxLostBoots
	}
	return DefaultMaxLostBoots
}

// Comparison is one pair the report compares: Other against Base.
type Comparison struct {
	Base  string `json:"base"`
	Other string `json:"other"`
	// Aligned marks the layout control of comparison
	// {Base, Other} without AlignSuffix (Compare.Layout).
	Aligned bool `json:"aligned,omitempty"`
}

// Chain is an ordered isolation chain (A -> B -> C) whose total change the
// report decomposes into steps.
type Chain struct {
	Name     string   `json:"name,omitempty"`
	Variants []string `json:"variants"`
}

// Variant returns the variant called name, or nil.
func (p *Pipeline) Variant(name string) *Variant {
	for i := range p.Variants {
		if p.Variants[i].Name == name {
			return &p.Variants[i]
		}
	}
	return nil
}

// RevertsSeries reports whether any variant reverts the evaluated series
// (revert = ["msgid:<id>"]).
func (p *Pipeline) RevertsSeries() bool {
	for _, v := range p.Variants {
		for _, r := range v.Revert {
			if strings.HasPrefix(r, MsgIDPrefix) {
				return true
			}
		}
	}
	return false
}

// NeedsSeries reports whether any variant applies the series.
func (p *Pipeline) NeedsSeries() bool {
	for _, v := range p.Variants {
		if v.ApplySeries {
			return true
		}
	}
	return false
}
