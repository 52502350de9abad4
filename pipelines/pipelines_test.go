package pipelines

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/patcheval/patcheval/evaluate/guest"
	"github.com/patcheval/patcheval/internal/fail"
)

func TestShippedPipelinesLoad(t *testing.T) {
	names := List()
	if !reflect.DeepEqual(names, []string{"arm64-kill", "bridge-loop", "ppc-preempt-dynamic", "ppc-preempt-lazy", "ppc-preempt-releases", "rcu-gp-qs", "rcu-sync-latency", "selinux-tax"}) {
		t.Fatalf("List() = %v", names)
	}
	for _, n := range names {
		p, err := Builtin(n)
		if err != nil {
			t.Fatalf("builtin %s: %v", n, err)
		}
		if p.Name != n || p.Description == "" || len(p.Warnings) > 0 {
			t.Errorf("%s: name %q, description %q, warnings %v", n, p.Name, p.Description, p.Warnings)
		}
		// The same file loads from disk too (the CLI's --pipeline path).
		q, err := Load(n + ".toml")
		if err != nil {
			t.Fatalf("Load %s.toml: %v", n, err)
		}
		if q.Hash() != p.Hash() {
			t.Errorf("%s: hash differs between builtin and file", n)
		}
		src, _ := BuiltinSource(n)
		if !strings.HasPrefix(string(src), "# "+n+" — reproduces") {
			t.Errorf("%s: the file must start by saying what it reproduces", n)
		}
		if !p.Deterministic || p.Target.KVM != "off" || p.Tree.Base != "" || p.Tree.Path != "" {
			t.Errorf("%s: deterministic %v kvm %q tree %+v", n, p.Deterministic, p.Target.KVM, p.Tree)
		}
		if got := len(p.Runs()); got != p.Repeats.Boots*len(p.Variants) {
			t.Errorf("%s: %d runs", n, got)
		}
	}
}

// TestSeedPipelines checks the plans of seed 004's arm64 pipeline and
// seed 003's bridge loop: what they build (arm64's voluntary kernel is the
// boot kernel's own recipe; BRIDGE is the bridge pipeline's own symbol,
// not the shared boot config's), how they pin, and their tables.
func TestSeedPipelines(t *testing.T) {
	a, err := Builtin("arm64-kill")
	if err != nil {
		t.Fatal(err)
	}
	builds := a.Builds()
	if len(builds) != 2 || builds[0].Arch != "arm64" || len(builds[0].Symbols) != 0 || builds[1].Symbols["PREEMPT_DYNAMIC"] != "y" ||
		strings.Join(builds[1].Variants, ",") != "vol-dynamic,vol-dynamic@cpu0" || builds[0].Fragments[0].Name != "arm64-virt" {
		t.Errorf("arm64-kill builds %+v", builds)
	}
	pins := map[string]string{}
	for _, r := range a.Runs() {
		pins[r.Name] = r.Plan.CPUs
	}
	if a.Target.SMP != 2 || pins["vol-dynamic@cpu0"] != "0" || pins["vol-nodynamic@cpu0"] != "0" || pins["vol-dynamic"] != "" {
		t.Errorf("arm64-kill: smp %d, pins %v", a.Target.SMP, pins)
	}
	var labels []string
	for _, b := range a.Benchmarks {
		labels = append(labels, b.Guest().Label())
	}
	if got := strings.Join(labels, " | "); got != "kill | kill-child | getppid | stress-ng --kill 1 -t 5" {
		t.Errorf("arm64-kill benchmarks: %s", got)
	}
	if len(a.Tables) != 3 || a.Tables[0].Change != nil || a.Tables[2].Change.Base != "vol-nodynamic@cpu0" {
		t.Errorf("arm64-kill tables %+v", a.Tables)
	}

	b, err := Builtin("bridge-loop")
	if err != nil {
		t.Fatal(err)
	}
	if bs := b.Builds(); len(bs) != 1 || !reflect.DeepEqual(bs[0].Symbols, map[string]string{"BRIDGE": "y"}) || bs[0].Fragments[0].Name != "ppc64le-pseries" {
		t.Errorf("bridge-loop builds %+v", bs)
	}
	boot, err := os.ReadFile(filepath.Join("..", "build", "configs", "ppc64le-pseries.config"))
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(boot), "CONFIG_BRIDGE") {
		t.Error("BRIDGE belongs to the bridge pipeline, not to the shared boot config every kernel is built from")
	}
	r := b.Runs()[1]
	if r.Name != "fqs1" || !reflect.DeepEqual(r.Plan.Benchmarks[0], guest.Bench{Name: "bridge-sh", Ops: 100}) || r.Plan.Iterations != 3 || b.Target.SMP != 2 ||
		!strings.Contains(r.Cmdline, "rcutree.jiffies_till_first_fqs=1") {
		t.Errorf("bridge-loop run %+v", r)
	}
}

