package pipelines

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/BurntSushi/toml"

	"github.com/patcheval/patcheval/evaluate/guest"
	"github.com/patcheval/patcheval/evaluate/guest/selinux"
	"github.com/patcheval/patcheval/evaluate/stats"
	"github.com/patcheval/patcheval/internal/arch"
	"github.com/patcheval/patcheval/internal/lazyre"
)

// BootConfigs are the boot config fragments shipped in build/configs
// (<name>.config) that a pipeline can name as a fragment: one per
// architecture of internal/arch.
var BootConfigs = arch.BootConfigs()

// BootFragment, as a fragment, means each arch's own boot config: what a
// pipeline building several architectures names.
const BootFragment = "qemu-boot"

// bootConfigFor returns the boot fragment of a normalised arch.
func bootConfigFor(name string) string {
	a, _ := arch.Find(name)
	return a.BootConfig
}

var (
	reName    = lazyre.New(`^[A-Za-z0-9][A-Za-z0-9_.+@=-]*$`)
	reSymbol  = lazyre.New(`^[A-Za-z0-9_]+$`)
	reCPUs    = lazyre.New(`^[0-9]+(-[0-9]+)?(,[0-9]+(-[0-9]+)?)*$`)
	reSysctl  = lazyre.New(`^[A-Za-z0-9_][A-Za-z0-9_.*/-]*$`)
	reMakeTgt = lazyre.New(`^[A-Za-z0-9_.-]+config$`)
)

var schedPreemptModes = []string{"none", "voluntary", "full", "lazy"}

type parser struct {
	file string
	dir  string
	ix   *lineIndex
	md   toml.MetaData
	errs Errors
	warn []string
}

func (ps *parser) errorf(path string, format string, a ...any) {
	ps.errs = append(ps.errs, &Error{File: ps.file, Line: ps.ix.line(path), Msg: fmt.Sprintf(format, a...)})
}

func (ps *parser) warnf(path string, format string, a ...any) {
	ps.warn = append(ps.warn, (&Error{File: ps.file, Line: ps.ix.line(path), Msg: fmt.Sprintf(format, a...)}).Error())
}

func (ps *parser) defined(key ...string) bool { return ps.md.IsDefined(key...) }

// kconfigValue turns a TOML value into a Kconfig value.
func kconfigValue(v any) (string, bool) {
	switch x := v.(type) {
	case bool:
		if x {
			return "y", true
		}
		return "n", true
	case int64:
		return strconv.FormatInt(x, 10), true
	case string:
		return x, x != ""
	}
	return "", false
}

func (ps *parser) symbols(path string, m map[string]any) map[string]string {
	out := map[string]string{}
	for k, v := range m {
		sym := strings.TrimPrefix(k, "CONFIG_")
		if !reSymbol.MatchString(sym) {
			ps.errorf(join(path, k), "%q is not a Kconfig symbol name (letters, digits, _)", k)
			continue
		}
		val, ok := kconfigValue(v)
		if !ok {
			ps.errorf(join(path, k), "symbol %s: value must be y, n, m, a number or a non-empty string; got %v", sym, v)
			continue
		}
		out[sym] = val
	}
	return out
}

func (ps *parser) build(r *rawPipeline) *Pipeline {
	p := &Pipeline{
		Name: r.Name, Description: strings.TrimSpace(r.Description), File: ps.file, Dir: ps.dir,
		Deterministic: r.Deterministic,
	}
	if p.Name == "" {
		ps.errorf("", "the pipeline needs a name (name = \"...\")")
	} else if !reName.MatchString(p.Name) {
		ps.errorf("name", "pipeline name %q: use letters, digits and _.+-@=", p.Name)
	}

	p.Tree = Tree{Path: r.Tree.Path, Base: r.Tree.Base}
	if p.Tree.Path != "" && !filepath.IsAbs(p.Tree.Path) && ps.dir != "" {
		p.Tree.Path = filepath.Join(ps.dir, p.Tree.Path)
	}
	p.Series = Series{MsgID: strings.Trim(strings.TrimSpace(r.Series.MsgID), "<>"), Apply: true}
	if r.Series.Apply != nil {
		p.Series.Apply = *r.Series.Apply
	}

	// Target first: arch validation depends on its kind.
	ps.target(p, &r.Target)

	ps.arches(p, r)
	ps.config(p, r)
	p.Symbols = ps.symbols("build.symbols", r.Build.Symbols)

	ps.variants(p, r)
	ps.benchmarks(p, r)

	ps.repeats(p, r)

	if len(ps.errs) == 0 {
		if msg := p.CheckRuns(p.Repeats.Boots); msg != "" {
			ps.errorf("repeats.boots", "%s", msg)
		}
	}

	ps.compare(p, r)

	if p.Deterministic {
		switch {
		case p.Target.Kind == "ssh":
			ps.errorf("deterministic", "deterministic mode needs QEMU (-icount); target.kind is ssh")
		case p.Target.KVM == "on":
			ps.errorf("target.kvm", "deterministic mode runs under TCG with -icount; it cannot use KVM (kvm = \"on\"): set kvm = \"off\" or deterministic = false")
		default:
			p.Target.KVM = "off"
		}
	}

	ps.comparisons(p, r)
	ps.layout(p, r)
	ps.releasePairs(p)
	ps.selinux(p, r)
	ps.tables(p, r)
	if len(ps.errs) == 0 {
		ps.bootable(p)
	}
	return p
}

