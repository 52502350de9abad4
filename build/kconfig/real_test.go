package kconfig

import (
	"bytes"
	"strings"
	"syscall"
	"testing"
	"time"
)

func cpuTime() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// TestParseRealTrees parses all of 6.1's Kconfig for three architectures.
func TestParseRealTrees(t *testing.T) {
	tree := linuxTree(t)
	for _, arch := range []string{"powerpc", "arm64", "x86"} {
		start, cpu := time.Now(), cpuTime()
		kc, err := Parse(tree, arch)
		if err != nil {
			t.Fatalf("%s: %v", arch, err)
		}
		t.Logf("%s: %d files, %d lines, %d symbols, %d choices, %d menus: %v wall, %v CPU",
			arch, len(kc.Files), kc.Lines, len(kc.Symbols), len(kc.Choices), len(kc.Menus),
			time.Since(start).Round(time.Millisecond), (cpuTime() - cpu).Round(time.Millisecond))
		if len(kc.Files) < 1000 || len(kc.Symbols) < 10000 {
			t.Errorf("%s: only %d files, %d symbols", arch, len(kc.Files), len(kc.Symbols))
		}
		archFile := "arch/" + arch + "/Kconfig"
		found := false
		for _, f := range kc.Files {
			found = found || f == archFile
		}
		if !found {
			t.Errorf("%s: %s was not sourced via $(SRCARCH)", arch, archFile)
		}
		// The real rule behind the seed thread's confound.
		rcu := kc.Symbol("PREEMPT_RCU")
		if !rcu.Defined() || rcu.Type != TypeBool || rcu.HasPrompt() {
			t.Fatalf("%s: PREEMPT_RCU = %+v", arch, rcu)
		}
		d := rcu.Props(PropDefault)
		if len(d) != 1 || d[0].Pos.String() != "kernel/rcu/Kconfig:21" || d[0].Text != "default y if PREEMPTION" ||
			d[0].Cond.String() != "PREEMPTION" || d[0].Expr.String() != "y" {
			t.Errorf("%s: PREEMPT_RCU defaults %+v", arch, d)
		}
		if sel := rcu.Props(PropSelect); len(sel) != 1 || sel[0].Expr.Name != "TREE_RCU" {
			t.Errorf("%s: PREEMPT_RCU selects %+v", arch, sel)
		}
		// The preemption model choice.
		pn := kc.Symbol("PREEMPT_NONE")
		if pn.Choice == nil || pn.Choice.Prompt != "Preemption Model" || len(pn.Choice.Members) != 4 ||
			pn.Choice.Pos.String() != "kernel/Kconfig.preempt:14" {
			t.Fatalf("%s: PREEMPT_NONE choice %+v", arch, pn.Choice)
		}
		if defs := pn.Choice.Defaults(); len(defs) != 1 || defs[0].Expr.Name != "PREEMPT_NONE" {
			t.Errorf("%s: choice defaults %+v", arch, defs)
		}
		pd := kc.Symbol("PREEMPT_DYNAMIC")
		if got := depsExpr(pd.Defs[0]).String(); got != "HAVE_PREEMPT_DYNAMIC && !PREEMPT_RT" {
			t.Errorf("%s: PREEMPT_DYNAMIC deps %q", arch, got)
		}
		// Selects are linked back to their targets.
		hp := kc.Symbol("HAVE_PREEMPT_DYNAMIC")
		if len(hp.SelectedBy) != 2 {
			t.Errorf("%s: HAVE_PREEMPT_DYNAMIC selected by %d", arch, len(hp.SelectedBy))
		}
		key := kc.Symbol("HAVE_PREEMPT_DYNAMIC_KEY")
		want := map[string]int{"powerpc": 0, "arm64": 1, "x86": 0}[arch]
		if len(key.SelectedBy) != want {
			t.Errorf("%s: HAVE_PREEMPT_DYNAMIC_KEY selected by %d, want %d", arch, len(key.SelectedBy), want)
		}
	}
}

