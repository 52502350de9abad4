package kconfig

import (
	"bufio"
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"testing/fstest"
	"time"
)

func parseFiles(t *testing.T, files map[string]string) *Kconfig {
	t.Helper()
	kc, err := parseMap(files)
	if err != nil {
		t.Fatal(err)
	}
	return kc
}

func parseMap(files map[string]string) (*Kconfig, error) {
	fsys := fstest.MapFS{}
	for n, s := range files {
		fsys[n] = &fstest.MapFile{Data: []byte(s)}
	}
	return ParseFS(fsys, "powerpc")
}

const synthTop = `# SPDX-License-Identifier: GPL-2.0
mainmenu "Linux/$(ARCH) Kernel Configuration"

comma := ,
cc-option = $(success,$(CC) -Werror $(1) -c -x c /dev/null)
success = $(shell,{ $(1); } >/dev/null 2>&1 && echo y || echo n)
greet = hello-$(1)-$(2)
SIMPLE := $(greet,a,b)

source "arch/$(SRCARCH)/Kconfig"
osource "does/not/exist/Kconfig"
source "kernel/Kconfig"
`

const synthArch = `config PPC
	def_bool y
	select HAVE_THING
	select MAYBE if EXPERT
	imply SUGGESTED

config CC_HAS_FOO
	def_bool $(cc-option,-mfoo)
`

const synthKernel = `config EXPERT
	bool "Expert mode"
	help
	  Say Y here.

	  More help, with a blank line above and config words: config FAKE
	    indented deeper
config HAVE_THING
	bool

config MAYBE
	tristate

config SUGGESTED
	tristate "Suggested" \
		if EXPERT
	depends on HAVE_THING

config MODULES
	bool "Modules"
	modules

menu "Scheduler"
	depends on HAVE_THING
	visible if EXPERT

if PPC && !MISSING

choice
	prompt "Model"
	default MODEL_A if !EXPERT
	default MODEL_B

config MODEL_A
	bool "A"

config MODEL_B
	bool "B"
	depends on EXPERT
	select HAVE_B

endchoice

config HAVE_B
	bool

config NR
	int "Number" if EXPERT
	range 2 8 if EXPERT
	range 1 1
	default 4

config ADDR
	hex "Address"
	default 0xc0000000

config NAME
	string "Name"
	default "$(SIMPLE)"

endif # PPC

comment "Only a comment"
	depends on EXPERT

menuconfig BIG
	bool "Big feature"
	option modules
	transitional

rsource "Kconfig.sub"

endmenu

config OUTSIDE
	bool "Outside"
	default y if NR >= 4 && ADDR != 0x0 || NAME = "x"
`

const synthSub = `config SUB
	tristate "Sub" if BIG
	default m
`

func synthTree(t *testing.T) *Kconfig {
	return parseFiles(t, map[string]string{
		"Kconfig":               synthTop,
		"arch/powerpc/Kconfig":  synthArch,
		"kernel/Kconfig":        synthKernel,
		"kernel/Kconfig.sub":    synthSub,
		"arch/x86/Kconfig":      "config X86\n\tdef_bool y\n",
		"kernel/Kconfig.unused": "this is not kconfig\n",
	})
}