// arches reads build.arch: one arch or several, each known (and with a
// QEMU default on a QEMU target), none twice.
func (ps *parser) arches(p *Pipeline, r *rawPipeline) {
	var arches []string
	switch a := r.Build.Arch.(type) {
	case nil:
		ps.errorf("build", "build.arch is missing (ppc64le, arm64 or x86_64)")
	case string:
		arches = []string{a}
	case []any:
		for _, e := range a {
			s, ok := e.(string)
			if !ok {
				ps.errorf("build.arch", "build.arch: want strings, found %v", e)
				continue
			}
			arches = append(arches, s)
		}
		if len(a) == 0 {
			ps.errorf("build.arch", "build.arch is empty")
		}
	default:
		ps.errorf("build.arch", "build.arch: want a string or an array of strings, found %v", a)
	}
	seenArch := map[string]bool{}
	for _, a := range arches {
		row, ok := arch.Find(a)
		n := row.Name
		if !ok {
			if p.Target.Kind == "qemu" {
				ps.errorf("build.arch", "architecture %q has no QEMU default (machine, CPU, console); QEMU targets: %s", a, strings.Join(arch.Names(), ", "))
			} else {
				ps.errorf("build.arch", "unknown architecture %q (want ppc64le, arm64 or x86_64)", a)
			}
			continue
		}
		if seenArch[n] {
			ps.errorf("build.arch", "architecture %s is listed twice", n)
			continue
		}
		seenArch[n] = true
		p.Arches = append(p.Arches, n)
	}
}

// config reads the base config (a make target or a file) and the
// fragments (files, or the shipped boot configs by name).
func (ps *parser) config(p *Pipeline, r *rawPipeline) {
	p.BaseConfig = r.Build.Config
	switch {
	case p.BaseConfig == "":
		p.BaseConfig = "tinyconfig"
	case reMakeTgt.MatchString(p.BaseConfig) && !strings.Contains(p.BaseConfig, "/") && !strings.HasSuffix(p.BaseConfig, ".config"):
		// a make target
	default:
		if path, ok := ps.file_(p.BaseConfig, "build.config", "base config"); ok {
			p.BaseConfig = path
		}
	}
	for i, f := range r.Build.Fragments {
		path := fmt.Sprintf("build.fragments[%d]", i)
		name := strings.TrimSuffix(f, ".config")
		if name == BootFragment {
			p.Fragments = append(p.Fragments, Fragment{Name: name})
			continue
		}
		if !strings.Contains(f, "/") && contains(BootConfigs, name) {
			for _, a := range p.Arches {
				if want := bootConfigFor(a); want != name {
					ps.errorf(path, "fragment %q is the boot config of another architecture; for %s use %q (or %q: each arch's own)", f, a, want, BootFragment)
				}
			}
			p.Fragments = append(p.Fragments, Fragment{Name: name})
			continue
		}
		if abs, ok := ps.file_(f, path, "fragment"); ok {
			p.Fragments = append(p.Fragments, Fragment{Path: abs})
		}
	}
}

// repeats reads the boots, iterations and adaptive budget per variant.
func (ps *parser) repeats(p *Pipeline, r *rawPipeline) {
	p.Repeats = Repeats{Boots: 3, Iterations: 1}
	if r.Repeats.Boots != nil {
		p.Repeats.Boots = *r.Repeats.Boots
		if p.Repeats.Boots < 1 {
			ps.errorf("repeats.boots", "repeats.boots = %d: want at least 1 boot per variant", p.Repeats.Boots)
		}
		if p.Repeats.Boots > MaxBoots {
			// Unbounded, the plan (boots x variants x arches) was
			// allocated whole: a typo hung patcheval (found by FuzzParse).
			ps.errorf("repeats.boots", "repeats.boots = %d: at most %d", p.Repeats.Boots, MaxBoots)
		}
	}
	if r.Repeats.Iterations != nil {
		p.Repeats.Iterations = *r.Repeats.Iterations
		if p.Repeats.Iterations < 1 {
			ps.errorf("repeats.iterations", "repeats.iterations = %d: want at least 1 iteration per boot", p.Repeats.Iterations)
		}
	}
	if r.Repeats.MaxBoots != nil {
		p.Repeats.MaxBoots = *r.Repeats.MaxBoots
		if p.Repeats.MaxBoots < p.Repeats.Boots {
			ps.errorf("repeats.max_boots", "repeats.max_boots = %d is less than repeats.boots = %d: max_boots is the adaptive budget, at least boots", p.Repeats.MaxBoots, p.Repeats.Boots)
		}
		if p.Repeats.MaxBoots > MaxBoots {
			ps.errorf("repeats.max_boots", "repeats.max_boots = %d: at most %d", p.Repeats.MaxBoots, MaxBoots)
		}
	}
}