// TestParsedTypesMatchRealConfig: every symbol the kernel's own kconfig
// wrote is defined by our reader with a compatible type, and every choice
// has exactly one member y.
func TestParsedTypesMatchRealConfig(t *testing.T) {
	tree := linuxTree(t)
	kc := treeKconfig(t, tree, "powerpc")
	final := finalConfig(t, tree, "qemu-pseries-min.config")
	if len(final) < 300 {
		t.Fatalf("final config has only %d symbols", len(final))
	}
	for name, v := range final {
		s := kc.Symbols[name]
		if !s.Defined() {
			t.Errorf("CONFIG_%s in the real .config is not defined by the parsed Kconfig", name)
			continue
		}
		switch s.Type {
		case TypeBool:
			if v != "y" && v != "n" {
				t.Errorf("bool %s = %q", name, v)
			}
		case TypeTristate:
			if v != "y" && v != "m" && v != "n" {
				t.Errorf("tristate %s = %q", name, v)
			}
		case TypeInt, TypeHex:
			if _, ok := parseNumber(v); !ok && !isHexDigits(v) {
				t.Errorf("%s %s = %q", s.Type, name, v)
			}
		case TypeUnknown:
			t.Errorf("%s has no type", name)
		}
	}
	for _, c := range kc.Choices {
		n := 0
		for _, m := range c.Members {
			if final[m.Name] == "y" {
				n++
			}
		}
		if n > 1 {
			t.Errorf("choice %s: %d members y", c.Pos, n)
		}
	}
	if final["PREEMPT_VOLUNTARY"] != "y" || final["PREEMPT_RCU"] == "y" {
		t.Errorf("voluntary config: PREEMPT_VOLUNTARY=%q PREEMPT_RCU=%q", final["PREEMPT_VOLUNTARY"], final["PREEMPT_RCU"])
	}
}

// The pseries boot fragment itself: everything holds except SELinux,
// which tinyconfig cannot give without SECURITY_NETWORK.
func TestVerifyPseriesFragment(t *testing.T) {
	tree := linuxTree(t)
	kc := treeKconfig(t, tree, "powerpc")
	final := finalConfig(t, tree, "qemu-pseries-min.config")
	probs := Verify(kc, final, fragment(t, "qemu-pseries-min.config"))
	for _, p := range probs {
		t.Logf("%s", p)
	}
	if len(probs) != 1 || probs[0].Symbol != "SECURITY_SELINUX" ||
		!strings.Contains(probs[0].Reason, "SECURITY_NETWORK (= n) [security/selinux/Kconfig:4]") {
		t.Fatalf("problems: %v", probs)
	}
}

// PREEMPT_DYNAMIC=y on powerpc 6.1 without the backport is silently
// dropped by olddefconfig; Verify must say so and why.
func TestVerifyPreemptDynamicUnpatched(t *testing.T) {
	tree := linuxTree(t)
	kc := treeKconfig(t, tree, "powerpc")
	vol := finalConfig(t, tree, "qemu-pseries-min.config")
	dyn := finalConfig(t, tree, "qemu-pseries-min.config", "preempt-dynamic.config")
	req := fragment(t, "preempt-dynamic.config")
	probs := Verify(kc, dyn, req)
	if len(probs) != 1 {
		t.Fatalf("want 1 problem, got %v", probs)
	}
	p := probs[0]
	t.Logf("%s", p)
	for _, r := range p.Rules {
		t.Logf("  %s", r)
	}
	if p.Symbol != "PREEMPT_DYNAMIC" || p.Requested != "y" || p.Got != "n" || p.Kind != "depends" {
		t.Errorf("problem %+v", p)
	}
	for _, want := range []string{
		"PREEMPT_DYNAMIC depends on HAVE_PREEMPT_DYNAMIC (= n) [kernel/Kconfig.preempt:98]",
		"HAVE_PREEMPT_DYNAMIC is n because it has no prompt and is only selected by HAVE_PREEMPT_DYNAMIC_CALL (= n) [arch/Kconfig:1362], HAVE_PREEMPT_DYNAMIC_KEY (= n) [arch/Kconfig:1380]",
		"HAVE_PREEMPT_DYNAMIC_KEY is n because it has no prompt and nothing in this tree (SRCARCH=powerpc) selects it",
	} {
		if !strings.Contains(p.Reason, want) {
			t.Errorf("reason lacks %q:\n%s", want, p.Reason)
		}
	}
	if strings.Contains(p.Reason, "\n") {
		t.Errorf("reason is not one line")
	}
	if len(p.Rules) == 0 || p.Rules[0].Pos.String() != "kernel/Kconfig.preempt:98" || p.Rules[0].Text != "depends on HAVE_PREEMPT_DYNAMIC && !PREEMPT_RT" {
		t.Errorf("first rule %+v", p.Rules)
	}
	// Without the series the two variants are the same kernel: the
	// confound report shows nothing but the silently dropped request.
	if ch := Diff(kc, vol, dyn, req); len(ch) != 0 {
		t.Errorf("unpatched voluntary vs voluntary+dynamic differ: %+v", ch)
	}
}

func findChange(t *testing.T, ch []SymbolChange, name string) SymbolChange {
	t.Helper()
	for _, c := range ch {
		if c.Symbol == name {
			return c
		}
	}
	t.Fatalf("%s not in the confound report", name)
	return SymbolChange{}
}

func hasRule(c SymbolChange, pos, text, note string) bool {
	for _, r := range c.Rules {
		if r.Pos.String() == pos && r.Text == text && strings.Contains(r.Note, note) {
			return true
		}
	}
	return false
}