func TestPPCPreemptDynamic(t *testing.T) {
	p, err := Builtin("ppc-preempt-dynamic")
	if err != nil {
		t.Fatal(err)
	}
	if p.Series.MsgID != "20261102093000.4121-0-tester@example.org" || !p.NeedsSeries() {
		t.Errorf("series: %+v", p.Series)
	}
	if !reflect.DeepEqual(p.Arches, []string{"ppc64le"}) || p.BaseConfig != "tinyconfig" ||
		!reflect.DeepEqual(p.Fragments, []Fragment{{Name: "ppc64le-pseries"}}) {
		t.Errorf("build: %v %q %v", p.Arches, p.BaseConfig, p.Fragments)
	}
	want := map[string]map[string]string{
		"voluntary":          {"PREEMPT_VOLUNTARY": "y", "PREEMPT_DYNAMIC": "n"},
		"voluntary+dyn":      {"PREEMPT_VOLUNTARY": "y", "PREEMPT_DYNAMIC": "y"},
		"voluntary+dyn@full": {"PREEMPT_VOLUNTARY": "y", "PREEMPT_DYNAMIC": "y"},
		"full":               {"PREEMPT": "y", "PREEMPT_VOLUNTARY": "n", "PREEMPT_DYNAMIC": "n"},
	}
	for name, syms := range want {
		v := p.Variant(name)
		if v == nil || !reflect.DeepEqual(v.Symbols, syms) || !v.ApplySeries {
			t.Errorf("variant %s: %+v", name, v)
		}
	}
	if v := p.Variant("voluntary+dyn@full"); v.SchedPreempt != "full" || v.Kernel != "voluntary+dyn" {
		t.Errorf("runtime switch variant: %+v", v)
	}
	builds := p.Builds()
	if len(builds) != 3 {
		t.Fatalf("builds: %+v", builds)
	}
	if !reflect.DeepEqual(builds[1].Variants, []string{"voluntary+dyn", "voluntary+dyn@full"}) || builds[1].Variant != "voluntary+dyn" {
		t.Errorf("shared build: %+v", builds[1])
	}
	if !reflect.DeepEqual(p.Comparisons, []Comparison{{Base: "voluntary", Other: "voluntary+dyn"}, {Base: "voluntary", Other: "full"}, {Base: "voluntary+dyn", Other: "voluntary+dyn@full"}}) {
		t.Errorf("comparisons: %v", p.Comparisons)
	}
	if len(p.Chains) != 1 || !reflect.DeepEqual(p.Chains[0].Variants, []string{"voluntary", "voluntary+dyn", "full"}) {
		t.Errorf("chains: %v", p.Chains)
	}
	runs := p.Runs()
	// Interleaved: A B C D A B C D ...
	var order []string
	for _, r := range runs[:8] {
		order = append(order, fmt.Sprintf("%s#%d", r.Variant, r.Boot))
	}
	if strings.Join(order, " ") != "voluntary#0 voluntary+dyn#0 voluntary+dyn@full#0 full#0 voluntary#1 voluntary+dyn#1 voluntary+dyn@full#1 full#1" {
		t.Errorf("run order: %v", order)
	}
	r := runs[2]
	if r.BuildKey != builds[1].Key || r.Plan.Preempt != "full" || !r.Deterministic || r.Target.SMP != 1 || r.Target.MemoryMiB != 512 {
		t.Errorf("run plan: %+v", r)
	}
	wantBench := []guest.Bench{{Name: "stress-ng", Args: []string{"--kill", "1", "-t", "2"}}, {Name: "kill", Ops: 200000}, {Name: "getppid", Ops: 200000}}
	if !reflect.DeepEqual(r.Plan.Benchmarks, wantBench) || r.Plan.Iterations != 1 {
		t.Errorf("plan benchmarks: %+v", r.Plan)
	}
}

func TestSelinuxAndRCU(t *testing.T) {
	s, err := Builtin("selinux-tax")
	if err != nil {
		t.Fatal(err)
	}
	if s.NeedsSeries() || len(s.Builds()) != 1 {
		t.Errorf("selinux-tax: needs series %v, builds %v", s.NeedsSeries(), s.Builds())
	}
	if s.Variant("disabled").Cmdline != "security=selinux selinux=0" || s.Variant("enforcing").Cmdline != "security=selinux" ||
		s.Variant("permissive").Cmdline != "security=selinux" || s.Variant("permissive").Kernel != "disabled" {
		t.Errorf("selinux variants: %+v", s.Variants)
	}
	for _, sym := range []string{"SECURITY_SELINUX", "SECURITY_SELINUX_BOOTPARAM", "SECURITY_SELINUX_DEVELOP"} {
		if s.Variant("enforcing").Symbols[sym] != "y" {
			t.Errorf("selinux-tax's kernel needs %s=y", sym)
		}
	}
	if s.SELinuxPolicy == nil || s.SELinuxPolicy.Label() != "minimal" || len(s.SELinuxPolicy.Source) == 0 || s.SELinuxPolicy.SHA256 == "" {
		t.Fatalf("selinux policy %+v", s.SELinuxPolicy)
	}
	// The stages read the pipeline as the first one stored it (JSON):
	// the boot stage compiles the policy from that.
	stored, err := json.Marshal(s)
	if err != nil {
		t.Fatal(err)
	}
	var back Pipeline
	if err := json.Unmarshal(stored, &back); err != nil {
		t.Fatal(err)
	}
	if back.SELinuxPolicy == nil || !bytes.Equal(back.SELinuxPolicy.Source, s.SELinuxPolicy.Source) {
		t.Fatalf("the stored pipeline lost its policy's source: %+v", back.SELinuxPolicy)
	}
	modes := map[string]guest.SELinux{}
	for _, r := range s.Runs() {
		if r.Plan.SELinux == nil {
			t.Fatalf("boot %v plans no SELinux mode", r.BootKey)
		}
		modes[r.Name] = *r.Plan.SELinux
	}
	want := map[string]guest.SELinux{"disabled": {Mode: "disabled"}, "enforcing": {Mode: "enforcing", PolicyName: "minimal"},
		"permissive": {Mode: "permissive", PolicyName: "minimal"}}
	if !reflect.DeepEqual(modes, want) {
		t.Errorf("planned SELinux modes %+v, want %+v", modes, want)
	}
	wantTable := []Table{{Name: "SELinux tax", Columns: []string{"enforcing", "permissive", "disabled"},
		Change: &TableChange{Name: "SELinux tax", Base: "disabled", Other: "enforcing"}}}
	if !reflect.DeepEqual(s.Tables, wantTable) {
		t.Errorf("tables %+v", s.Tables)
	}
	// The policy's text is part of the evaluation key, the table is not.
	c := *s
	c.Tables = nil
	pol := *s.SELinuxPolicy
	pol.SHA256 = "other"
	if c.Hash() != s.Hash() {
		t.Error("a table changed the evaluation key")
	}
	c.SELinuxPolicy = &pol
	if c.Hash() == s.Hash() {
		t.Error("another policy kept the evaluation key")
	}

	r, err := Builtin("rcu-sync-latency")
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(r.Benchmarks, []Benchmark{{Name: "rcu", Calls: 100, Runs: 10}}) {
		t.Errorf("rcu benchmark: %+v", r.Benchmarks)
	}
	if r.Target.SMP < 2 || r.Variant("base").Symbols["MEMBARRIER"] != "y" {
		t.Error("membarrier(GLOBAL) is synchronize_rcu() only with MEMBARRIER=y and more than one CPU")
	}
	if r.Variant("expedited").Cmdline != "rcupdate.rcu_expedited=1" || len(r.Builds()) != 1 {
		t.Errorf("rcu variants: %+v", r.Variants)
	}
}