// sshBoot reads an ssh target's boot method: boot = "none", "hook"
// (default when boot_hook is set) or "kexec" (boot_hook then brings a
// lost machine back), and the initrd a kexec loads.
func (ps *parser) sshBoot(t *Target, r *rawTarget) {
	t.Boot = r.Boot
	switch t.Boot {
	case "":
		t.Boot = "none"
		if t.BootHook != "" {
			t.Boot = "hook"
		}
	case "none", "kexec":
	case "hook":
		if t.BootHook == "" {
			ps.errorf("target.boot", "boot = \"hook\" needs boot_hook = \"a shell command that boots $PATCHEVAL_KERNEL_IMAGE\"")
		}
	default:
		ps.errorf("target.boot", "target.boot %q: want \"none\" (the running kernel), \"hook\" or \"kexec\"", t.Boot)
	}
	if r.Identity != "" {
		if abs, ok := ps.file_(r.Identity, "target.identity", "identity file"); ok {
			t.Identity = abs
		}
	}
	for _, o := range r.SSHOpts {
		if !strings.Contains(o, "=") || strings.ContainsAny(o, "\n\x00") {
			ps.errorf("target.ssh_options", "target.ssh_options %q: want ssh -o options like \"StrictHostKeyChecking=yes\"", o)
		}
	}
	t.SSHOptions = r.SSHOpts
	if r.Initrd != "" {
		if t.Boot != "kexec" {
			ps.errorf("target.initrd", "target.initrd is what a kexec boot loads: set boot = \"kexec\"")
		}
		if abs, ok := ps.file_(r.Initrd, "target.initrd", "initrd"); ok {
			t.Initrd = abs
		}
	}
	if r.Console != "" {
		t.ConsoleLog = ps.consoleLog(r.Console)
	}
}

// consoleLog resolves target.console_log (relative to the pipeline's
// file). The log need not exist yet (a console server may create it), but
// its directory must: a misspelt path would silently give no evidence.
func (ps *parser) consoleLog(f string) string {
	abs := f
	if !filepath.IsAbs(f) {
		if ps.dir == "" {
			ps.errorf("target.console_log", "console_log %q: a builtin pipeline can only name an absolute path", f)
			return ""
		}
		abs = filepath.Join(ps.dir, f)
	}
	if st, err := os.Stat(filepath.Dir(abs)); err != nil || !st.IsDir() {
		ps.errorf("target.console_log", "console_log %q: no directory %s to hold the machine's console log", f, filepath.Dir(abs))
		return ""
	}
	return abs
}

// bootable refuses a pipeline that needs several kernels (or command
// lines) on an ssh target that cannot boot them: it would measure the
// machine's one running kernel under every variant's name.
func (ps *parser) bootable(p *Pipeline) {
	if p.Target.Kind != "ssh" || p.Target.Boot != "none" {
		return
	}
	seen := map[string]bool{}
	var kernels []string
	for _, bp := range p.RunsBetween(0, 1) {
		k := bp.BuildKey + "\x00" + bp.Cmdline
		if !seen[k] {
			seen[k] = true
			kernels = append(kernels, bp.Variant)
		}
	}
	if len(kernels) > 1 {
		ps.errorf("target.boot", "variants %s need %d different kernels or command lines, but an ssh target without a boot method only measures the kernel the machine runs: set boot = \"kexec\" (or boot_hook)",
			strings.Join(kernels, ", "), len(kernels))
	}
}

// selinuxModes are the values of a variant's selinux key.
var selinuxModes = []string{guest.SELinuxEnforcing, guest.SELinuxPermissive, guest.SELinuxDisabled}

// selinux reads [selinux] policy and checks the variants' selinux modes
// against their kernels and command lines.
func (ps *parser) selinux(p *Pipeline, r *rawPipeline) {
	if pol := r.SELinux.Policy; pol != "" {
		path := "selinux.policy"
		if !strings.ContainsAny(pol, "/") && !strings.HasSuffix(pol, ".conf") || contains(selinux.Shipped(), pol) {
			if src, err := selinux.Source(pol); err != nil {
				ps.errorf(path, "policy %q: no shipped SELinux policy of that name (have %s); a file needs a path with a / or .conf", pol, strings.Join(selinux.Shipped(), ", "))
			} else {
				p.SELinuxPolicy = newPolicy(strings.TrimSuffix(pol, ".conf"), "", src)
			}
		} else if abs, ok := ps.file_(pol, path, "SELinux policy"); ok {
			if src, err := os.ReadFile(abs); err != nil {
				ps.errorf(path, "SELinux policy %q: %v", pol, err)
			} else {
				p.SELinuxPolicy = newPolicy("", abs, src)
			}
		}
	}
	used := false
	for i, v := range p.Variants {
		if v.SELinux == "" {
			continue
		}
		used = true
		path := fmt.Sprintf("variant[%d].selinux", i)
		if !contains(selinuxModes, v.SELinux) {
			ps.errorf(path, "selinux = %q: want one of %s", v.SELinux, strings.Join(selinuxModes, ", "))
			continue
		}
		if p.Target.Kind == "ssh" {
			ps.errorf(path, "variant %q: selinux = %q is set by the agent as /init in QEMU; over ssh the machine's own SELinux setup stays (target.kind = \"ssh\")", v.Name, v.SELinux)
		}
		if v.Symbols["SECURITY_SELINUX"] != "y" {
			ps.errorf(path, "variant %q: selinux = %q needs its kernel %q to request SECURITY_SELINUX=y (symbols)", v.Name, v.SELinux, v.Kernel)
		}
		cmd := strings.Fields(p.Target.Cmdline + " " + v.Cmdline)
		if v.SELinux == guest.SELinuxDisabled {
			if !contains(cmd, "selinux=0") {
				ps.errorf(path, "variant %q: selinux = \"disabled\" is the command line's selinux=0; add it to the variant's cmdline", v.Name)
			}
			if v.Symbols["SECURITY_SELINUX_BOOTPARAM"] != "y" {
				ps.errorf(path, "variant %q: selinux=0 is honoured only with SECURITY_SELINUX_BOOTPARAM=y; request it in the kernel's symbols", v.Name)
			}
			continue
		}
		if contains(cmd, "selinux=0") {
			ps.errorf(path, "variant %q: selinux = %q but its command line has selinux=0", v.Name, v.SELinux)
		}
		if !selinuxStarts(cmd, v.Symbols["LSM"]) {
			ps.errorf(path, "variant %q: selinux = %q needs SELinux among the LSMs the kernel starts, and tinyconfig's CONFIG_LSM does not list it: add security=selinux (or lsm=...,selinux) to the variant's cmdline", v.Name, v.SELinux)
		}
		if p.SELinuxPolicy == nil {
			ps.errorf(path, "variant %q: selinux = %q loads a policy: name one in [selinux] policy (shipped: %s)", v.Name, v.SELinux, strings.Join(selinux.Shipped(), ", "))
		}
		if v.Symbols["SECURITY_SELINUX_DEVELOP"] != "y" {
			ps.errorf(path, "variant %q: selinux = %q is set through /sys/fs/selinux/enforce, which is writable only with SECURITY_SELINUX_DEVELOP=y; request it in the kernel's symbols", v.Name, v.SELinux)
		}
	}
	if p.SELinuxPolicy != nil && !used {
		ps.warnf("selinux.policy", "[selinux] policy is set but no variant sets selinux = \"enforcing\" or \"permissive\": it is never loaded")
	}
}