func TestParseSynthetic(t *testing.T) {
	kc := synthTree(t)
	if kc.MainMenu != "Linux/powerpc Kernel Configuration" {
		t.Errorf("mainmenu %q", kc.MainMenu)
	}
	if got := strings.Join(kc.Files, " "); got != "Kconfig arch/powerpc/Kconfig kernel/Kconfig kernel/Kconfig.sub" {
		t.Errorf("files %s", got)
	}
	if kc.Symbol("X86") != nil {
		t.Error("x86 Kconfig read for powerpc")
	}
	// select / imply linked back, with the if condition and position.
	ht := kc.Symbol("HAVE_THING")
	if len(ht.SelectedBy) != 1 || ht.SelectedBy[0].Owner != "PPC" || ht.SelectedBy[0].Pos.String() != "arch/powerpc/Kconfig:3" {
		t.Errorf("HAVE_THING selected by %+v", ht.SelectedBy)
	}
	if m := kc.Symbol("MAYBE"); len(m.SelectedBy) != 1 || m.SelectedBy[0].Cond.String() != "EXPERT" || m.Type != TypeTristate {
		t.Errorf("MAYBE %+v", m)
	}
	if s := kc.Symbol("SUGGESTED"); len(s.ImpliedBy) != 1 || s.ImpliedBy[0].Text != "imply SUGGESTED" {
		t.Errorf("SUGGESTED implied by %+v", s.ImpliedBy)
	}
	// Unknown macro stays an unknown-valued token.
	cc := kc.Symbol("CC_HAS_FOO").Props(PropDefault)
	if len(cc) != 1 || cc[0].Expr.Op != OpMacro || cc[0].Expr.Name != "$(cc-option,-mfoo)" || cc[0].Text != "def_bool $(cc-option,-mfoo)" {
		t.Errorf("CC_HAS_FOO default %+v", cc[0].Expr)
	}
	// Help text: indent-terminated, blank lines kept, next config parsed.
	ex := kc.Symbol("EXPERT")
	if !strings.HasPrefix(ex.Defs[0].Help, "Say Y here.\n\nMore help") || !strings.Contains(ex.Defs[0].Help, "indented deeper") {
		t.Errorf("help %q", ex.Defs[0].Help)
	}
	if kc.Symbol("FAKE") != nil {
		t.Error("help text parsed as config")
	}
	// Continuation line and prompt condition.
	sg := kc.Symbol("SUGGESTED").Props(PropPrompt)
	if len(sg) != 1 || sg[0].Prompt != "Suggested" || sg[0].Cond.String() != "EXPERT" || sg[0].Pos.Line != 15 {
		t.Errorf("SUGGESTED prompt %+v", sg)
	}
	if !kc.Symbol("MODULES").Defs[0].Modules || !kc.Symbol("BIG").Defs[0].Modules || !kc.Symbol("BIG").Defs[0].Menuconfig {
		t.Error("modules / menuconfig not recorded")
	}
	// menu depends on + if propagate; visible if is kept apart.
	a := kc.Symbol("MODEL_A").Defs[0]
	var deps []string
	for _, d := range a.Deps {
		deps = append(deps, d.Kind.String()+" "+d.Expr.String()+" @"+d.Pos.String())
	}
	if got := strings.Join(deps, "; "); got != "depends on HAVE_THING @kernel/Kconfig:24; if PPC && !MISSING @kernel/Kconfig:27" {
		t.Errorf("MODEL_A deps: %s", got)
	}
	if len(a.Visible) != 1 || a.Visible[0].Expr.String() != "EXPERT" {
		t.Errorf("visible %+v", a.Visible)
	}
	// choice: members, defaults, member deps.
	c := kc.Symbol("MODEL_A").Choice
	if c == nil || c.Prompt != "Model" || len(c.Members) != 2 || c.Members[1].Name != "MODEL_B" || c.Type != TypeBool {
		t.Fatalf("choice %+v", c)
	}
	if d := c.Defaults(); len(d) != 2 || d[0].Cond.String() != "!EXPERT" || d[1].Expr.Name != "MODEL_B" {
		t.Errorf("choice defaults %+v", d)
	}
	if kc.Symbol("HAVE_B").Choice != nil {
		t.Error("HAVE_B (after endchoice) is a choice member")
	}
	if got := depsExpr(kc.Symbol("MODEL_B").Defs[0]).String(); got != "HAVE_THING && PPC && !MISSING && EXPERT" {
		t.Errorf("MODEL_B deps %s", got)
	}
	// ranges, types, defaults.
	nr := kc.Symbol("NR")
	if r := nr.Props(PropRange); len(r) != 2 || r[0].Expr.Name != "2" || r[0].Expr2.Name != "8" || r[0].Cond.String() != "EXPERT" {
		t.Errorf("ranges %+v", r)
	}
	if kc.Symbol("ADDR").Type != TypeHex || kc.Symbol("NAME").Type != TypeString {
		t.Error("types")
	}
	if d := kc.Symbol("NAME").Props(PropDefault); d[0].Expr.Op != OpConst || d[0].Expr.Name != "hello-a-b" {
		t.Errorf("NAME default %+v (recursive macro with arguments)", d[0].Expr)
	}
	// rsource relative to the current file, inside the menu.
	sub := kc.Symbol("SUB")
	if sub.Defs[0].Pos.String() != "kernel/Kconfig.sub:1" || len(sub.Defs[0].Deps) != 1 || sub.Defs[0].Deps[0].Expr.String() != "HAVE_THING" {
		t.Errorf("SUB %+v", sub.Defs[0])
	}
	if out := kc.Symbol("OUTSIDE"); len(out.Defs[0].Deps) != 0 ||
		out.Props(PropDefault)[0].Cond.String() != `NR >= 4 && ADDR != 0x0 || NAME = "x"` {
		t.Errorf("OUTSIDE %+v", out.Defs[0])
	}
}