// With the backport, PREEMPT_DYNAMIC=y takes effect and drags
// PREEMPT_BUILD, PREEMPTION, PREEMPT_COUNT and PREEMPT_RCU along.
func TestDiffPreemptDynamicPatched(t *testing.T) {
	tree := patchedTree(t)
	kc := treeKconfig(t, tree, "powerpc")
	if n := len(kc.Symbol("HAVE_PREEMPT_DYNAMIC_KEY").SelectedBy); n != 1 {
		t.Fatalf("backport not applied: HAVE_PREEMPT_DYNAMIC_KEY selected by %d", n)
	}
	vol := finalConfig(t, tree, "qemu-pseries-min.config")
	dyn := finalConfig(t, tree, "qemu-pseries-min.config", "preempt-dynamic.config")
	req := fragment(t, "preempt-dynamic.config")
	if probs := Verify(kc, dyn, req); len(probs) != 0 {
		t.Fatalf("PREEMPT_DYNAMIC should hold with the backport: %v", probs)
	}
	ch := Diff(kc, vol, dyn, req)
	var buf bytes.Buffer
	if err := FormatDiff(&buf, ch); err != nil {
		t.Fatal(err)
	}
	t.Logf("confound report:\n%s", buf.String())

	if c := findChange(t, ch, "PREEMPT_DYNAMIC"); !c.Requested || c.A != "n" || c.B != "y" || ch[0].Symbol != "PREEMPT_DYNAMIC" {
		t.Errorf("PREEMPT_DYNAMIC change %+v (first %s)", c, ch[0].Symbol)
	}
	checks := []struct{ sym, pos, text, note string }{
		{"PREEMPT_RCU", "kernel/rcu/Kconfig:21", "default y if PREEMPTION", "now true: PREEMPTION=y"},
		{"PREEMPT_BUILD", "kernel/Kconfig.preempt:100", "select PREEMPT_BUILD", "PREEMPT_DYNAMIC n -> y"},
		{"PREEMPTION", "kernel/Kconfig.preempt:11", "select PREEMPTION", "PREEMPT_BUILD n -> y"},
		{"PREEMPT_COUNT", "kernel/Kconfig.preempt:94", "select PREEMPT_COUNT", "PREEMPTION n -> y"},
		{"PREEMPT_VOLUNTARY_BUILD", "kernel/Kconfig.preempt:35", "select PREEMPT_VOLUNTARY_BUILD if !PREEMPT_DYNAMIC", "no longer active"},
		{"JUMP_LABEL", "kernel/Kconfig.preempt:99", "select JUMP_LABEL if HAVE_PREEMPT_DYNAMIC_KEY", "PREEMPT_DYNAMIC n -> y"},
	}
	for _, c := range checks {
		sc := findChange(t, ch, c.sym)
		if sc.Requested || sc.Mechanical() {
			t.Errorf("%s should be derived: %+v", c.sym, sc)
		}
		if !hasRule(sc, c.pos, c.text, c.note) {
			t.Errorf("%s: want rule %s %q (%s), got %v", c.sym, c.pos, c.text, c.note, sc.Rules)
		}
	}
	if c := findChange(t, ch, "PREEMPT_RCU"); c.A != "n" || c.B != "y" || c.Depth != 3 {
		t.Errorf("PREEMPT_RCU %+v", c)
	}
	if c := findChange(t, ch, "PREEMPT_BUILD"); c.Depth != 1 {
		t.Errorf("PREEMPT_BUILD depth %d", c.Depth)
	}
	out := buf.String()
	for _, want := range []string{
		"requested  PREEMPT_DYNAMIC",
		"PREEMPT_RCU",
		"n -> y  kernel/rcu/Kconfig:21 default y if PREEMPTION (now true: PREEMPTION=y)",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("report lacks %q", want)
		}
	}
	// Every derived change is explained by some rule.
	for _, c := range ch {
		if !c.Requested && len(c.Rules) == 0 {
			t.Errorf("%s changed without a rule", c.Symbol)
		}
	}
}

// PREEMPT_LAZY arrived after 6.1.
func TestVerifyMissingSymbol(t *testing.T) {
	tree := linuxTree(t)
	kc := treeKconfig(t, tree, "powerpc")
	final := finalConfig(t, tree, "qemu-pseries-min.config", "preempt-lazy.config")
	probs := Verify(kc, final, fragment(t, "preempt-lazy.config"))
	if len(probs) != 1 || probs[0].Symbol != "PREEMPT_LAZY" || probs[0].Kind != "missing" ||
		!strings.Contains(probs[0].Reason, "does not exist in this tree") {
		t.Fatalf("problems %v", probs)
	}
	t.Logf("%s", probs[0])
}