func newPolicy(name, path string, src []byte) *Policy {
	sum := sha256.Sum256(src)
	return &Policy{Name: name, Path: path, SHA256: hex.EncodeToString(sum[:]), Source: src}
}

// tables reads [[table]]: the thread's tables the report reproduces.
func (ps *parser) tables(p *Pipeline, r *rawPipeline) {
	names := map[string]bool{}
	for i, rt := range r.Table {
		path := fmt.Sprintf("table[%d]", i)
		t := Table{Name: strings.TrimSpace(rt.Name), Columns: rt.Columns}
		if t.Name == "" {
			ps.errorf(path+".name", "a table needs a name (its title in the report)")
		} else if names[t.Name] {
			ps.errorf(path+".name", "table %q is listed twice", t.Name)
		}
		names[t.Name] = true
		if len(t.Columns) == 0 {
			ps.errorf(path+".columns", "table %q needs columns: the variants whose means it shows", t.Name)
		}
		seen := map[string]bool{}
		for _, c := range t.Columns {
			if p.Variant(c) == nil {
				ps.errorf(path+".columns", "table %q: unknown variant %q (have %s)", t.Name, c, variantNames(p))
			} else if seen[c] {
				ps.errorf(path+".columns", "table %q names %q twice", t.Name, c)
			}
			seen[c] = true
		}
		for _, b := range rt.Benchmarks {
			found := false
			for _, pb := range p.Benchmarks {
				found = found || strings.HasPrefix(pb.Guest().Label(), b)
			}
			if !found {
				ps.errorf(path+".benchmarks", "table %q: no benchmark of the pipeline starts with %q", t.Name, b)
			}
		}
		t.Benchmarks = rt.Benchmarks
		if ch := rt.Change; ch != (rawChange{}) {
			c := Comparison{Base: ch.Base, Other: ch.Other}
			switch {
			case ch.Name == "":
				ps.errorf(path+".change", "table %q: the change column needs a name (\"SELinux tax\", \"change %%\")", t.Name)
			case !containsComparison(p.Comparisons, c):
				ps.errorf(path+".change", "table %q: change %s -> %s is not one of the pipeline's comparisons; add [[comparison]] base = %q other = %q", t.Name, c.Base, c.Other, c.Base, c.Other)
			default:
				t.Change = &TableChange{Name: ch.Name, Base: ch.Base, Other: ch.Other}
			}
		}
		p.Tables = append(p.Tables, t)
	}
}

func containsComparison(list []Comparison, c Comparison) bool {
	for _, x := range list {
		if x == c {
			return true
		}
	}
	return false
}

// compare reads [compare]: the threshold T, a percentage ("1%").
func (ps *parser) compare(p *Pipeline, r *rawPipeline) {
	p.Compare.Threshold = stats.DefaultThreshold
	if p.Deterministic {
		p.Compare.Threshold = stats.DefaultDeterministicThreshold
	}
	v := r.Compare.Threshold
	if v == nil {
		return
	}
	s, ok := v.(string)
	if !ok {
		ps.errorf("compare.threshold", "compare.threshold = %v: want a string with a percent sign, like \"1%%\" (a bare number is ambiguous: 0.01 or 1%%?)", v)
		return
	}
	num, pct := strings.CutSuffix(strings.TrimSpace(s), "%")
	t, err := strconv.ParseFloat(strings.TrimSpace(num), 64)
	switch {
	case !pct || err != nil:
		ps.errorf("compare.threshold", "compare.threshold = %q: want a percentage like \"1%%\" or \"0.5%%\"", s)
	case !(t > 0 && t < 100):
		ps.errorf("compare.threshold", "compare.threshold = %q: want more than 0%% and less than 100%%", s)
	default:
		p.Compare.Threshold = t
	}
}