// The boot config names a pipeline may use exist in build/configs.
func TestBootConfigNamesExist(t *testing.T) {
	for _, n := range BootConfigs {
		if _, err := os.Stat(filepath.Join("..", "build", "configs", n+".config")); err != nil {
			t.Errorf("boot config %s: %v", n, err)
		}
	}
}

const valid = `name = "t"
deterministic = true

[build]
arch = "ppc64le"
fragments = ["ppc64le-pseries"]

[[variant]]
name = "a"
symbols = { PREEMPT_VOLUNTARY = "y" }

[[variant]]
name = "b"
symbols = { PREEMPT_DYNAMIC = true }

[[benchmark]]
name = "kill"
iterations = 1000

[repeats]
boots = 2
`

// TestSSHBootMethods: an ssh target that can boot kernels may compare
// several; one kernel needs no boot method (the running one is verified).
func TestSSHBootMethods(t *testing.T) {
	nd := strings.Replace(valid, "deterministic = true", "deterministic = false\n[target]\nhost = \"ssh://root@box\"", 1)
	for extra, want := range map[string]string{"\nboot = \"kexec\"": "kexec", "\nboot_hook = \"ipmitool power cycle\"": "hook"} {
		p, err := Parse([]byte(strings.Replace(nd, "ssh://root@box\"", "ssh://root@box\""+extra, 1)), "k.toml")
		if err != nil || p.Target.Boot != want {
			t.Errorf("%s: %v, boot %q", extra, err, p.Target.Boot)
		}
	}
	// The console log is resolved against the pipeline's directory; it
	// need not exist before the first boot.
	dir := t.TempDir()
	file := filepath.Join(dir, "k.toml")
	p, err := Parse([]byte(strings.Replace(nd, "ssh://root@box\"", "ssh://root@box\"\nboot = \"kexec\"\nconsole_log = \"box.log\"", 1)), file)
	if err != nil || p.Target.ConsoleLog != filepath.Join(dir, "box.log") {
		t.Errorf("console_log: %v, %q", err, p.Target.ConsoleLog)
	}
	one := strings.Replace(nd, "[[variant]]\nname = \"b\"\nsymbols = { PREEMPT_DYNAMIC = true }\n", "", 1)
	if p, err := Parse([]byte(one), "one.toml"); err != nil || p.Target.Boot != "none" {
		t.Errorf("one kernel, no boot method: %v", err)
	}
}

func TestMinimalDefaults(t *testing.T) {
	p, err := Parse([]byte(valid), "min.toml")
	if err != nil {
		t.Fatal(err)
	}
	if p.BaseConfig != "tinyconfig" || p.Target.Kind != "qemu" || p.Target.Timeout == 0 || p.Repeats.Iterations != 1 || !p.Series.Apply {
		t.Errorf("defaults: %+v", p)
	}
	if p.Variant("b").Symbols["PREEMPT_DYNAMIC"] != "y" {
		t.Error("boolean symbol not turned into y")
	}
	if !reflect.DeepEqual(p.Comparisons, []Comparison{{Base: "a", Other: "b"}}) {
		t.Errorf("default comparisons: %v", p.Comparisons)
	}
}

// TestMaxLostBoots: target.max_lost_boots, its default, and that it does
// not change the evaluation key (raised after the machine came back, it
// resumes the evaluation the budget stopped).
func TestMaxLostBoots(t *testing.T) {
	p, err := Parse([]byte(valid), "min.toml")
	if err != nil {
		t.Fatal(err)
	}
	five, err := Parse([]byte(valid+"\n[target]\nmax_lost_boots = 5\n"), "five.toml")
	if err != nil {
		t.Fatal(err)
	}
	if p.Target.LostBoots() != DefaultMaxLostBoots || five.Target.LostBoots() != 5 {
		t.Errorf("budgets %d and %d, want %d and 5", p.Target.LostBoots(), five.Target.LostBoots(), DefaultMaxLostBoots)
	}
	if p.Hash() != five.Hash() {
		t.Error("max_lost_boots changed the evaluation key")
	}
}