// Voluntary vs full: the choice changes member, and PREEMPT_RCU follows.
func TestDiffVoluntaryFull(t *testing.T) {
	tree := linuxTree(t)
	kc := treeKconfig(t, tree, "powerpc")
	vol := finalConfig(t, tree, "qemu-pseries-min.config")
	full := finalConfig(t, tree, "qemu-pseries-min.config", "preempt-full.config")
	req := fragment(t, "preempt-full.config")
	if probs := Verify(kc, full, req); len(probs) != 0 {
		t.Fatalf("full: %v", probs)
	}
	ch := Diff(kc, vol, full, req)
	var buf bytes.Buffer
	FormatDiff(&buf, ch)
	t.Logf("confound report:\n%s", buf.String())
	if c := findChange(t, ch, "PREEMPT"); !c.Requested || !hasRule(c, "kernel/Kconfig.preempt:14", `choice "Preemption Model"`, "PREEMPT_VOLUNTARY -> PREEMPT") {
		t.Errorf("PREEMPT %+v", c)
	}
	if c := findChange(t, ch, "PREEMPT_VOLUNTARY"); c.Requested || c.A != "y" || c.B != "n" ||
		!hasRule(c, "kernel/Kconfig.preempt:14", `choice "Preemption Model"`, "member PREEMPT_VOLUNTARY -> PREEMPT") {
		t.Errorf("PREEMPT_VOLUNTARY %+v", c)
	}
	if c := findChange(t, ch, "PREEMPT_RCU"); !hasRule(c, "kernel/rcu/Kconfig:21", "default y if PREEMPTION", "now true") {
		t.Errorf("PREEMPT_RCU %+v", c)
	}
	// And the reverse direction reads the same rules as "now false".
	back := Diff(kc, full, vol, req)
	if c := findChange(t, back, "PREEMPT_RCU"); c.A != "y" || c.B != "n" || !hasRule(c, "kernel/rcu/Kconfig:21", "default y if PREEMPTION", "now false: PREEMPTION=n") {
		t.Errorf("reverse PREEMPT_RCU %+v", c)
	}
}

// Base tree vs patched tree, same fragment: the patch's own Kconfig line
// (select HAVE_PREEMPT_DYNAMIC_KEY in config PPC) is named as added.
func TestDiffTreesBaseVsPatched(t *testing.T) {
	base, patched := linuxTree(t), patchedTree(t)
	ka, kb := treeKconfig(t, base, "powerpc"), treeKconfig(t, patched, "powerpc")
	a := finalConfig(t, base, "qemu-pseries-min.config")
	b := finalConfig(t, patched, "qemu-pseries-min.config", "preempt-dynamic.config")
	req := fragment(t, "preempt-dynamic.config")
	ch := DiffTrees(ka, kb, a, b, req)
	var buf bytes.Buffer
	FormatDiff(&buf, ch)
	t.Logf("base voluntary -> patched voluntary+dynamic:\n%s", buf.String())
	key := findChange(t, ch, "HAVE_PREEMPT_DYNAMIC_KEY")
	if key.Mechanical() || key.Depth != 0 || !hasRule(key, "arch/powerpc/Kconfig:251", "select HAVE_PREEMPT_DYNAMIC_KEY", "line added in B's tree") {
		t.Errorf("HAVE_PREEMPT_DYNAMIC_KEY %+v", key)
	}
	if c := findChange(t, ch, "HAVE_PREEMPT_DYNAMIC"); !hasRule(c, "arch/Kconfig:1380", "select HAVE_PREEMPT_DYNAMIC", "HAVE_PREEMPT_DYNAMIC_KEY n -> y") {
		t.Errorf("HAVE_PREEMPT_DYNAMIC %+v", c)
	}
	rcu := findChange(t, ch, "PREEMPT_RCU")
	if !hasRule(rcu, "kernel/rcu/Kconfig:21", "default y if PREEMPTION", "now true: PREEMPTION=y") ||
		strings.Join(rcu.Via, " > ") != "PREEMPT_DYNAMIC > PREEMPT_BUILD > PREEMPTION" {
		t.Errorf("PREEMPT_RCU %+v", rcu)
	}
	if !strings.Contains(buf.String(), "[via PREEMPT_DYNAMIC > PREEMPT_BUILD > PREEMPTION]") {
		t.Error("report lacks the chain to PREEMPT_RCU")
	}
}

// BenchmarkParsePowerpc: all of 6.1's Kconfig for SRCARCH=powerpc.
func BenchmarkParsePowerpc(b *testing.B) {
	tree := linuxTree(b)
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		if _, err := Parse(tree, "powerpc"); err != nil {
			b.Fatal(err)
		}
	}
}