// file_ resolves a path relative to the pipeline's directory and checks
// that it exists.
func (ps *parser) file_(f, path, what string) (string, bool) {
	abs := f
	if !filepath.IsAbs(f) {
		if ps.dir == "" {
			ps.errorf(path, "%s %q: a builtin pipeline can only name shipped boot configs (%s); copy the pipeline to use files", what, f, strings.Join(BootConfigs, ", "))
			return "", false
		}
		abs = filepath.Join(ps.dir, f)
	}
	st, err := os.Stat(abs)
	if err != nil || st.IsDir() {
		ps.errorf(path, "%s %q: no such file (looked at %s); shipped boot configs: %s", what, f, abs, strings.Join(BootConfigs, ", "))
		return "", false
	}
	return abs, true
}

// selinuxStarts says whether a kernel booted with command line cmd
// (fields) starts SELinux: security=selinux adds it to the LSMs (Linux
// 5.1 and later), lsm= replaces CONFIG_LSM, and otherwise the kernel's
// CONFIG_LSM (lsm, when the pipeline sets it) decides.
func selinuxStarts(cmd []string, lsm string) bool {
	list := strings.Trim(lsm, `"`)
	for _, f := range cmd {
		if f == "security=selinux" {
			return true
		}
		if v, ok := strings.CutPrefix(f, "lsm="); ok {
			list = v
		}
	}
	return contains(strings.Split(list, ","), "selinux")
}

func contains(list []string, s string) bool {
	for _, e := range list {
		if e == s {
			return true
		}
	}
	return false
}

func (ps *parser) target(p *Pipeline, r *rawTarget) {
	t := Target{Kind: r.Kind, Host: r.Host, BootHook: r.BootHook, SMP: 1, MemoryMiB: 512, Timeout: 10 * time.Minute, KVM: r.KVM, Cmdline: strings.Join(strings.Fields(r.Cmdline), " ")}
	if t.Kind == "" {
		t.Kind = "qemu"
		if strings.HasPrefix(t.Host, "ssh://") {
			t.Kind = "ssh"
		}
	}
	switch t.Kind {
	case "qemu":
		if t.Host != "" {
			ps.errorf("target.host", "target.host is for kind = \"ssh\"; this target is qemu")
		}
		if t.BootHook != "" {
			ps.errorf("target.boot_hook", "target.boot_hook is for kind = \"ssh\"")
		}
		if r.Boot != "" || r.Initrd != "" || r.Identity != "" || len(r.SSHOpts) > 0 {
			ps.errorf("target.boot", "target.boot, initrd, identity and ssh_options are for kind = \"ssh\" (QEMU boots every kernel itself)")
		}
		if r.Console != "" {
			ps.errorf("target.console_log", "target.console_log is for kind = \"ssh\" (QEMU's console is read by patcheval itself)")
		}
	case "ssh":
		if !strings.HasPrefix(t.Host, "ssh://") || len(t.Host) <= len("ssh://") {
			ps.errorf("target.host", "an ssh target needs host = \"ssh://user@host[:port]\", got %q", t.Host)
		}
		ps.sshBoot(&t, r)
	default:
		ps.errorf("target.kind", "target.kind %q: want \"qemu\" or \"ssh\"", t.Kind)
	}
	if r.MaxLost != nil {
		t.MaxLostBoots = *r.MaxLost
		if t.MaxLostBoots < 1 || t.MaxLostBoots > 1000 {
			ps.errorf("target.max_lost_boots", "target.max_lost_boots = %d: want 1..1000 boots in a row that may fail for infrastructure reasons before the evaluation stops", t.MaxLostBoots)
		}
	}
	if r.SMP != nil {
		t.SMP = *r.SMP
		if t.SMP < 1 || t.SMP > 1024 {
			ps.errorf("target.smp", "target.smp = %d: want 1..1024 CPUs", t.SMP)
		}
	}
	switch m := r.Memory.(type) {
	case nil:
	case int64:
		t.MemoryMiB = int(m)
	case string:
		n, err := parseMemory(m)
		if err != nil {
			ps.errorf("target.memory", "target.memory %q: %v", m, err)
		}
		t.MemoryMiB = n
	default:
		ps.errorf("target.memory", "target.memory: want \"512M\", \"2G\" or a number of MiB, found %v", m)
	}
	if r.Memory != nil && t.MemoryMiB < 64 {
		ps.errorf("target.memory", "target.memory = %d MiB: a kernel and the agent need at least 64 MiB", t.MemoryMiB)
	}
	if r.Timeout != "" {
		d, err := time.ParseDuration(r.Timeout)
		if err != nil || d <= 0 {
			ps.errorf("target.timeout", "target.timeout %q: want a positive duration like \"5m\" or \"90s\"", r.Timeout)
		} else {
			t.Timeout = d
		}
	}
	switch t.KVM {
	case "":
		t.KVM = "auto"
	case "auto", "on", "off":
	default:
		ps.errorf("target.kvm", "target.kvm %q: want \"auto\", \"on\" or \"off\"", t.KVM)
	}
	if t.Kind == "ssh" && (r.SMP != nil || r.Memory != nil || r.KVM != "") {
		ps.warnf("target", "smp, memory and kvm are QEMU settings; an ssh target ignores them")
	}
	p.Target = t
}

