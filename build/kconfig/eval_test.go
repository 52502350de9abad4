package kconfig

import (
	"bytes"
	"strings"
	"testing"
)

func TestExprParseAndString(t *testing.T) {
	cases := map[string]string{
		"A":                          "A",
		"A && B || C":                "A && B || C",
		"A && (B || C)":              "A && (B || C)",
		"!(A && B)":                  "!(A && B)",
		"!A && !B":                   "!A && !B",
		"A = y":                      "A = y",
		`A != "foo"`:                 `A != "foo"`,
		"(((A)))":                    "A",
		"X <= 0x10 || X > 4":         "X <= 0x10 || X > 4",
		`!A = "y"`:                   "!A = y",
		"$(cc-option,-mfoo) && A":    "$(cc-option,-mfoo) && A",
		"A || B && C":                "A || B && C",
		"(A || B) && C":              "(A || B) && C",
		"PREEMPT || PREEMPT_RT || D": "PREEMPT || PREEMPT_RT || D",
	}
	for in, want := range cases {
		e, err := ParseExpr(in)
		if err != nil {
			t.Errorf("%q: %v", in, err)
			continue
		}
		if got := e.String(); got != want {
			t.Errorf("%q printed as %q, want %q", in, got, want)
		}
	}
	for _, bad := range []string{"", "A &&", "&& A", "(A", "A)", "A = ", "A B", "A = = B", "!", "A @ B", `"unterminated`} {
		if _, err := ParseExpr(bad); err == nil {
			t.Errorf("%q parsed", bad)
		}
	}
	if got := strings.Join(mustExpr(t, "A && !B || C = y || 3 < X").Symbols(), ","); got != "A,B,C,X" {
		t.Errorf("symbols %s", got)
	}
}

func mustExpr(t *testing.T, s string) *Expr {
	t.Helper()
	e, err := ParseExpr(s)
	if err != nil {
		t.Fatal(err)
	}
	return e
}

func TestEval(t *testing.T) {
	cfg := Config{"Y": "y", "M": "m", "N": "n", "MODULES": "y", "NUM": "16", "HEX": "0x20", "S": "abc"}
	cases := map[string]Tristate{
		"Y":               Yes,
		"M":               Mod,
		"N":               No,
		"ABSENT":          No,
		"!M":              Mod,
		"!Y":              No,
		"Y && M":          Mod,
		"N || M":          Mod,
		"y":               Yes,
		`"y"`:             Yes,
		"m":               Mod,
		"n":               No,
		"M = m":           Yes,
		"M != y":          Yes,
		"ABSENT = n":      Yes,
		"NUM > 8":         Yes,
		"NUM >= 17":       No,
		"NUM = 0x10":      Yes,
		"HEX < 0x21":      Yes,
		`S = "abc"`:       Yes,
		`S != "abc"`:      No,
		`S < "abd"`:       No, // no ordering of strings
		"$(shell,true)":   No,
		"!$(shell,true)":  Yes,
		"Y && !(N || M)":  Mod,
		"(Y || N) && !N":  Yes,
		"NUM = NUM":       Yes,
		`ABSENT = ""`:     No, // absent counts as n without types
		"Y && ABSENT = n": Yes,
	}
	for in, want := range cases {
		if got := Eval(mustExpr(t, in), cfg); got != want {
			t.Errorf("Eval(%s) = %s, want %s", in, got, want)
		}
	}
	if Eval(nil, cfg) != Yes {
		t.Error("nil is not y")
	}
	// m without MODULES is n, as Kconfig rewrites m to m && MODULES.
	if got := Eval(mustExpr(t, "m"), Config{}); got != No {
		t.Errorf("m without MODULES = %s", got)
	}
	// With types: an absent string symbol is "".
	kc := parseFiles(t, map[string]string{"Kconfig": "config S\n\tstring \"s\"\nconfig B\n\tbool\n"})
	if got := kc.Eval(mustExpr(t, `S = ""`), Config{}); got != Yes {
		t.Errorf("typed absent string = %s", got)
	}
	if got := kc.Eval(mustExpr(t, `UNDEFINED = "UNDEFINED"`), Config{}); got != Yes {
		t.Errorf("undefined words are their own value: %s", got)
	}
}

