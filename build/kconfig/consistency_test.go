package kconfig

import "testing"

// predictHidden computes the value Kconfig gives a symbol without a
// visible prompt: the first active default limited by the dependencies,
// raised by active selects. ok is false when a macro (toolchain probe)
// decides.
func predictHidden(kc *Kconfig, s *Symbol, cfg Config) (Tristate, bool) {
	dep := kc.depValue(s, cfg)
	val := No
	found := false
	for _, d := range s.Defs {
		dd := kc.Eval(depsExpr(d), cfg)
		if dd == No {
			continue
		}
		for _, p := range d.Props {
			if p.Kind != PropDefault || kc.Eval(p.Cond, cfg) == No {
				continue
			}
			if hasMacro(p.Expr) || hasMacro(p.Cond) {
				return No, false
			}
			val = minT(kc.Eval(p.Expr, cfg), minT(kc.Eval(p.Cond, cfg), dd))
			found = true
			break
		}
		if found {
			break
		}
	}
	val = minT(val, dep)
	for _, d := range s.Defs {
		if hasMacro(depsExpr(d)) {
			return No, false
		}
	}
	for _, p := range s.ImpliedBy {
		// imply is a weak select: it raises a hidden symbol within its
		// dependencies.
		val = maxT(val, minT(kc.Eval(And(Sym(p.Owner), p.Cond), cfg), dep))
	}
	for _, p := range s.SelectedBy {
		if hasMacro(p.Cond) {
			return No, false
		}
		val = maxT(val, kc.Eval(And(Sym(p.Owner), p.Cond), cfg))
	}
	if s.Type == TypeBool && val == Mod {
		val = Yes
	}
	return val, true
}

// TestHiddenSymbolsConsistent checks the reader against the kernel's own
// kconfig: every bool/tristate symbol without a prompt must have the value
// its parsed defaults, dependencies and selects give it in the real final
// config. A parse mistake (lost depends on, wrong if block, missed select)
// shows up here.
func TestHiddenSymbolsConsistent(t *testing.T) {
	tree := linuxTree(t)
	for _, c := range []struct {
		arch, cross string
		frags       []string
	}{
		{"powerpc", "powerpc64le-linux-gnu-", []string{"qemu-pseries-min.config"}},
		{"powerpc", "powerpc64le-linux-gnu-", []string{"qemu-pseries-min.config", "preempt-full.config"}},
		{"arm64", "aarch64-linux-gnu-", []string{"preempt-full.config"}},
		{"x86_64", "", []string{"preempt-dynamic.config"}},
	} {
		kc := treeKconfig(t, tree, c.arch)
		frags := append([]string{c.arch}, c.frags...)
		final := finalConfigArch(t, tree, c.arch, c.cross, c.frags...)
		checked, bad := 0, 0
		for name, s := range kc.Symbols {
			if !s.Defined() || s.HasPrompt() || s.Choice != nil || (s.Type != TypeBool && s.Type != TypeTristate) {
				continue
			}
			want, ok := predictHidden(kc, s, final)
			if !ok {
				continue
			}
			checked++
			if got := final.Tristate(name); got != want {
				bad++
				if bad <= 20 {
					t.Errorf("%v: %s is %s in the real config, the parsed Kconfig gives %s", frags, name, got, want)
				}
			}
		}
		// Every symbol that is on has its dependencies met or is selected.
		for name, v := range final {
			s := kc.Symbols[name]
			if v == "n" || !s.Defined() || kc.depValue(s, final) > No {
				continue
			}
			macro := false
			for _, d := range s.Defs {
				macro = macro || hasMacro(depsExpr(d))
			}
			if macro {
				continue
			}
			selected := false
			for _, p := range s.SelectedBy {
				selected = selected || kc.Eval(And(Sym(p.Owner), p.Cond), final) > No || hasMacro(p.Cond)
			}
			if !selected {
				bad++
				t.Errorf("%v: CONFIG_%s=%s but its parsed dependencies are n and nothing selects it", frags, name, v)
			}
		}
		t.Logf("%v: %d hidden symbols checked, %d mismatches", frags, checked, bad)
		if c.arch != "powerpc" {
			// PREEMPT_DYNAMIC (x86: HAVE_PREEMPT_DYNAMIC_CALL) and
			// PREEMPT (arm64) hold where the arch supports them.
			for _, f := range c.frags {
				if probs := Verify(kc, final, fragment(t, f)); len(probs) != 0 {
					t.Errorf("%v: %v", frags, probs)
				}
			}
		}
		if checked < 2000 {
			t.Errorf("only %d symbols checked", checked)
		}
	}
}