func parseMemory(s string) (int, error) {
	s = strings.TrimSpace(strings.ToUpper(s))
	s = strings.TrimSuffix(strings.TrimSuffix(s, "B"), "I")
	mult := 1
	switch {
	case strings.HasSuffix(s, "G"):
		mult, s = 1024, s[:len(s)-1]
	case strings.HasSuffix(s, "M"):
		s = s[:len(s)-1]
	}
	n, err := strconv.Atoi(s)
	if err != nil || n <= 0 || n > 1<<20 {
		return 0, errors.New("want a size like \"512M\" or \"2G\"")
	}
	return n * mult, nil
}

func (ps *parser) variants(p *Pipeline, r *rawPipeline) {
	if len(r.Variant) == 0 {
		ps.errorf("", "no variants: add at least one [[variant]] with a name")
		return
	}
	first := map[string]int{} // name -> index
	for i, rv := range r.Variant {
		path := fmt.Sprintf("variant[%d]", i)
		v := Variant{Name: rv.Name, Description: strings.TrimSpace(rv.Description), Kernel: rv.Name,
			Cmdline: strings.Join(strings.Fields(rv.Cmdline), " "), SchedPreempt: rv.SchedPreempt, CPUs: rv.CPUs,
			ApplySeries: p.Series.Apply, SELinux: rv.SELinux, Line: ps.ix.line(path)}
		switch {
		case v.Name == "":
			ps.errorf(path, "variant without a name")
		case !reName.MatchString(v.Name):
			ps.errorf(path+".name", "variant name %q: use letters, digits and _.+-@= (no spaces or /)", v.Name)
		}
		if j, dup := first[v.Name]; dup && v.Name != "" {
			ps.errorf(path+".name", "duplicate variant name %q (first at line %d)", v.Name, ps.ix.line(fmt.Sprintf("variant[%d]", j)))
		} else {
			first[v.Name] = i
		}
		if rv.ApplySeries != nil {
			v.ApplySeries = *rv.ApplySeries
		}
		ps.variantTree(&v, rv, path)
		own := ps.symbols(path+".symbols", rv.Symbols)
		v.Symbols = map[string]string{}
		for k, s := range p.Symbols {
			v.Symbols[k] = s
		}
		for k, s := range own {
			v.Symbols[k] = s
		}
		if len(rv.Sysctls) > 0 {
			v.Sysctls = map[string]string{}
			for k, val := range rv.Sysctls {
				s, ok := kconfigValue(val)
				if b, isBool := val.(bool); isBool {
					s = map[bool]string{true: "1", false: "0"}[b]
				}
				if !reSysctl.MatchString(k) || strings.Contains(k, "..") || !ok {
					ps.errorf(join(path+".sysctls", k), "sysctl %q = %v: want a name like kernel.printk and a string or number", k, val)
					continue
				}
				v.Sysctls[k] = s
			}
		}
		if v.CPUs != "" && !reCPUs.MatchString(v.CPUs) {
			ps.errorf(path+".cpus", "cpus %q: want a CPU list like taskset -c takes (\"0\", \"0-7\", \"0,2\")", v.CPUs)
		}
		if v.SchedPreempt != "" && !contains(schedPreemptModes, v.SchedPreempt) {
			ps.errorf(path+".sched_preempt", "sched_preempt %q: want one of %s", v.SchedPreempt, strings.Join(schedPreemptModes, ", "))
		}
		p.Variants = append(p.Variants, v)
	}
	// Runtime-only variants share another variant's kernel.
	for i, rv := range r.Variant {
		if rv.Kernel == "" {
			continue
		}
		path := fmt.Sprintf("variant[%d]", i)
		v := &p.Variants[i]
		j, ok := first[rv.Kernel]
		switch {
		case !ok:
			ps.errorf(path+".kernel", "kernel = %q: no such variant (have %s)", rv.Kernel, variantNames(p))
			continue
		case j == i:
			ps.errorf(path+".kernel", "variant %q names itself as its kernel", v.Name)
			continue
		case r.Variant[j].Kernel != "":
			ps.errorf(path+".kernel", "kernel = %q: that variant boots %q's kernel itself; name %q", rv.Kernel, r.Variant[j].Kernel, r.Variant[j].Kernel)
			continue
		}
		if len(rv.Symbols) > 0 {
			ps.errorf(path+".symbols", "variant %q boots %q's kernel (kernel = ...) and cannot set Kconfig symbols; only command line and runtime knobs", v.Name, rv.Kernel)
		}
		if rv.ApplySeries != nil && *rv.ApplySeries != p.Variants[j].ApplySeries {
			ps.errorf(path+".apply_series", "variant %q boots %q's kernel, whose apply_series is %v", v.Name, rv.Kernel, p.Variants[j].ApplySeries)
		}
		if rv.Ref != "" || len(rv.Revert) > 0 {
			ps.errorf(path+".kernel", "variant %q boots %q's kernel (kernel = ...) and cannot set ref or revert: they make another kernel", v.Name, rv.Kernel)
		}
		v.Kernel = rv.Kernel
		v.ApplySeries = p.Variants[j].ApplySeries
		v.Symbols = p.Variants[j].Symbols
		v.Ref, v.Revert = p.Variants[j].Ref, p.Variants[j].Revert
	}
	// The runtime preemption switch exists only in dynamic-preempt kernels.
	for i, v := range p.Variants {
		if v.SchedPreempt == "" {
			continue
		}
		if v.Symbols["PREEMPT_DYNAMIC"] != "y" {
			ps.errorf(fmt.Sprintf("variant[%d].sched_preempt", i),
				"variant %q: sched_preempt = %q needs a kernel with PREEMPT_DYNAMIC=y (/sys/kernel/debug/sched/preempt exists only there); its kernel %q does not request it",
				v.Name, v.SchedPreempt, v.Kernel)
		}
		if v.SchedPreempt == "lazy" && strings.HasPrefix(p.Tree.Base, "v6.1") {
			ps.warnf(fmt.Sprintf("variant[%d].sched_preempt", i), "variant %q: lazy preemption does not exist in 6.1; the boot will report an error", v.Name)
		}
		if v.Symbols["DEBUG_FS"] == "n" {
			ps.errorf(fmt.Sprintf("variant[%d].sched_preempt", i), "variant %q: sched_preempt is written through debugfs, but DEBUG_FS=n", v.Name)
		}
	}
}