// TestCompareThreshold: [compare] threshold, its defaults (1%, 0.5% when
// deterministic), and that it does not change the evaluation key.
func TestCompareThreshold(t *testing.T) {
	p, err := Parse([]byte(valid), "min.toml")
	if err != nil {
		t.Fatal(err)
	}
	if !p.Deterministic || p.Compare.Threshold != 0.5 || p.Threshold() != 0.5 {
		t.Errorf("deterministic default %g", p.Compare.Threshold)
	}
	nd, err := Parse([]byte(strings.Replace(valid, "deterministic = true", "deterministic = false", 1)), "nd.toml")
	if err != nil {
		t.Fatal(err)
	}
	if nd.Compare.Threshold != 1 {
		t.Errorf("default %g", nd.Compare.Threshold)
	}
	two, err := Parse([]byte(valid+"[compare]\nthreshold = \" 2.5% \"\n"), "two.toml")
	if err != nil {
		t.Fatal(err)
	}
	if two.Compare.Threshold != 2.5 || two.Threshold() != 2.5 {
		t.Errorf("threshold %g", two.Compare.Threshold)
	}
	if two.Hash() != p.Hash() {
		t.Errorf("the threshold changed the evaluation key")
	}
	if (&Pipeline{}).Threshold() != 1 || (&Pipeline{Deterministic: true}).Threshold() != 0.5 {
		t.Errorf("threshold of a hand-made pipeline")
	}
}

// Each case replaces old with new in valid (or appends when old is "")
// and must fail at file:line with msg in the text.
// manyVariants is n more [[variant]] tables.
func manyVariants(n int) string {
	var b strings.Builder
	for i := range n {
		fmt.Fprintf(&b, "[[variant]]\nname = \"v%d\"\n", i)
	}
	return b.String()
}