func TestParseConfig(t *testing.T) {
	in := `#
# Automatically generated file; DO NOT EDIT.
#
CONFIG_A=y
CONFIG_B=m
# CONFIG_C is not set
CONFIG_NUM=16
CONFIG_HEX=0xc0000000
CONFIG_S="say \"hi\" \\ there"
CONFIG_EMPTY=""

# end of General setup
`
	c, err := ParseConfig(strings.NewReader(in))
	if err != nil {
		t.Fatal(err)
	}
	want := Config{"A": "y", "B": "m", "C": "n", "NUM": "16", "HEX": "0xc0000000", "S": `say "hi" \ there`, "EMPTY": ""}
	if len(c) != len(want) {
		t.Fatalf("got %v", c)
	}
	for k, v := range want {
		if c[k] != v {
			t.Errorf("%s = %q, want %q", k, c[k], v)
		}
	}
	if c.Value("CONFIG_ABSENT") != "n" || c.Tristate("B") != Mod || c.Value("CONFIG_NUM") != "16" {
		t.Error("Value/Tristate")
	}
	// Round trip through Format.
	var buf bytes.Buffer
	if err := c.Format(&buf, nil); err != nil {
		t.Fatal(err)
	}
	back, err := ParseConfig(&buf)
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range c {
		if back[k] != v {
			t.Errorf("round trip %s: %q != %q\n%s", k, back[k], v, buf.String())
		}
	}
	for _, bad := range []string{"PREEMPT_DYNAMIC=y\n", "CONFIG_A\n", "CONFIG_=y\n", "CONFIG_S=\"open\n", "\n\nCONFIG_A y\n"} {
		_, err := ParseConfig(strings.NewReader(bad))
		if err == nil {
			t.Errorf("%q parsed", bad)
		} else if !strings.Contains(err.Error(), "config:") {
			t.Errorf("%q: error %v names no line", bad, err)
		}
	}
	_, err = ParseConfig(strings.NewReader("\n\nPREEMPT=y\n"))
	if err == nil || !strings.Contains(err.Error(), "config:3:") {
		t.Errorf("error %v does not name line 3", err)
	}
	if _, err := ReadConfig("testdata/nonexistent.config"); err == nil || !strings.Contains(err.Error(), "nonexistent.config") {
		t.Errorf("ReadConfig error %v", err)
	}
}

// A small tree with one of each situation Verify and Diff explain.
const explainTree = `
config MODULES
	bool "Modules"
	modules

config EXPERT
	bool "Expert"

config HAVE_FEATURE
	bool

config ARCH_HAS_FEATURE
	bool

config FEATURE
	bool "Feature"
	depends on HAVE_FEATURE && !EXPERT
	select HELPER
	default y if ARCH_HAS_FEATURE

config HELPER
	bool
	select HELPER2 if EXPERT

config HELPER2
	bool

config FOLLOWER
	bool
	default y if FEATURE || EXPERT

config HIDDEN
	bool "Hidden" if EXPERT
	default y

config DRIVER
	tristate "Driver"

config BOOLONLY
	bool "Bool only"

config NR
	int "Number"
	range 2 16
	default 4

choice
	prompt "Model"
	default MODEL_A

config MODEL_A
	bool "A"

config MODEL_B
	bool "B"
	select HELPER

endchoice
`