func TestParseErrors(t *testing.T) {
	cases := []struct {
		name  string
		files map[string]string
		want  string
	}{
		{"unterminated choice", map[string]string{"Kconfig": "config A\n\tbool\n\nchoice\n\tprompt \"x\"\nconfig B\n\tbool \"b\"\n"},
			"Kconfig:4: choice without endchoice before the end of Kconfig"},
		{"choice closed in another file", map[string]string{"Kconfig": "choice\n\tprompt \"x\"\nsource \"b/Kconfig\"\n", "b/Kconfig": "config B\n\tbool \"b\"\nendchoice\n"},
			"b/Kconfig:3: endchoice closes the choice opened at Kconfig:1 in another file"},
		{"bad expression", map[string]string{"Kconfig": "config A\n\tbool\n\tdepends on B &&\n"},
			"Kconfig:3: bad expression in depends on: expected a symbol, '!' or '(', found end of line"},
		{"bad expression in sourced file", map[string]string{"Kconfig": "source \"k/Kconfig\"\n", "k/Kconfig": "\nconfig A\n\tbool\n\tdefault y if (B || C\n"},
			"k/Kconfig:4: bad expression in default condition: missing ')'"},
		{"comparison needs symbol", map[string]string{"Kconfig": "config A\n\tbool\n\tdepends on B = && C\n"},
			"Kconfig:3: bad expression in depends on: expected a symbol after =, found '&&'"},
		{"trailing junk", map[string]string{"Kconfig": "if A B\nendif\n"},
			"Kconfig:1: bad expression in if: unexpected \"B\" after expression"},
		{"endif without if", map[string]string{"Kconfig": "endif\n"}, "Kconfig:1: endif without if"},
		{"endmenu in if", map[string]string{"Kconfig": "if A\nendmenu\n"}, "Kconfig:2: endmenu inside if opened at Kconfig:1"},
		{"unknown statement", map[string]string{"Kconfig": "frobnicate A\n"}, `Kconfig:1: unknown statement "frobnicate"`},
		{"unknown attribute", map[string]string{"Kconfig": "config A\n\tbool\n\tfrobnicate\n"}, `Kconfig:3: unknown attribute "frobnicate"`},
		{"missing source", map[string]string{"Kconfig": "\nsource \"nope/Kconfig\"\n"}, `Kconfig:2: cannot source "nope/Kconfig"`},
		{"recursive source", map[string]string{"Kconfig": "source \"Kconfig\"\n"}, "Kconfig:1: recursive inclusion of Kconfig"},
		{"source escapes tree", map[string]string{"Kconfig": "source \"../x\"\n"}, "path leaves the source tree"},
		{"unterminated string", map[string]string{"Kconfig": "config A\n\tbool \"abc\n"}, "Kconfig:2: unterminated string"},
		{"unterminated macro", map[string]string{"Kconfig": "config A\n\tdef_bool $(shell,x\n"}, "Kconfig:2: unterminated macro"},
		{"recursive variable", map[string]string{"Kconfig": "X = $(X)\nconfig A\n\tdef_bool $(X)\n"}, "Kconfig:3: macro recursion too deep"},
		{"type clash", map[string]string{"Kconfig": "config A\n\tbool\n\tint\n"}, "Kconfig:3: int redefines the type of A (was bool)"},
		{"select outside config", map[string]string{"Kconfig": "choice\n\tselect A\nendchoice\n"}, "Kconfig:2: select is only allowed in a config entry"},
		{"attribute outside entry", map[string]string{"Kconfig": "if A\n\tdefault y\nendif\n"}, `Kconfig:2: unknown statement "default"`},
		{"no top Kconfig", map[string]string{"Makefile": ""}, "cannot read Kconfig"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := parseMap(c.files)
			if err == nil {
				t.Fatalf("no error, want %q", c.want)
			}
			if !strings.Contains(err.Error(), c.want) {
				t.Fatalf("error %q, want %q", err, c.want)
			}
			var ke *Error
			if strings.HasPrefix(c.want, "Kconfig") || strings.HasPrefix(c.want, "b/") || strings.HasPrefix(c.want, "k/") {
				if !errors.As(err, &ke) || ke.Pos.Line == 0 {
					t.Errorf("error %v carries no position", err)
				}
			}
		})
	}
}