func TestMalformed(t *testing.T) {
	dir := t.TempDir()
	cases := []struct {
		name, old, new string
		line           int
		msg            string
	}{
		{"unknown top key", "name = \"t\"", "name = \"t\"\ncolour = \"red\"", 2, `unknown key "colour"`},
		{"unknown variant key", "name = \"b\"\n", "name = \"b\"\nsymbolz = { X = \"y\" }\n", 14, `unknown key "variant.symbolz"`},
		{"unknown key in first of two", "name = \"a\"\n", "name = \"a\"\nfoo = 1\n", 10, `unknown key "variant.foo"`},
		{"unknown table", "", "[tagret]\nsmp = 2\n", 22, `unknown key "tagret"`},
		{"bad type top", "deterministic = true", "deterministic = \"yes\"", 2, "deterministic"},
		{"bad type in first array table", "iterations = 1000", "iterations = \"many\"", 18, "iterations"},
		{"bad type in first variant", "name = \"a\"\n", "name = \"a\"\ncmdline = 3\n", 10, "cmdline"},
		{"syntax error", "boots = 2", "boots = = 2", 21, ""},
		{"unknown variant in comparison", "", "[[comparison]]\nbase = \"a\"\nother = \"c\"\n", 24, `unknown variant "c"`},
		{"comparison with itself", "", "[[comparison]]\nbase = \"a\"\nother = \"a\"\n", 22, "with itself"},
		{"unknown variant in chain", "", "[[chain]]\nvariants = [\"a\", \"zz\"]\n", 23, `unknown variant "zz"`},
		{"short chain", "", "[[chain]]\nvariants = [\"a\"]\n", 23, "at least two"},
		{"boots zero", "boots = 2", "boots = 0", 21, "repeats.boots = 0"},
		// FuzzParse: an unbounded boots allocated the whole plan (hung).
		{"boots huge", "boots = 2", "boots = 9223372036854775807", 21, "repeats.boots = 9223372036854775807: at most 1000"},
		{"max_boots huge", "boots = 2", "boots = 2\nmax_boots = 1001", 22, "repeats.max_boots = 1001: at most 1000"},
		// FuzzParse: boots x variants x arches was unbounded (minutes of planning).
		{"plan huge", "boots = 2", "boots = 1000\n" + manyVariants(19), 21, "1000 boot(s) x 21 variant(s) x 1 arch(es) = 21000 boots: at most 20000"},
		{"max_boots under boots", "boots = 2", "boots = 2\nmax_boots = 1", 22, "repeats.max_boots = 1 is less than repeats.boots = 2"},
		{"duplicate variant", "name = \"b\"", "name = \"a\"", 13, `duplicate variant name "a" (first at line 8)`},
		{"sched_preempt without dynamic", "symbols = { PREEMPT_VOLUNTARY = \"y\" }", "symbols = { PREEMPT_VOLUNTARY = \"y\" }\nsched_preempt = \"full\"", 11, "PREEMPT_DYNAMIC=y"},
		{"bad sched_preempt", "symbols = { PREEMPT_DYNAMIC = true }", "symbols = { PREEMPT_DYNAMIC = true }\nsched_preempt = \"fast\"", 15, `sched_preempt "fast"`},
		{"missing fragment file", `fragments = ["ppc64le-pseries"]`, `fragments = ["ppc64le-pseries", "extra/missing.config"]`, 6, `fragment "extra/missing.config": no such file`},
		{"riscv64 with another arch's fragment", `arch = "ppc64le"`, `arch = ["ppc64le", "riscv64"]`, 6, `for riscv64 use "riscv64-virt"`},
		{"deterministic with kvm", "", "[target]\nkvm = \"on\"\n", 23, "cannot use KVM"},
		{"deterministic over ssh", "", "[target]\nkind = \"ssh\"\nhost = \"ssh://root@box\"\n", 2, "needs QEMU"},
		{"ssh without host", "deterministic = true", "deterministic = false\n[target]\nkind = \"ssh\"", 3, "ssh://user@host"},
		// Two kernels on a machine that cannot boot them: the same running
		// kernel would be measured under both names.
		{"ssh several kernels no boot", "deterministic = true", "deterministic = false\n[target]\nhost = \"ssh://root@box\"", 3, "variants a, b need 2 different kernels or command lines, but an ssh target without a boot method only measures the kernel the machine runs"},
		{"ssh cmdlines no boot", "deterministic = true", "deterministic = false\n[target]\nhost = \"ssh://root@box\"\nboot = \"none\"", 5, "need 2 different kernels"},
		{"ssh bad boot", "deterministic = true", "deterministic = false\n[target]\nhost = \"ssh://root@box\"\nboot = \"pxe\"", 5, `target.boot "pxe": want "none" (the running kernel), "hook" or "kexec"`},
		{"ssh hook without command", "deterministic = true", "deterministic = false\n[target]\nhost = \"ssh://root@box\"\nboot = \"hook\"", 5, "needs boot_hook"},
		{"initrd without kexec", "deterministic = true", "deterministic = false\n[target]\nhost = \"ssh://root@box\"\nboot_hook = \"x\"\ninitrd = \"min.toml\"", 6, "set boot = \"kexec\""},
		{"kexec on qemu", "", "[target]\nboot = \"kexec\"\n", 23, "target.boot, initrd, identity and ssh_options are for kind = \"ssh\""},
		{"console_log on qemu", "", "[target]\nconsole_log = \"/var/log/conserver/box.log\"\n", 23, "target.console_log is for kind = \"ssh\""},
		{"max_lost_boots zero", "", "[target]\nmax_lost_boots = 0\n", 23, "target.max_lost_boots = 0: want 1..1000"},
		{"console_log in no directory", "deterministic = true", "deterministic = false\n[target]\nhost = \"ssh://root@box\"\nboot = \"kexec\"\nconsole_log = \"nodir/box.log\"", 6, "console_log \"nodir/box.log\": no directory"},
		{"unknown benchmark", `name = "kill"`, `name = "hackbench"`, 17, `unknown benchmark "hackbench"`},
		{"rcu with iterations", `name = "kill"`, `name = "rcu_sync"`, 18, "calls and runs"},
		{"kill with calls", "iterations = 1000", "iterations = 1000\ncalls = 3", 19, "no calls parameter"},
		{"negative iterations", "iterations = 1000", "iterations = -1", 18, "iterations = -1"},
		{"bad symbol name", "PREEMPT_VOLUNTARY = \"y\"", "\"PREEMPT VOLUNTARY\" = \"y\"", 10, "not a Kconfig symbol"},
		{"bad symbol value", "PREEMPT_VOLUNTARY = \"y\"", "PREEMPT_VOLUNTARY = 1.5", 10, "value must be"},
		{"kernel of unknown variant", "name = \"b\"\n", "name = \"b\"\nkernel = \"nope\"\n", 14, `kernel = "nope": no such variant`},
		{"shared kernel with symbols", "name = \"b\"\n", "name = \"b\"\nkernel = \"a\"\n", 15, "cannot set Kconfig symbols"},
		{"bad memory", "", "[target]\nmemory = \"lots\"\n", 23, `target.memory "lots"`},
		{"bad timeout", "", "[target]\ntimeout = \"5 minutes\"\n", 23, "target.timeout"},
		{"bad cpus", "name = \"a\"\n", "name = \"a\"\ncpus = \"0-x\"\n", 10, "CPU list"},
		{"fragment of another arch", `fragments = ["ppc64le-pseries"]`, `fragments = ["arm64-virt"]`, 6, `use "ppc64le-pseries"`},
		{"no name", `name = "t"`, `description = "x"`, 0, "needs a name"},
		{"threshold without percent", "", "[compare]\nthreshold = \"1\"\n", 23, `compare.threshold = "1": want a percentage like "1%"`},
		{"threshold bare number", "", "[compare]\nthreshold = 0.01\n", 23, "a bare number is ambiguous"},
		{"threshold zero", "", "[compare]\nthreshold = \"0%\"\n", 23, `compare.threshold = "0%": want more than 0%`},
		{"threshold 100", "", "[compare]\nthreshold = \"150%\"\n", 23, "less than 100%"},
		{"threshold misspelt", "", "[compare]\nthreshhold = \"1%\"\n", 23, `unknown key "compare.threshhold"`},
		{"unknown selinux mode", "name = \"a\"\n", "name = \"a\"\nselinux = \"on\"\n", 10, `selinux = "on": want one of enforcing, permissive, disabled`},
		{"selinux without SECURITY_SELINUX", "name = \"a\"\n", "name = \"a\"\nselinux = \"enforcing\"\n", 10, "SECURITY_SELINUX=y"},
		{"selinux without policy", "PREEMPT_VOLUNTARY = \"y\"", "PREEMPT_VOLUNTARY = \"y\", SECURITY_SELINUX = \"y\", SECURITY_SELINUX_DEVELOP = \"y\" }\nselinux = \"permissive\"\n#", 11, "name one in [selinux] policy"},
		{"enforcing without DEVELOP", "PREEMPT_VOLUNTARY = \"y\"", "SECURITY_SELINUX = \"y\" }\nselinux = \"enforcing\"\n#", 11, "SECURITY_SELINUX_DEVELOP=y"},
		{"enforcing without SELinux started", "PREEMPT_VOLUNTARY = \"y\"", "SECURITY_SELINUX = \"y\", SECURITY_SELINUX_DEVELOP = \"y\" }\nselinux = \"enforcing\"\n#", 11, "add security=selinux"},
		{"disabled without selinux=0", "PREEMPT_VOLUNTARY = \"y\"", "SECURITY_SELINUX = \"y\", SECURITY_SELINUX_BOOTPARAM = \"y\" }\nselinux = \"disabled\"\n#", 11, "selinux=0"},
		{"disabled without BOOTPARAM", "PREEMPT_VOLUNTARY = \"y\"", "SECURITY_SELINUX = \"y\" }\ncmdline = \"selinux=0\"\nselinux = \"disabled\"\n#", 12, "SECURITY_SELINUX_BOOTPARAM=y"},
		{"unknown policy", "", "[selinux]\npolicy = \"strict\"\n", 23, `no shipped SELinux policy of that name (have minimal)`},
		{"missing policy file", "", "[selinux]\npolicy = \"my/policy.conf\"\n", 23, `SELinux policy "my/policy.conf": no such file`},
		{"table of unknown variant", "", "[[table]]\nname = \"T\"\ncolumns = [\"a\", \"zz\"]\n", 24, `table "T": unknown variant "zz"`},
		{"table change not compared", "", "[[table]]\nname = \"T\"\ncolumns = [\"a\", \"b\"]\nchange = { name = \"tax\", base = \"b\", other = \"a\" }\n", 25, "change b -> a is not one of the pipeline's comparisons"},
		{"table of unknown benchmark", "", "[[table]]\nname = \"T\"\ncolumns = [\"a\"]\nbenchmarks = [\"perf bench\"]\n", 25, `table "T": no benchmark of the pipeline starts with "perf bench"`},
		{"table without name", "", "[[table]]\ncolumns = [\"a\"]\n", 22, "a table needs a name"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			src := valid + c.new
			if c.old != "" {
				if !strings.Contains(valid, c.old) {
					t.Fatalf("bad case: %q not in the valid pipeline", c.old)
				}
				src = strings.Replace(valid, c.old, c.new, 1)
			}
			file := filepath.Join(dir, strings.ReplaceAll(c.name, " ", "-")+".toml")
			os.WriteFile(file, []byte(src), 0o644)
			_, err := Load(file)
			if err == nil {
				t.Fatalf("accepted:\n%s", src)
			}
			want := fmt.Sprintf("%s:%d: ", file, c.line)
			if c.line == 0 {
				want = file + ": "
			}
			if !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), c.msg) {
				t.Fatalf("error %q\nwant it to contain %q and %q\n--- source:\n%s", err, want, c.msg, numbered(src))
			}
			if fail.KindOf(err) != fail.KindInput {
				t.Errorf("kind %v, want bad input", fail.KindOf(err))
			}
		})
	}
}