func variantNames(p *Pipeline) string {
	n := make([]string, len(p.Variants))
	for i, v := range p.Variants {
		n[i] = v.Name
	}
	return strings.Join(n, ", ")
}

// benchAliases maps accepted spellings to agent benchmark names.
var benchAliases = map[string]string{"rcu_sync": guest.BenchRCU, "synchronize_rcu": guest.BenchRCU, "kill_child": guest.BenchKillChild}

func (ps *parser) benchmarks(p *Pipeline, r *rawPipeline) {
	if len(r.Benchmark) == 0 {
		ps.errorf("", "no benchmarks: add at least one [[benchmark]] (%s)", strings.Join(guest.Benchmarks, ", "))
		return
	}
	seen := map[string]bool{}
	for i, rb := range r.Benchmark {
		path := fmt.Sprintf("benchmark[%d]", i)
		b := Benchmark{Name: rb.Name}
		if a, ok := benchAliases[b.Name]; ok {
			b.Name = a
		}
		if guest.IsTool(b.Name) {
			ps.toolBenchmark(p, path, rb, b)
			continue
		}
		if !contains(guest.Benchmarks, b.Name) {
			ps.errorf(path+".name", "unknown benchmark %q (the agent has %s; the guest's tools: %s)", rb.Name,
				strings.Join(guest.Benchmarks, ", "), strings.Join(guest.ToolBenchmarks, ", "))
			continue
		}
		if len(rb.Args) > 0 {
			ps.errorf(path+".args", "benchmark %s is an agent loop without arguments (only %s take args)", b.Name, strings.Join(guest.ToolBenchmarks, " and "))
		}
		if seen[b.Name] {
			ps.errorf(path+".name", "benchmark %q is listed twice", b.Name)
		}
		seen[b.Name] = true
		positive := func(v *int, key string) int {
			if v == nil {
				return 0
			}
			if *v < 1 {
				ps.errorf(path+"."+key, "benchmark %s: %s = %d: want at least 1", b.Name, key, *v)
			}
			return *v
		}
		if b.Name == guest.BenchRCU {
			if rb.Iterations != nil {
				ps.errorf(path+".iterations", "benchmark rcu is shaped by calls and runs (e.g. calls = 100, runs = 10), not iterations")
			}
			b.Calls, b.Runs = positive(rb.Calls, "calls"), positive(rb.Runs, "runs")
		} else {
			if rb.Calls != nil {
				ps.errorf(path+".calls", "benchmark %s has no calls parameter (only rcu does); use iterations", b.Name)
			}
			if rb.Runs != nil {
				ps.errorf(path+".runs", "benchmark %s has no runs parameter (only rcu does); use iterations, or repeats for more measurements", b.Name)
			}
			b.Iterations = positive(rb.Iterations, "iterations")
		}
		p.Benchmarks = append(p.Benchmarks, b)
	}
}

// toolBenchmark validates a stress-ng or perf-bench benchmark: the
// tool's own arguments, nothing the agent adds itself, and the agent
// loop's parameters refused.
func (ps *parser) toolBenchmark(p *Pipeline, path string, rb rawBenchmark, b Benchmark) {
	if len(rb.Args) == 0 {
		ex := `["--kill", "1", "-t", "23"]`
		if b.Name == guest.BenchPerfBench {
			ex = `["syscall", "basic", "-l", "200000"]`
		}
		ps.errorf(path+".args", "benchmark %s needs its arguments, e.g. args = %s", b.Name, ex)
		return
	}
	for _, k := range []struct {
		v   *int
		key string
	}{{rb.Iterations, "iterations"}, {rb.Calls, "calls"}, {rb.Runs, "runs"}} {
		if k.v != nil {
			ps.errorf(path+"."+k.key, "benchmark %s is shaped by its args (the tool's own options), not %s", b.Name, k.key)
		}
	}
	for _, a := range rb.Args {
		if b.Name == guest.BenchStressNG && (a == "--yaml" || a == "-Y" || a == "--metrics-brief" || a == "--metrics" || a == "-M") {
			ps.errorf(path+".args", "stress-ng %s: the agent adds --metrics-brief --yaml itself and parses them", a)
		}
	}
	if b.Name == guest.BenchPerfBench && len(rb.Args) >= 2 && rb.Args[0] == "syscall" && rb.Args[1] != "basic" {
		ps.warnf(path+".args", "perf bench syscall %s needs perf 6.3 or later; the guest's perf is Debian bookworm's 6.1, which only has syscall basic", rb.Args[1])
	}
	b.Args = rb.Args
	for _, o := range p.Benchmarks {
		if o.Guest().Label() == b.Guest().Label() {
			ps.errorf(path+".args", "benchmark %q is listed twice", b.Guest().Label())
		}
	}
	p.Benchmarks = append(p.Benchmarks, b)
}