func TestParseDirMissing(t *testing.T) {
	if _, err := Parse(t.TempDir(), "powerpc"); err == nil || !strings.Contains(err.Error(), "not a kernel source tree") {
		t.Fatalf("err %v", err)
	}
}

// FuzzParse: any single Kconfig file parses or fails cleanly, quickly.
func FuzzParse(f *testing.F) {
	for _, s := range []string{synthKernel, synthArch, synthTop, synthSub,
		"choice\nconfig A\n\tbool \"a\"\nendchoice\n",
		"X = $(X)$(X)\nconfig A\n\tdef_bool $(X)\n",
		"A = $(B)$(B)\nB = $(C)$(C)\nC = $(D)$(D)\nD = $(E)$(E)\nE = x\nconfig Q\n\tdefault \"$(A)\"\n",
		"config A\n\thelp\n\t  text\n\t\nconfig B\n\tint\n\trange 1 $(x)\n",
		"config A\n\tbool\n\tdepends on ((((A)))) && !(B = \"c\" || C <= 0x10)\n",
		"source \"Kconfig\"\n",
		"config A\n\tbool\n\tdepends on B if !(C || D = \"x\")\n\ttransitional\n",
	} {
		f.Add(s)
	}
	// The kernel's own Kconfig files: small ones copied into testdata,
	// and, for a campaign (bench/fuzz.sh), every small Kconfig file of the
	// imported tree named by PATCHEVAL_FUZZ_KERNEL_GIT.
	files, _ := filepath.Glob("testdata/kernel-kconfig/*")
	for _, p := range files {
		b, err := os.ReadFile(p)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(string(b))
	}
	for _, s := range kernelKconfigSeeds(f, os.Getenv("PATCHEVAL_FUZZ_KERNEL_GIT"), 8<<10, 400) {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		start := time.Now()
		kc, err := parseMap(map[string]string{"Kconfig": s})
		if d := time.Since(start); d > 2*time.Second {
			t.Fatalf("parse took %v", d)
		}
		if err != nil {
			var ke *Error
			if errors.As(err, &ke) && (ke.Pos.File != "Kconfig" || ke.Pos.Line < 1) {
				t.Fatalf("error at a bad position: %v", err)
			}
			return
		}
		// Everything parsed must print and evaluate without trouble.
		cfg := Config{"A": "y", "MODULES": "y"}
		for _, sym := range kc.Symbols {
			for _, d := range sym.Defs {
				kc.Eval(depsExpr(d), cfg)
				for _, p := range d.Props {
					_ = p.Expr.String() + p.Cond.String()
					kc.Eval(p.Cond, cfg)
					if e, err := ParseExpr(p.Cond.String()); p.Cond != nil && (err != nil || e.String() != p.Cond.String()) {
						if p.Cond.Op != OpMacro && !hasMacro(p.Cond) {
							t.Fatalf("condition %q does not round-trip: %v", p.Cond, err)
						}
					}
				}
			}
		}
		Verify(kc, cfg, map[string]string{"A": "n", "B": "y", "C": "5"})
		Diff(kc, cfg, Config{"B": "y"}, map[string]string{"B": "y"})
	})
}