func numbered(s string) string {
	var b strings.Builder
	for i, l := range strings.Split(s, "\n") {
		fmt.Fprintf(&b, "%3d %s\n", i+1, l)
	}
	return b.String()
}

func TestAllErrorsReported(t *testing.T) {
	src := strings.Replace(valid, "boots = 2", "boots = 0", 1) + "[[comparison]]\nbase = \"x\"\nother = \"a\"\n"
	_, err := Parse([]byte(src), "multi.toml")
	var es Errors
	if !errors.As(err, &es) || len(es) != 2 || es[0].Line != 21 || es[1].Line != 23 {
		t.Fatalf("errors: %v", err)
	}
}

func TestFragmentFilesAndHash(t *testing.T) {
	dir := t.TempDir()
	os.MkdirAll(filepath.Join(dir, "frags"), 0o755)
	frag := filepath.Join(dir, "frags", "hz.config")
	os.WriteFile(frag, []byte("CONFIG_HZ_1000=y\n"), 0o644)
	src := strings.Replace(valid, `fragments = ["ppc64le-pseries"]`, `fragments = ["ppc64le-pseries", "frags/hz.config"]`, 1)
	file := filepath.Join(dir, "p.toml")
	os.WriteFile(file, []byte(src), 0o644)
	p, err := Load(file)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(p.Fragments, []Fragment{{Name: "ppc64le-pseries"}, {Path: frag}}) {
		t.Fatalf("fragments: %+v", p.Fragments)
	}
	h1 := p.Hash()
	// Comments and descriptions do not change the hash; fragment contents do.
	os.WriteFile(file, []byte("# a comment\n"+strings.Replace(src, `name = "t"`, "name = \"t\"\ndescription = \"words\"", 1)), 0o644)
	if p2, _ := Load(file); p2.Hash() != h1 {
		t.Error("hash changed with a comment")
	}
	os.WriteFile(frag, []byte("CONFIG_HZ_250=y\n"), 0o644)
	if p.Hash() == h1 {
		t.Error("hash ignores fragment contents")
	}
	q, _ := Parse([]byte(strings.Replace(valid, "iterations = 1000", "iterations = 1001", 1)), "q.toml")
	r, _ := Parse([]byte(valid), "q.toml")
	if q.Hash() == r.Hash() {
		t.Error("hash ignores benchmark parameters")
	}
	// A builtin pipeline cannot name files.
	if _, err := Parse([]byte(src), ""); err == nil {
		t.Error("relative fragment without a directory accepted")
	}
}

func TestMultiArchLabels(t *testing.T) {
	src := strings.Replace(valid, `arch = "ppc64le"`, `arch = ["ppc64le", "aarch64"]`, 1)
	if _, err := Parse([]byte(src), "m.toml"); err == nil || !strings.Contains(err.Error(), "m.toml:6: ") {
		t.Fatalf("ppc64le-pseries for arm64 accepted: %v", err)
	}
	p, err := Parse([]byte(strings.Replace(src, `"ppc64le-pseries"`, `"qemu-boot"`, 1)), "m.toml")
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(p.Arches, []string{"ppc64le", "arm64"}) || len(p.Builds()) != 4 {
		t.Fatalf("arches %v builds %d", p.Arches, len(p.Builds()))
	}
	if b := p.Builds(); b[0].Fragments[0].Name != "ppc64le-pseries" || b[3].Fragments[0].Name != "arm64-virt" {
		t.Fatalf("qemu-boot not resolved per arch: %+v", b)
	}
	runs := p.Runs()
	if len(runs) != 8 || runs[0].Variant != "a/ppc64le" || runs[7].Variant != "b/arm64" || runs[7].Name != "b" {
		t.Fatalf("runs: %+v", runs)
	}
}