func TestVerifySynthetic(t *testing.T) {
	kc := parseFiles(t, map[string]string{"Kconfig": explainTree})
	final := Config{"MODULES": "y", "MODEL_A": "y", "HIDDEN": "y", "NR": "4", "HELPER": "n", "DRIVER": "m"}
	req := map[string]string{
		"CONFIG_FEATURE":   "y",   // unmet depends on
		"MISSING":          "y",   // not in the tree
		"MODEL_B":          "y",   // choice: A won
		"HIDDEN":           "n",   // prompt hidden, default y
		"NR":               "100", // out of range
		"BOOLONLY":         "m",   // bool cannot be m
		"DRIVER":           "m",   // fine
		"MODEL_A":          "n",   // the chosen member
		"HELPER2":          "y",   // no prompt, not selected
		"CONFIG_EXPERT":    "n",   // fine: absent = n
		"NR_TYPO_VALUE_OK": "",    // not in tree either
	}
	probs := Verify(kc, final, req)
	got := map[string]Problem{}
	for _, p := range probs {
		got[p.Symbol] = p
		t.Logf("%s", p)
	}
	expect := map[string]string{
		"FEATURE":          "FEATURE depends on HAVE_FEATURE (= n) [Kconfig:17]; HAVE_FEATURE is n because it has no prompt and nothing in this tree (SRCARCH=powerpc) selects it",
		"MISSING":          "CONFIG_MISSING does not exist in this tree",
		"MODEL_B":          `MODEL_B is a member of choice "Model" [Kconfig:47] and MODEL_A was chosen instead`,
		"HIDDEN":           "the prompt of HIDDEN is hidden (`bool \"Hidden\" if EXPERT` [Kconfig:33], EXPERT=n), so `default y` [Kconfig:34] applies",
		"NR":               "NR=100 is out of range [Kconfig:44]: `range 2 16`, so Kconfig used 4",
		"BOOLONLY":         "BOOLONLY is bool: it cannot be m",
		"MODEL_A":          `MODEL_A is the chosen member of choice "Model" [Kconfig:47]`,
		"HELPER2":          "HELPER2 has no prompt, so it cannot be set by a fragment; HELPER2 is n because it has no prompt and is only selected by HELPER if EXPERT (= n) [Kconfig:23]",
		"NR_TYPO_VALUE_OK": "does not exist",
	}
	wantKind := map[string]string{"FEATURE": "depends", "MISSING": "missing", "MODEL_B": "choice", "HIDDEN": "hidden-prompt",
		"NR": "range", "BOOLONLY": "type", "MODEL_A": "choice", "HELPER2": "no-prompt", "NR_TYPO_VALUE_OK": "missing"}
	for sym, want := range expect {
		p, ok := got[sym]
		if !ok {
			t.Errorf("%s: no problem reported", sym)
			continue
		}
		if !strings.Contains(p.Reason, want) {
			t.Errorf("%s: reason\n  %s\nwant it to contain\n  %s", sym, p.Reason, want)
		}
		if p.Kind != wantKind[sym] {
			t.Errorf("%s: kind %q, want %q", sym, p.Kind, wantKind[sym])
		}
		if len(p.Rules) == 0 && sym != "MISSING" && sym != "BOOLONLY" && sym != "NR_TYPO_VALUE_OK" {
			t.Errorf("%s: no rules", sym)
		}
	}
	if len(probs) != len(expect) {
		t.Errorf("%d problems, want %d", len(probs), len(expect))
	}
	// A forced select.
	final2 := Config{"MODULES": "y", "MODEL_B": "y", "HELPER": "y"}
	probs = Verify(kc, final2, map[string]string{"HELPER": "n"})
	if len(probs) != 1 || !strings.Contains(probs[0].Reason, "HELPER is forced to y by select from MODEL_B (= y) [Kconfig:56: select HELPER]") {
		t.Errorf("forced select: %v", probs)
	}
	// m requested without MODULES.
	probs = Verify(kc, Config{"DRIVER": "y"}, map[string]string{"DRIVER": "m"})
	if len(probs) != 1 || !strings.Contains(probs[0].Reason, "MODULES is n") {
		t.Errorf("m without modules: %v", probs)
	}
	if p := Verify(kc, final, map[string]string{"NR": "0x4", "DRIVER": `"m"`}); len(p) != 0 {
		t.Errorf("equal values reported: %v", p)
	}
}