func hasMacro(e *Expr) bool {
	if e == nil {
		return false
	}
	return e.Op == OpMacro || hasMacro(e.L) || hasMacro(e.R)
}

// make ARCH=x86_64: $(SRCARCH) is x86, $(ARCH) stays x86_64.
func TestParseArchAlias(t *testing.T) {
	fsys := fstest.MapFS{
		"Kconfig":          {Data: []byte("source \"arch/$(SRCARCH)/Kconfig\"\n")},
		"arch/x86/Kconfig": {Data: []byte("config 64BIT\n\tbool \"64-bit kernel\" if \"$(ARCH)\" = \"x86\"\n\tdefault \"$(ARCH)\" != \"i386\"\n")},
	}
	for arch, visible := range map[string]bool{"x86_64": false, "x86": true, "i386": false} {
		kc, err := ParseFS(fsys, arch)
		if err != nil {
			t.Fatal(err)
		}
		s := kc.Symbol("64BIT")
		if kc.SrcArch != "x86" || s == nil {
			t.Fatalf("%s: SrcArch %s", arch, kc.SrcArch)
		}
		if _, ok := kc.promptVisible(s, Config{}); ok != visible {
			t.Errorf("%s: prompt visible %v", arch, ok)
		}
		if got := kc.Eval(s.Props(PropDefault)[0].Expr, Config{}); (got == Yes) != (arch != "i386") {
			t.Errorf("%s: default %s", arch, got)
		}
	}
}

// kernelKconfigSeeds reads up to max Kconfig files of at most size bytes
// from the git repository gitDir (HEAD); none when gitDir is "".
func kernelKconfigSeeds(f *testing.F, gitDir string, size, max int) []string {
	if gitDir == "" {
		return nil
	}
	out, err := exec.Command("git", "--git-dir", gitDir, "ls-tree", "-r", "-l", "HEAD").Output()
	if err != nil {
		f.Fatalf("PATCHEVAL_FUZZ_KERNEL_GIT=%s: %v", gitDir, err)
	}
	var seeds []string
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() && len(seeds) < max {
		// "<mode> blob <hash> <size>\t<path>"
		meta, path, ok := strings.Cut(sc.Text(), "\t")
		fs := strings.Fields(meta)
		if !ok || len(fs) != 4 || !strings.HasPrefix(filepath.Base(path), "Kconfig") {
			continue
		}
		if n, err := strconv.Atoi(fs[3]); err != nil || n > size {
			continue
		}
		b, err := exec.Command("git", "--git-dir", gitDir, "cat-file", "blob", fs[2]).Output()
		if err != nil {
			f.Fatal(err)
		}
		seeds = append(seeds, string(b))
	}
	return seeds
}