func (ps *parser) comparisons(p *Pipeline, r *rawPipeline) {
	known := func(name, path string) bool {
		if p.Variant(name) != nil {
			return true
		}
		if name == "" {
			ps.errorf(path, "missing variant name")
		} else {
			ps.errorf(path, "unknown variant %q (have %s)", name, variantNames(p))
		}
		return false
	}
	seen := map[Comparison]bool{}
	for i, rc := range r.Comparison {
		path := fmt.Sprintf("comparison[%d]", i)
		okB, okO := known(rc.Base, path+".base"), known(rc.Other, path+".other")
		if !okB || !okO {
			continue
		}
		c := Comparison{Base: rc.Base, Other: rc.Other}
		if c.Base == c.Other {
			ps.errorf(path, "comparison of %q with itself", c.Base)
			continue
		}
		if seen[c] {
			ps.errorf(path, "comparison %s -> %s is listed twice", c.Base, c.Other)
			continue
		}
		seen[c] = true
		p.Comparisons = append(p.Comparisons, c)
	}
	if len(r.Comparison) == 0 && len(p.Variants) > 1 {
		// Default: every variant against the first.
		for _, v := range p.Variants[1:] {
			p.Comparisons = append(p.Comparisons, Comparison{Base: p.Variants[0].Name, Other: v.Name})
		}
	}
	for i, rc := range r.Chain {
		path := fmt.Sprintf("chain[%d]", i)
		if len(rc.Variants) < 2 {
			ps.errorf(path+".variants", "a chain needs at least two variants (A -> B), got %d", len(rc.Variants))
			continue
		}
		ok := true
		dup := map[string]bool{}
		for _, n := range rc.Variants {
			if !known(n, path+".variants") {
				ok = false
			} else if dup[n] {
				ps.errorf(path+".variants", "chain names %q twice", n)
				ok = false
			}
			dup[n] = true
		}
		if ok {
			p.Chains = append(p.Chains, Chain{Name: rc.Name, Variants: append([]string(nil), rc.Variants...)})
		}
	}
}

// Threshold is T for the pipeline's verdicts and adaptive sampling
// ([compare] threshold; a Pipeline built by hand gets the defaults).
func (p *Pipeline) Threshold() float64 {
	switch {
	case p.Compare.Threshold > 0:
		return p.Compare.Threshold
	case p.Deterministic:
		return stats.DefaultDeterministicThreshold
	}
	return stats.DefaultThreshold
}

// layout reads [compare] layout and adds, for every compared variant, its
// function-aligned rebuild (NAME+AlignSuffix: the same variant with
// AlignSymbols; a runtime-only variant boots its kernel's aligned
// rebuild) and, for every comparison, the same comparison between the
// aligned rebuilds. A deterministic pipeline has no use for it: -icount
// counts instructions, not cache lines.
func (ps *parser) layout(p *Pipeline, r *rawPipeline) {
	if r.Compare.Layout == nil || !*r.Compare.Layout {
		return
	}
	if p.Deterministic {
		ps.errorf("compare.layout", "compare.layout needs a target measured in real time: a deterministic pipeline counts instructions, which code layout does not change")
		return
	}
	if len(p.Comparisons) == 0 {
		ps.errorf("compare.layout", "compare.layout: there is no comparison to check")
		return
	}
	for _, a := range p.Arches {
		if !LayoutArches[a] {
			ps.errorf("compare.layout", "compare.layout: %s has no CONFIG_DEBUG_FORCE_FUNCTION_ALIGN_64B (lib/Kconfig.debug offers it on x86_64, arm64 and powerpc only)", a)
			return
		}
	}
	p.Compare.Layout = true
	aligned := map[string]bool{}
	var add func(name string)
	add = func(name string) {
		if aligned[name] {
			return
		}
		aligned[name] = true
		v := p.Variant(name)
		if v == nil {
			return
		}
		a := *v
		a.Name, a.AlignedOf, a.Kernel = name+AlignSuffix, name, v.Kernel+AlignSuffix
		a.Symbols = map[string]string{}
		for k, s := range v.Symbols {
			a.Symbols[k] = s
		}
		for k, s := range AlignSymbols {
			if old, ok := v.Symbols[k]; ok && old != s {
				ps.errorf("compare.layout", "compare.layout: variant %q sets %s=%s; its aligned rebuild needs %s=%s", name, k, old, k, s)
			}
			a.Symbols[k] = s
		}
		if p.Variant(a.Name) != nil {
			ps.errorf("compare.layout", "compare.layout: a variant is already called %q", a.Name)
			return
		}
		p.Variants = append(p.Variants, a)
		if v.Kernel != name {
			add(v.Kernel)
		}
	}
	n := len(p.Comparisons)
	for _, c := range p.Comparisons[:n] {
		add(c.Base)
		add(c.Other)
		p.Comparisons = append(p.Comparisons, Comparison{Base: c.Base + AlignSuffix, Other: c.Other + AlignSuffix, Aligned: true})
	}
	if msg := p.CheckRuns(p.Repeats.Boots); msg != "" {
		ps.errorf("compare.layout", "compare.layout doubles the variants: %s", msg)
	}
}