func TestFind(t *testing.T) {
	if p, err := Find("selinux-tax"); err != nil || p.Name != "selinux-tax" {
		t.Fatalf("Find builtin: %v", err)
	}
	if p, err := Find("rcu-sync-latency.toml"); err != nil || p.File != "rcu-sync-latency.toml" {
		t.Fatalf("Find file: %v", err)
	}
	if _, err := Find("no-such-pipeline"); err == nil || !strings.Contains(err.Error(), "ppc-preempt-dynamic") {
		t.Fatalf("Find missing: %v", err)
	}
}

func TestLineIndex(t *testing.T) {
	src := `a = 1
s = """
[not]
x = 2
"""
arr = [
  "x = 3",
  [1, 2],
]
[[v]]
n = "one"   # [comment]
[v.k]
z = 1
[[v]]
n = "two"
"q.r".s = 4
[t]
u = { w = 1 }
`
	ix := indexLines(src)
	want := map[string]int{"a": 1, "s": 2, "arr": 6, "v[0]": 10, "v[0].n": 11, "v[0].k": 12, "v[0].k.z": 13,
		"v[1].n": 15, "v[1].q.r.s": 16, "t.u": 18, "t.u.w": 18}
	for p, l := range want {
		if got := ix.line(p); got != l {
			t.Errorf("line(%s) = %d, want %d", p, got, l)
		}
	}
	for _, p := range []string{"not", "x"} {
		if _, ok := ix.lines[p]; ok {
			t.Errorf("indexed %q from inside a string or array", p)
		}
	}
	if got := ix.matching("v.n"); !reflect.DeepEqual(got, []int{11, 15}) {
		t.Errorf("matching(v.n) = %v", got)
	}
}

func FuzzParse(f *testing.F) {
	for _, n := range List() {
		src, _ := BuiltinSource(n)
		f.Add(src)
	}
	f.Add([]byte(valid))
	f.Add([]byte(valid + "[[comparison]]\nbase = \"a\"\nother = \"q\"\n"))
	f.Add([]byte("[[variant]]\nname = 3\n[[variant]]\nsymbols = []\n"))
	f.Add([]byte("a = '''\n[x]\n'''\n[[b.c]]\n[b]\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		p, err := Parse(data, "fuzz.toml")
		if err != nil {
			if !strings.Contains(err.Error(), "fuzz.toml") {
				t.Fatalf("error does not name the file: %v", err)
			}
			return
		}
		if len(p.Variants) == 0 || len(p.Arches) == 0 || p.Repeats.Boots < 1 {
			t.Fatalf("accepted an empty pipeline: %+v", p)
		}
		if got, want := len(p.Runs()), p.Repeats.Boots*len(p.Variants)*len(p.Arches); got != want {
			t.Fatalf("%d runs, want %d", got, want)
		}
		keys := map[string]bool{}
		for _, b := range p.Builds() {
			keys[b.Key] = true
		}
		for _, r := range p.Runs() {
			if !keys[r.BuildKey] {
				t.Fatalf("run %s has no build", r.Variant)
			}
		}
		_ = p.Hash()
	})
}

func TestToolBenchmarks(t *testing.T) {
	src := strings.Replace(valid, "[repeats]", `[[benchmark]]
name = "stress-ng"
args = ["--kill", "1", "-t", "23"]

[[benchmark]]
name = "perf-bench"
args = ["syscall", "basic", "-l", "200000"]

[repeats]`, 1)
	p, err := Parse([]byte(src), "tools.toml")
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(p.Tools(), ","); got != "perf,stress-ng" {
		t.Errorf("Tools() = %q", got)
	}
	var labels []string
	for _, b := range p.Runs()[0].Plan.Benchmarks {
		labels = append(labels, b.Label())
	}
	if got := strings.Join(labels, " | "); got != "kill | stress-ng --kill 1 -t 23 | perf bench syscall basic -l 200000" {
		t.Errorf("plan benchmarks: %s", got)
	}
	if p0, _ := Parse([]byte(valid), "v.toml"); len(p0.Tools()) != 0 || p0.Hash() == p.Hash() {
		t.Errorf("agent-loop pipeline: tools %v, same hash %v", p0.Tools(), p0.Hash() == p.Hash())
	}
	for bad, want := range map[string]string{
		"name = \"stress-ng\"\n": "needs its arguments",
		"name = \"stress-ng\"\nargs = [\"--kill\", \"1\", \"--yaml\", \"x\"]\n":    "adds --metrics-brief --yaml itself",
		"name = \"perf-bench\"\nargs = [\"syscall\", \"basic\"]\niterations = 5\n": "not iterations",
		"name = \"kill\"\nargs = [\"x\"]\n":                                        "agent loop without arguments",
		"name = \"stress\"\n":                                                      "the guest's tools: stress-ng, perf-bench",
	} {
		s := strings.Replace(valid, "name = \"kill\"\niterations = 1000\n", bad, 1)
		if _, err := Parse([]byte(s), "bad.toml"); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: error %v, want %q", bad, err, want)
		}
	}
	w, err := Parse([]byte(strings.Replace(src, `"basic", "-l", "200000"`, `"fork"`, 1)), "w.toml")
	if err != nil || len(w.Warnings) == 0 || !strings.Contains(strings.Join(w.Warnings, "\n"), "perf 6.3") {
		t.Errorf("perf bench syscall fork: warnings %v, err %v", w.Warnings, err)
	}
}