// Conditional dependencies (Kconfig since 6.18): `depends on D if C` is
// the kernel's `D || (C = n)` (scripts/kconfig/menu.c menu_add_dep), not
// `D || !C`: with C=m a tristate C is not n, so D still binds.
func TestParseConditionalDepends(t *testing.T) {
	kc := parseFiles(t, map[string]string{"Kconfig": `config MODULES
	bool "Modules"
	modules
config USB
	tristate "USB"
config USB_GADGET
	tristate "Gadget"
config CDNS
	tristate "Cadence"
	depends on USB if !USB_GADGET
	depends on HAS_DMA
config BOTH
	bool "Both"
	depends on (USB && USB_GADGET) if (USB || USB_GADGET)
config SELF
	tristate "Self"
	depends on USB if USB
config HAS_DMA
	def_bool y
menu "Gadgets"
	depends on USB_GADGET if USB
config IN_MENU
	bool "In menu"
endmenu
`})
	cdns := kc.Symbol("CDNS").Defs[0]
	if len(cdns.Deps) != 2 || cdns.Deps[0].Text != "depends on USB if !USB_GADGET" || cdns.Deps[0].Cond.String() != "!USB_GADGET" ||
		cdns.Deps[0].Expr.String() != "USB || USB_GADGET != n" || cdns.Deps[0].Pos.Line != 10 {
		t.Fatalf("CDNS deps %+v", cdns.Deps[0])
	}
	if got := depsExpr(kc.Symbol("BOTH").Defs[0]).String(); got != "USB && USB_GADGET || USB = n && USB_GADGET = n" {
		t.Errorf("BOTH deps %q", got)
	}
	if got := depsExpr(kc.Symbol("IN_MENU").Defs[0]).String(); got != "USB_GADGET || USB = n" {
		t.Errorf("IN_MENU deps %q", got)
	}
	for _, c := range []struct {
		cfg  Config
		sym  string
		want Tristate
	}{
		{Config{"MODULES": "y", "HAS_DMA": "y"}, "CDNS", No},                     // no gadget: USB needed, absent
		{Config{"MODULES": "y", "HAS_DMA": "y", "USB_GADGET": "y"}, "CDNS", Yes}, // gadget: USB not needed
		{Config{"MODULES": "y", "HAS_DMA": "y", "USB": "m"}, "CDNS", Mod},
		{Config{"MODULES": "y", "HAS_DMA": "y", "USB_GADGET": "m"}, "CDNS", Yes}, // !m is m, but m != n: the kernel's rewrite
		{Config{"MODULES": "y", "USB_GADGET": "y"}, "CDNS", No},                  // the other depends on still holds
		{Config{"MODULES": "y"}, "BOTH", Yes},
		{Config{"MODULES": "y", "USB": "y"}, "BOTH", No},
		{Config{"MODULES": "y", "USB": "y", "USB_GADGET": "y"}, "BOTH", Yes},
		{Config{"MODULES": "y"}, "SELF", Yes},
		{Config{"MODULES": "y", "USB": "m"}, "SELF", Mod},
		{Config{"MODULES": "y", "USB": "y"}, "IN_MENU", No},
		{Config{"MODULES": "y"}, "IN_MENU", Yes},
	} {
		if got := kc.depValue(kc.Symbol(c.sym), c.cfg); got != c.want {
			t.Errorf("%s with %v: dependency %s, want %s", c.sym, c.cfg, got, c.want)
		}
	}
	// Tristate: `depends on D if C` with C=m and D=n is n (C = n is
	// false); `D || !C` would give m.
	kc2 := parseFiles(t, map[string]string{"Kconfig": "config MODULES\n\tbool \"m\"\n\tmodules\nconfig D\n\ttristate \"d\"\nconfig C\n\ttristate \"c\"\nconfig X\n\ttristate \"x\"\n\tdepends on D if C\n"})
	if got := kc2.depValue(kc2.Symbol("X"), Config{"MODULES": "y", "C": "m"}); got != No {
		t.Errorf("X with C=m, D=n: %s, want n", got)
	}
	for _, bad := range []string{"depends on if X", "depends on X if", "depends on X if Y if Z"} {
		if _, err := parseMap(map[string]string{"Kconfig": "config A\n\tbool\n\t" + bad + "\n"}); err == nil || !strings.Contains(err.Error(), "Kconfig:3: bad expression in depends on") {
			t.Errorf("%q: err %v", bad, err)
		}
	}
}

// Assignment names with '$' and references, as the kernel's lexer
// allows (`({n}|$)+`; scripts/kconfig/tests/preprocess).
func TestParseAssignmentNames(t *testing.T) {
	kc := parseFiles(t, map[string]string{"Kconfig": `X := A
Y := B
$(X)$(Y) := 5
$ := 1
config N
	int "n"
	default $(AB)
config D
	int "d"
	default $($)
`})
	for sym, want := range map[string]string{"N": "5", "D": "1"} {
		if d := kc.Symbol(sym).Props(PropDefault); len(d) != 1 || d[0].Expr.String() != want {
			t.Errorf("%s default %v, want %s", sym, d, want)
		}
	}
	if _, err := parseMap(map[string]string{"Kconfig": "$(shell,true) := 1\n"}); err == nil || !strings.Contains(err.Error(), "Kconfig:1: assignment to") {
		t.Errorf("unknown name: err %v", err)
	}
}