func TestDiffSynthetic(t *testing.T) {
	kc := parseFiles(t, map[string]string{"Kconfig": explainTree})
	a := Config{"MODEL_A": "y", "HIDDEN": "y", "NR": "4"}
	b := Config{"MODEL_B": "y", "HIDDEN": "y", "NR": "4", "HELPER": "y", "EXPERT": "y", "HELPER2": "y", "FOLLOWER": "y", "GONE": "y"}
	ch := Diff(kc, a, b, map[string]string{"CONFIG_MODEL_B": "y", "EXPERT": "y"})
	var buf bytes.Buffer
	if err := FormatDiff(&buf, ch); err != nil {
		t.Fatal(err)
	}
	out := buf.String()
	t.Logf("\n%s", out)
	var order []string
	for _, c := range ch {
		order = append(order, c.Symbol)
	}
	if got := strings.Join(order, " "); got != "EXPERT MODEL_B FOLLOWER HELPER HELPER2 MODEL_A GONE" {
		t.Errorf("order %s", got)
	}
	for _, want := range []string{
		"requested  EXPERT    n -> y",
		`requested  MODEL_B   n -> y  Kconfig:47 choice "Model" (member MODEL_A -> MODEL_B)`,
		"derived    FOLLOWER  n -> y  Kconfig:30 default y if FEATURE || EXPERT (now true: EXPERT=y)",
		"derived    HELPER    n -> y  Kconfig:56 select HELPER (in config MODEL_B) (now active: MODEL_B n -> y)",
		`derived    MODEL_A   y -> n  Kconfig:47 choice "Model" (member MODEL_A -> MODEL_B)`,
		"derived    HELPER2   n -> y  Kconfig:23 select HELPER2 if EXPERT (in config HELPER) (now active: EXPERT n -> y, HELPER n -> y)",
		"derived, mechanical (no prompt; toolchain probes, environment or rules not tied to a changed symbol): GONE n -> y",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("report lacks\n  %s", want)
		}
	}
	if c := ch[4]; c.Symbol != "HELPER2" || c.Depth != 1 {
		t.Errorf("HELPER2 depth %+v", c)
	}
	// No differences, no report.
	if d := Diff(kc, a, a, nil); len(d) != 0 {
		t.Errorf("self diff %v", d)
	}
	// "n" and absent are the same value.
	if d := Diff(kc, Config{"X": "n"}, Config{}, nil); len(d) != 0 {
		t.Errorf("n vs absent %v", d)
	}
}

func TestDiffMechanicalGrouped(t *testing.T) {
	kc := parseFiles(t, map[string]string{"Kconfig": "config CC_HAS_X\n\tdef_bool $(cc-option,-mx)\nconfig CC_VERSION_TEXT\n\tstring\n\tdefault \"$(CC_VERSION_TEXT)\"\n"})
	ch := Diff(kc, Config{"CC_VERSION_TEXT": "gcc 12"}, Config{"CC_HAS_X": "y", "CC_VERSION_TEXT": "gcc 14"}, nil)
	var buf bytes.Buffer
	FormatDiff(&buf, ch)
	if got := buf.String(); !strings.HasPrefix(got, "derived, mechanical") || !strings.Contains(got, `CC_VERSION_TEXT "gcc 12" -> "gcc 14"`) || !strings.Contains(got, "CC_HAS_X n -> y") {
		t.Errorf("report %q", got)
	}
}

// Only the first default that applies counts.
func TestDiffShadowedDefault(t *testing.T) {
	kc := parseFiles(t, map[string]string{"Kconfig": `
config A
	bool "a"
config B
	bool "b"
config NR
	int
	default 8 if A
	default 4 if B
	default 1
`})
	cases := []struct {
		a, b Config
		want []string
	}{
		// B turns on but A's default already applied: nothing from B.
		{Config{"A": "y", "NR": "8"}, Config{"A": "y", "B": "y", "NR": "9"}, nil},
		// A turns off: B's default, true all along, now applies.
		{Config{"A": "y", "B": "y", "NR": "8"}, Config{"B": "y", "NR": "4"},
			[]string{"Kconfig:9 default 4 if B (now the first default that applies)", "Kconfig:8 default 8 if A (now false: A=n)"}},
		{Config{"NR": "1"}, Config{"B": "y", "NR": "4"},
			[]string{"Kconfig:9 default 4 if B (now true: B=y)"}},
	}
	for i, c := range cases {
		ch := Diff(kc, c.a, c.b, map[string]string{"A": "", "B": ""})
		var got []string
		for _, x := range ch {
			if x.Symbol == "NR" {
				for _, r := range x.Rules {
					got = append(got, r.String())
				}
			}
		}
		if strings.Join(got, "|") != strings.Join(c.want, "|") {
			t.Errorf("case %d: rules %q, want %q", i, got, c.want)
		}
	}
}