// TestLayoutControl: [compare] layout = true adds each compared variant's
// function-aligned rebuild (a runtime-only variant boots its kernel's
// aligned rebuild) and the same comparisons between them; a
// deterministic pipeline refuses it.
func TestLayoutControl(t *testing.T) {
	nd := strings.Replace(valid, "deterministic = true", "deterministic = false", 1)
	nd = strings.Replace(nd, "[repeats]", "[[variant]]\nname = \"b@full\"\nkernel = \"b\"\nsched_preempt = \"full\"\n\n[[comparison]]\nbase = \"a\"\nother = \"b\"\n\n[[comparison]]\nbase = \"b\"\nother = \"b@full\"\n\n[compare]\nlayout = true\n\n[repeats]", 1)
	p, err := Parse([]byte(nd), "layout.toml")
	if err != nil {
		t.Fatal(err)
	}
	if !p.Compare.Layout {
		t.Fatal("compare.layout not set")
	}
	want := []Comparison{{Base: "a", Other: "b"}, {Base: "b", Other: "b@full"},
		{Base: "a+align64", Other: "b+align64", Aligned: true}, {Base: "b+align64", Other: "b@full+align64", Aligned: true}}
	if !reflect.DeepEqual(p.Comparisons, want) {
		t.Errorf("comparisons %v, want %v", p.Comparisons, want)
	}
	for _, name := range []string{"a", "b", "b@full"} {
		v, a := p.Variant(name), p.Variant(name+AlignSuffix)
		if a == nil {
			t.Fatalf("no aligned rebuild of %s", name)
		}
		if a.AlignedOf != name || a.Kernel != v.Kernel+AlignSuffix || a.SchedPreempt != v.SchedPreempt ||
			a.Symbols["DEBUG_FORCE_FUNCTION_ALIGN_64B"] != "y" || v.Symbols["DEBUG_FORCE_FUNCTION_ALIGN_64B"] != "" {
			t.Errorf("%s's aligned rebuild: %+v", name, a)
		}
	}
	// Two kernels, two aligned rebuilds; b@full+align64 boots b+align64's.
	builds := p.Builds()
	if len(builds) != 4 {
		t.Fatalf("%d builds, want 4: %+v", len(builds), builds)
	}
	for _, b := range builds {
		if b.Variant == "b+align64" && !reflect.DeepEqual(b.Variants, []string{"b+align64", "b@full+align64"}) {
			t.Errorf("the aligned kernel of b boots %v", b.Variants)
		}
	}
	plain, _ := Parse([]byte(strings.Replace(nd, "layout = true", "", 1)), "plain.toml")
	if plain == nil || plain.Hash() == p.Hash() || len(plain.Variants) != 3 {
		t.Error("the layout control does not change the evaluation's key")
	}
	// 4 variants x 3 arches x MaxBoots boots fit in MaxRuns; doubled they do not.
	big := strings.Replace(nd, "boots = 2", fmt.Sprintf("boots = %d", MaxBoots), 1)
	big = strings.Replace(big, `arch = "ppc64le"`, `arch = ["ppc64le", "arm64", "x86_64"]`, 1)
	big = strings.Replace(big, `fragments = ["ppc64le-pseries"]`, `fragments = ["qemu-boot"]`, 1)
	big = strings.Replace(big, "[compare]", "[[variant]]\nname = \"c\"\n\n[[comparison]]\nbase = \"a\"\nother = \"c\"\n\n[compare]", 1)
	if _, err := Parse([]byte(strings.Replace(big, "layout = true", "", 1)), "big.toml"); err != nil {
		t.Fatalf("%d boots of 4 variants on 3 arches: %v", MaxBoots, err)
	}
	if _, err := Parse([]byte(big), "big.toml"); err == nil || !strings.Contains(err.Error(), "compare.layout doubles the variants") {
		t.Errorf("%d boots of 8 variants on 3 arches: %v", MaxBoots, err)
	}
	det := strings.Replace(nd, "deterministic = false", "deterministic = true", 1)
	if _, err := Parse([]byte(det), "det.toml"); err == nil || !strings.Contains(err.Error(), "compare.layout needs a target measured in real time") {
		t.Errorf("deterministic pipeline with layout control: %v", err)
	}
}

// TestLayoutControlRefusedWithoutTheSymbol: compare.layout on an
// architecture whose Kconfig has no DEBUG_FORCE_FUNCTION_ALIGN_64B
// (riscv64) is refused at load, naming it, instead of failing every
// aligned rebuild's configuration later.
func TestLayoutControlRefusedWithoutTheSymbol(t *testing.T) {
	nd := strings.Replace(valid, "deterministic = true", "deterministic = false", 1)
	nd = strings.Replace(nd, "[repeats]", "[[comparison]]\nbase = \"a\"\nother = \"b\"\n\n[compare]\nlayout = true\n\n[repeats]", 1)
	if _, err := Parse([]byte(nd), "layout.toml"); err != nil {
		t.Fatalf("the layout control on the valid pipeline's arches: %v", err)
	}
	rv := strings.Replace(nd, `arch = "ppc64le"`, `arch = "riscv64"`, 1)
	if rv == nd {
		t.Fatal("the valid pipeline names no ppc64le arch to replace")
	}
	_, err := Parse([]byte(rv), "layout-riscv.toml")
	if err == nil || !strings.Contains(err.Error(), "riscv64 has no CONFIG_DEBUG_FORCE_FUNCTION_ALIGN_64B") {
		t.Errorf("compare.layout on riscv64: %v, want refused naming riscv64", err)
	}
}
