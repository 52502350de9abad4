package kconfig

import (
	"bytes"
	"fmt"
	"io/fs"
	"os"
	"path"
	"sort"
	"strings"

	"github.com/patcheval/patcheval/internal/arch"
	"github.com/patcheval/patcheval/internal/lazyre"
)

// Type is a Kconfig symbol type.
type Type int8

// Symbol types.
const (
	TypeUnknown Type = iota
	TypeBool
	TypeTristate
	TypeString
	TypeInt
	TypeHex
)

func (t Type) String() string {
	return [...]string{"unknown", "bool", "tristate", "string", "int", "hex"}[t]
}

// Pos is a place in the tree's Kconfig sources; File is relative to the
// source directory (kernel/rcu/Kconfig).
type Pos struct {
	File string
	Line int
}

func (p Pos) String() string { return fmt.Sprintf("%s:%d", p.File, p.Line) }

// PropKind says what a Property is.
type PropKind int8

// Property kinds.
const (
	PropPrompt    PropKind = iota // bool "text" [if E] / prompt "text" [if E]
	PropDefault                   // default V [if E], def_bool V [if E]
	PropSelect                    // select SYM [if E]
	PropImply                     // imply SYM [if E]
	PropRange                     // range A B [if E]
	PropDepends                   // depends on E (of a config, choice, menu or comment)
	PropIf                        // an enclosing `if E` block
	PropVisibleIf                 // visible if E (of a menu)
)

func (k PropKind) String() string {
	return [...]string{"prompt", "default", "select", "imply", "range", "depends on", "if", "visible if"}[k]
}

// Property is one line of a Kconfig entry, or an enclosing `if` block.
type Property struct {
	Kind   PropKind
	Owner  string // the symbol that carries it; "" for choices, menus and if blocks
	Prompt string // PropPrompt
	// Expr is the default value, the select/imply target (an OpSym), the
	// dependency, or the low end of a range.
	Expr  *Expr
	Expr2 *Expr // high end of a range
	// Cond is the explicit `if E`, nil when none. For a conditional
	// `depends on D if E` Expr is already the kernel's rewrite
	// `D || (E = n)` and Cond only records E as written.
	Cond *Expr
	Pos  Pos
	Text string // the source line as written, trimmed
	// Def is the definition the property belongs to (nil for if blocks and
	// menu dependencies); its Deps apply to the property as well.
	Def *Definition
}

// Definition is one `config NAME` or `menuconfig NAME` block. A symbol may
// be defined several times (for example once per architecture).
type Definition struct {
	Symbol     *Symbol
	Pos        Pos
	Menuconfig bool
	Type       Type
	Props      []*Property // prompt, default, select, imply, range, in source order
	// Deps are all the conditions the definition depends on, ANDed: those
	// of enclosing if blocks, menus and the choice, then its own
	// `depends on` lines.
	Deps    []*Property
	Visible []*Property // `visible if` of enclosing menus (hide prompts only)
	Choice  *Choice     // the choice it is a member of, if any
	Help    string
	Modules bool // `modules` / `option modules`
}

// Symbol is a Kconfig symbol with all its definitions.
type Symbol struct {
	Name       string
	Type       Type
	Defs       []*Definition
	SelectedBy []*Property // `select Name` lines of other symbols
	ImpliedBy  []*Property // `imply Name` lines of other symbols
	Choice     *Choice     // non-nil for a choice member
}

// Defined reports whether the tree has a `config` entry for the symbol
// (a symbol that is only selected or referenced is not defined).
func (s *Symbol) Defined() bool { return s != nil && len(s.Defs) > 0 }

// HasPrompt reports whether any definition gives the symbol a prompt,
// i.e. whether a user can set it at all.
func (s *Symbol) HasPrompt() bool {
	for _, d := range s.Defs {
		for _, p := range d.Props {
			if p.Kind == PropPrompt {
				return true
			}
		}
	}
	return false
}

// Props lists the properties of all definitions of kind k.
func (s *Symbol) Props(k PropKind) []*Property {
	var out []*Property
	for _, d := range s.Defs {
		for _, p := range d.Props {
			if p.Kind == k {
				out = append(out, p)
			}
		}
	}
	return out
}

// Choice is a choice ... endchoice block.
type Choice struct {
	Name     string // optional
	Pos      Pos
	Prompt   string
	Type     Type
	Optional bool
	Props    []*Property // prompt and default lines
	Deps     []*Property // enclosing blocks and the choice's own `depends on`
	Members  []*Symbol
	Help     string
}

// Defaults are the choice's `default SYM [if E]` lines.
func (c *Choice) Defaults() []*Property {
	var out []*Property
	for _, p := range c.Props {
		if p.Kind == PropDefault {
			out = append(out, p)
		}
	}
	return out
}

// Menu is a menu ... endmenu block.
type Menu struct {
	Prompt  string
	Pos     Pos
	Deps    []*Property
	Visible []*Property
}

// Kconfig is the whole Kconfig tree of one source directory for one
// architecture.
type Kconfig struct {
	SrcDir   string
	SrcArch  string
	MainMenu string
	Symbols  map[string]*Symbol
	Choices  []*Choice
	Menus    []*Menu
	Files    []string // every Kconfig file read, in order
	Lines    int      // lines read
}

// Symbol returns the named symbol (CONFIG_ prefix allowed) or nil.
func (kc *Kconfig) Symbol(name string) *Symbol {
	return kc.Symbols[strings.TrimPrefix(name, "CONFIG_")]
}

// Error is a Kconfig syntax error at a place in the sources.
type Error struct {
	Pos Pos
	Msg string
}

func (e *Error) Error() string { return e.Pos.String() + ": " + e.Msg }

// Parse reads the Kconfig tree of the kernel source directory srcDir for
// the architecture directory srcArch (powerpc, arm64, x86: the SRCARCH of
// `make ARCH=...`; x86_64 and the like are mapped as ParseFS says),
// starting at srcDir/Kconfig.
func Parse(srcDir, srcArch string) (*Kconfig, error) {
	if _, err := os.Stat(path.Join(srcDir, "Kconfig")); err != nil {
		return nil, fmt.Errorf("kconfig: %s is not a kernel source tree: %w", srcDir, err)
	}
	kc, err := ParseFS(os.DirFS(srcDir), srcArch)
	if kc != nil {
		kc.SrcDir = srcDir
	}
	return kc, err
}

// ParseFS is Parse over a file system whose root is the source directory.
//
// karch is the SRCARCH (powerpc, arm64, x86) or an ARCH the kernel's
// Makefile maps to one (x86_64, i386): then $(ARCH) is the value given and
// $(SRCARCH) the arch/ directory, as with `make ARCH=x86_64`.
func ParseFS(fsys fs.FS, karch string) (*Kconfig, error) {
	srcArch := karch
	if _, err := fs.Stat(fsys, "arch/"+karch+"/Kconfig"); err != nil {
		srcArch = arch.SrcArch(karch)
	}
	p := &parser{
		fsys: fsys,
		kc:   &Kconfig{SrcArch: srcArch, Symbols: map[string]*Symbol{}},
		mac: &macros{vars: map[string]*variable{}, env: map[string]string{
			"SRCARCH": srcArch, "ARCH": karch, "srctree": ".",
		}},
	}
	if srcArch == "um" {
		// User-mode Linux on an x86-64 host, as arch/um/Makefile
		// sets them.
		p.mac.env["SUBARCH"], p.mac.env["HEADER_ARCH"] = "x86", "x86"
	}
	if err := p.source("Kconfig", Pos{}, false); err != nil {
		return nil, err
	}
	p.finish()
	return p.kc, nil
}

type blockKind int8

const (
	blockIf blockKind = iota
	blockMenu
	blockChoice
)

func (k blockKind) String() string {
	return [...]string{"if", "menu", "choice"}[k]
}

type block struct {
	kind    blockKind
	pos     Pos
	deps    []*Property
	visible []*Property
	choice  *Choice
}

type entryKind int8

const (
	entryNone entryKind = iota
	entryConfig
	entryChoice
	entryMenu
	entryComment
)

type parser struct {
	fsys  fs.FS
	kc    *Kconfig
	mac   *macros
	stack []*block
	files []string // source nesting

	entry  entryKind
	def    *Definition
	choice *Choice
	menu   *Menu
}

var assignRe = lazyre.New(`^\s*([A-Za-z0-9_$-]+)\s*(:=|\+=|=)(.*)$`)

// assignment matches a macro assignment line (NAME := value). As in the
// kernel's lexer (`({n}|$)+`), the name may contain '$' and variable
// references ($(X)$(Y) := 5): those are returned unexpanded, with
// macroName telling.
func assignment(line string) []string {
	i := strings.IndexByte(line, '=')
	if i <= 0 {
		return nil
	}
	// Blank out the references of the name so that the pattern sees one
	// word: "$(X)$(Y) := 5" -> "$____$____ := 5".
	masked := []byte(line[:i])
	for j := 0; j < len(masked); j++ {
		switch masked[j] {
		case '"', '#':
			return nil
		case '$':
			if j+1 < len(masked) && masked[j+1] == '(' {
				end, ok := macroEnd(line, j)
				if !ok || end > i {
					return nil
				}
				for k := j + 1; k < end; k++ {
					masked[k] = '_'
				}
				j = end - 1
			}
		}
	}
	m := assignRe.FindStringSubmatchIndex(string(masked) + line[i:])
	if m == nil {
		return nil
	}
	return []string{line, line[m[2]:m[3]], line[m[4]:m[5]], line[m[6]:m[7]]}
}

func (p *parser) errf(pos Pos, format string, a ...any) error {
	return &Error{Pos: pos, Msg: fmt.Sprintf(format, a...)}
}

const maxSourceDepth = 64

// source reads one file. from is the `source` line (zero for the top).
func (p *parser) source(name string, from Pos, optional bool) error {
	clean := path.Clean(name)
	if !fs.ValidPath(clean) {
		return p.errf(from, "cannot source %q: path leaves the source tree", name)
	}
	matches := []string{clean}
	if strings.ContainsAny(clean, "*?[") {
		m, err := fs.Glob(p.fsys, clean)
		if err != nil {
			return p.errf(from, "bad source pattern %q: %v", name, err)
		}
		matches = m
		if len(m) == 0 && !optional {
			return p.errf(from, "source %q matches no file", name)
		}
	}
	for _, f := range matches {
		data, err := fs.ReadFile(p.fsys, f)
		if err != nil {
			if optional {
				continue
			}
			if from.File == "" {
				return fmt.Errorf("kconfig: cannot read %s: %w", f, err)
			}
			return p.errf(from, "cannot source %q: %v", f, err)
		}
		for _, open := range p.files {
			if open == f {
				return p.errf(from, "recursive inclusion of %s", f)
			}
		}
		if len(p.files) >= maxSourceDepth {
			return p.errf(from, "source nesting deeper than %d", maxSourceDepth)
		}
		p.files = append(p.files, f)
		p.kc.Files = append(p.kc.Files, f)
		err = p.parseFile(f, data)
		p.files = p.files[:len(p.files)-1]
		if err != nil {
			return err
		}
	}
	return nil
}

func indentOf(s string) (int, bool) {
	n := 0
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case ' ':
			n++
		case '\t':
			n = (n/8 + 1) * 8
		case '\r', '\n':
			return n, true
		default:
			return n, false
		}
	}
	return n, true // blank
}

func (p *parser) parseFile(file string, data []byte) error {
	lines := strings.Split(string(bytes.ReplaceAll(data, []byte("\r\n"), []byte("\n"))), "\n")
	depth := len(p.stack)
	for i := 0; i < len(lines); i++ {
		start := i + 1
		line := lines[i]
		for strings.HasSuffix(line, "\\") && i+1 < len(lines) {
			i++
			line = line[:len(line)-1] + lines[i]
		}
		p.kc.Lines++
		pos := Pos{file, start}
		trim := strings.TrimSpace(line)
		if trim == "" || trim[0] == '#' {
			continue
		}
		if m := assignment(line); m != nil {
			p.mac.file, p.mac.line = file, start
			name, err := p.mac.expandName(m[1])
			if err == nil {
				err = p.mac.assign(name, m[2], strings.TrimLeft(m[3], " \t"))
			}
			if err != nil {
				return p.errf(pos, "%v", err)
			}
			continue
		}
		first := trim
		if j := strings.IndexAny(first, " \t"); j >= 0 {
			first = first[:j]
		}
		if first == "help" || first == "---help---" {
			if rest := strings.TrimSpace(strings.TrimPrefix(trim, first)); rest != "" && rest[0] != '#' {
				return p.errf(pos, "unexpected %q after help", rest)
			}
			text, next := helpText(lines, i+1)
			i = next - 1
			if err := p.setHelp(pos, text); err != nil {
				return err
			}
			continue
		}
		p.mac.file, p.mac.line = file, start
		expanded, err := p.mac.expandLine(line)
		if err != nil {
			return p.errf(pos, "%v", err)
		}
		toks, err := lex(expanded)
		if err != nil {
			return p.errf(pos, "%v", err)
		}
		if len(toks) == 0 {
			continue
		}
		if err := p.statement(pos, trim, toks); err != nil {
			return err
		}
	}
	p.closeEntry()
	if len(p.stack) > depth {
		b := p.stack[len(p.stack)-1]
		end := map[blockKind]string{blockIf: "endif", blockMenu: "endmenu", blockChoice: "endchoice"}[b.kind]
		return p.errf(b.pos, "%s without %s before the end of %s", b.kind, end, file)
	}
	return nil
}

// helpText collects a help block starting at lines[i]: it ends at the first
// non-blank line indented less than the block's first line.
func helpText(lines []string, i int) (string, int) {
	first := -1
	var out []string
	for ; i < len(lines); i++ {
		ind, blank := indentOf(lines[i])
		if blank {
			out = append(out, "")
			continue
		}
		if first < 0 {
			first = ind
		}
		if ind == 0 || ind < first {
			break
		}
		out = append(out, strings.TrimRight(strings.TrimLeft(lines[i], " \t"), " \t\r"))
	}
	return strings.TrimSpace(strings.Join(out, "\n")), i
}

func (p *parser) setHelp(pos Pos, text string) error {
	switch p.entry {
	case entryConfig:
		p.def.Help = text
	case entryChoice:
		p.choice.Help = text
	case entryMenu, entryComment:
	default:
		return p.errf(pos, "help outside of a config, choice or menu entry")
	}
	return nil
}

// closeEntry ends the current entry when a new statement starts.
func (p *parser) closeEntry() {
	p.entry = entryNone
	p.def, p.choice, p.menu = nil, nil, nil
}

func (p *parser) blockDeps() (deps, visible []*Property) {
	for _, b := range p.stack {
		deps = append(deps, b.deps...)
		visible = append(visible, b.visible...)
	}
	return deps, visible
}

// enclosingChoice is the choice a new config entry belongs to: the
// innermost block that is a choice, looking through if blocks only.
func (p *parser) enclosingChoice() *Choice {
	for i := len(p.stack) - 1; i >= 0; i-- {
		switch p.stack[i].kind {
		case blockChoice:
			return p.stack[i].choice
		case blockMenu:
			return nil
		}
	}
	return nil
}

func (p *parser) symbol(name string) *Symbol {
	s := p.kc.Symbols[name]
	if s == nil {
		s = &Symbol{Name: name}
		p.kc.Symbols[name] = s
	}
	return s
}

func wordArg(toks []token) (string, bool) {
	if len(toks) != 2 || toks[1].kind != tokWord {
		return "", false
	}
	return toks[1].text, true
}

func stringArg(toks []token) (string, bool) {
	if len(toks) != 2 || toks[1].kind != tokString {
		return "", false
	}
	return toks[1].text, true
}

// splitIf splits tokens at a top-level `if` word: value part and condition.
func splitIf(toks []token) ([]token, []token, bool) {
	for i, t := range toks {
		if t.kind == tokWord && t.text == "if" {
			return toks[:i], toks[i+1:], true
		}
	}
	return toks, nil, false
}

func (p *parser) expr(pos Pos, toks []token, what string) (*Expr, error) {
	e, err := parseExprTokens(toks)
	if err != nil {
		return nil, p.errf(pos, "bad expression in %s: %v", what, err)
	}
	return e, nil
}

// cond parses an optional `if E` tail.
func (p *parser) cond(pos Pos, toks []token, has bool, what string) (*Expr, error) {
	if !has {
		return nil, nil
	}
	return p.expr(pos, toks, what+" condition")
}

// dependsOn parses the tail of `depends on E [if C]`. The conditional
// form (Kconfig since 6.18: scripts/kconfig/menu.c menu_add_dep) means
// "C != n -> E, C = n -> y", which the kernel rewrites to
// `E || (C = n)`; the returned dependency is that rewrite, so every
// evaluation of Deps sees what the kernel sees, and cond is C as
// written (nil without `if`).
func (p *parser) dependsOn(pos Pos, toks []token) (dep, cond *Expr, err error) {
	val, c, has := splitIf(toks)
	if dep, err = p.expr(pos, val, "depends on"); err != nil {
		return nil, nil, err
	}
	if cond, err = p.cond(pos, c, has, "depends on"); err != nil || cond == nil {
		return dep, nil, err
	}
	return &Expr{Op: OpOr, L: dep, R: compareNo(cond, true)}, cond, nil
}

var typeWords = map[string]Type{
	"bool": TypeBool, "boolean": TypeBool, "tristate": TypeTristate,
	"string": TypeString, "int": TypeInt, "hex": TypeHex,
}

func (p *parser) statement(pos Pos, text string, toks []token) error {
	if toks[0].kind != tokWord {
		return p.errf(pos, "unexpected %s at the start of a line", toks[0].describe())
	}
	kw := toks[0].text
	switch kw {
	case "mainmenu":
		s, ok := stringArg(toks)
		if !ok {
			return p.errf(pos, "mainmenu needs one quoted prompt")
		}
		p.closeEntry()
		p.kc.MainMenu = s
		return nil
	case "config", "menuconfig":
		name, ok := wordArg(toks)
		if !ok {
			return p.errf(pos, "%s needs one symbol name", kw)
		}
		p.closeEntry()
		s := p.symbol(name)
		d := &Definition{Symbol: s, Pos: pos, Menuconfig: kw == "menuconfig"}
		d.Deps, d.Visible = p.blockDeps()
		if c := p.enclosingChoice(); c != nil {
			d.Choice = c
			if s.Choice == nil {
				s.Choice = c
				c.Members = append(c.Members, s)
			}
		}
		s.Defs = append(s.Defs, d)
		p.entry, p.def = entryConfig, d
		return nil
	case "choice":
		p.closeEntry()
		c := &Choice{Pos: pos}
		if len(toks) == 2 && toks[1].kind == tokWord {
			c.Name = toks[1].text
		} else if len(toks) != 1 {
			return p.errf(pos, "choice takes at most a name")
		}
		c.Deps, _ = p.blockDeps()
		p.kc.Choices = append(p.kc.Choices, c)
		p.stack = append(p.stack, &block{kind: blockChoice, pos: pos, choice: c})
		p.entry, p.choice = entryChoice, c
		return nil
	case "endchoice", "endmenu", "endif":
		if len(toks) != 1 {
			return p.errf(pos, "unexpected text after %s", kw)
		}
		want := map[string]blockKind{"endchoice": blockChoice, "endmenu": blockMenu, "endif": blockIf}[kw]
		p.closeEntry()
		if len(p.stack) == 0 {
			return p.errf(pos, "%s without %s", kw, want)
		}
		b := p.stack[len(p.stack)-1]
		if b.kind != want {
			return p.errf(pos, "%s inside %s opened at %s", kw, b.kind, b.pos)
		}
		if b.pos.File != pos.File {
			return p.errf(pos, "%s closes the %s opened at %s in another file", kw, b.kind, b.pos)
		}
		p.stack = p.stack[:len(p.stack)-1]
		return nil
	case "comment":
		if _, ok := stringArg(toks); !ok {
			return p.errf(pos, "comment needs one quoted text")
		}
		p.closeEntry()
		p.entry = entryComment
		return nil
	case "menu":
		s, ok := stringArg(toks)
		if !ok {
			return p.errf(pos, "menu needs one quoted prompt")
		}
		p.closeEntry()
		m := &Menu{Prompt: s, Pos: pos}
		p.kc.Menus = append(p.kc.Menus, m)
		p.stack = append(p.stack, &block{kind: blockMenu, pos: pos})
		p.entry, p.menu = entryMenu, m
		return nil
	case "if":
		p.closeEntry()
		e, err := p.expr(pos, toks[1:], "if")
		if err != nil {
			return err
		}
		dep := &Property{Kind: PropIf, Expr: e, Pos: pos, Text: text}
		p.stack = append(p.stack, &block{kind: blockIf, pos: pos, deps: []*Property{dep}})
		return nil
	case "source", "rsource", "osource", "orsource":
		name, ok := stringArg(toks)
		if !ok {
			return p.errf(pos, "%s needs one quoted file name", kw)
		}
		if strings.Contains(name, "$(") {
			if kw[0] == 'o' {
				return nil
			}
			return p.errf(pos, "cannot expand %q", name)
		}
		p.closeEntry()
		if kw == "rsource" || kw == "orsource" {
			name = path.Join(path.Dir(pos.File), name)
		}
		return p.source(name, pos, kw[0] == 'o')
	}
	return p.attribute(pos, text, kw, toks)
}

func (p *parser) attribute(pos Pos, text, kw string, toks []token) error {
	if p.entry == entryNone {
		return p.errf(pos, "unknown statement %q (or %s outside of an entry)", kw, kw)
	}
	a := &attrLine{p: p, pos: pos, text: text, kw: kw}
	if p.def != nil {
		a.owner = p.def.Symbol.Name
	}
	if p.entry == entryMenu || p.entry == entryComment {
		return a.menuAttribute(toks)
	}
	if t, ok := typeWords[kw]; ok {
		if err := a.setType(t); err != nil {
			return err
		}
		if len(toks) > 1 {
			return a.addPrompt(toks[1:])
		}
		return nil
	}
	switch kw {
	case "def_bool", "def_tristate":
		t := TypeBool
		if kw == "def_tristate" {
			t = TypeTristate
		}
		if err := a.setType(t); err != nil {
			return err
		}
		return a.addDefault(toks[1:])
	case "prompt":
		return a.addPrompt(toks[1:])
	case "default":
		return a.addDefault(toks[1:])
	case "depends":
		return a.addDepends(toks)
	case "select", "imply":
		return a.addSelect(toks)
	case "range":
		return a.addRange(toks)
	case "optional":
		if p.entry != entryChoice {
			return p.errf(pos, "optional is only allowed in a choice")
		}
		p.choice.Optional = true
		return nil
	case "modules":
		if p.entry == entryConfig {
			p.def.Modules = true
		}
		return nil
	case "option":
		// option modules / env=... / defconfig_list / allnoconfig_y
		if len(toks) > 1 && toks[1].text == "modules" && p.entry == entryConfig {
			p.def.Modules = true
		}
		return nil
	case "transitional", "defconfig_list", "allnoconfig_y":
		return nil
	}
	return p.errf(pos, "unknown attribute %q", kw)
}

// attrLine is one attribute line of the current entry: where it is, its
// text and keyword, and the symbol it belongs to ("" in a choice, menu or
// comment).
type attrLine struct {
	p     *parser
	pos   Pos
	text  string
	kw    string
	owner string
}

// prop is a property of kind k from the line.
func (a *attrLine) prop(k PropKind) *Property {
	return &Property{Kind: k, Owner: a.owner, Pos: a.pos, Text: a.text, Def: a.p.def}
}

// menuAttribute parses an attribute of a menu or comment: "depends on"
// (kept on a menu and its block), "visible if" (menus only).
func (a *attrLine) menuAttribute(toks []token) error {
	p, pos, kw := a.p, a.pos, a.kw
	switch {
	case kw == "depends" && len(toks) > 1 && toks[1].text == "on":
		e, c, err := p.dependsOn(pos, toks[2:])
		if err != nil {
			return err
		}
		if p.entry == entryMenu {
			d := a.prop(PropDepends)
			d.Expr, d.Cond = e, c
			p.menu.Deps = append(p.menu.Deps, d)
			top := p.stack[len(p.stack)-1]
			top.deps = append(top.deps, d)
		}
		return nil
	case kw == "visible" && len(toks) > 1 && toks[1].text == "if" && p.entry == entryMenu:
		e, err := p.expr(pos, toks[2:], "visible if")
		if err != nil {
			return err
		}
		v := a.prop(PropVisibleIf)
		v.Expr = e
		p.menu.Visible = append(p.menu.Visible, v)
		top := p.stack[len(p.stack)-1]
		top.visible = append(top.visible, v)
		return nil
	}
	return p.errf(pos, "unexpected %q in a %s", kw, map[entryKind]string{entryMenu: "menu", entryComment: "comment"}[p.entry])
}

// add adds pr to the current choice or config entry.
func (a *attrLine) add(pr *Property) {
	p := a.p
	if p.entry == entryChoice {
		p.choice.Props = append(p.choice.Props, pr)
	} else {
		p.def.Props = append(p.def.Props, pr)
	}
}

// setType sets the type of the current choice (bool or tristate) or
// config entry (and of its symbol, if it has none yet); an entry keeps
// one type.
func (a *attrLine) setType(t Type) error {
	p, pos := a.p, a.pos
	if p.entry == entryChoice {
		if t != TypeBool && t != TypeTristate {
			return p.errf(pos, "a choice can only be bool or tristate")
		}
		p.choice.Type = t
		return nil
	}
	if p.def.Type != TypeUnknown && p.def.Type != t {
		return p.errf(pos, "%s redefines the type of %s (was %s)", a.kw, a.owner, p.def.Type)
	}
	p.def.Type = t
	if p.def.Symbol.Type == TypeUnknown {
		p.def.Symbol.Type = t
	}
	return nil
}

// addPrompt parses `"text" [if E]` from toks.
func (a *attrLine) addPrompt(toks []token) error {
	p, pos := a.p, a.pos
	val, cond, has := splitIf(toks)
	if len(val) != 1 || val[0].kind != tokString {
		return p.errf(pos, "prompt must be one quoted string")
	}
	c, err := p.cond(pos, cond, has, "prompt")
	if err != nil {
		return err
	}
	pr := a.prop(PropPrompt)
	pr.Prompt, pr.Cond = val[0].text, c
	a.add(pr)
	if p.entry == entryChoice {
		p.choice.Prompt = val[0].text
	}
	return nil
}

// addDefault parses `E [if E]` from toks.
func (a *attrLine) addDefault(toks []token) error {
	p, pos := a.p, a.pos
	val, cond, has := splitIf(toks)
	v, err := p.expr(pos, val, "default")
	if err != nil {
		return err
	}
	c, err := p.cond(pos, cond, has, "default")
	if err != nil {
		return err
	}
	pr := a.prop(PropDefault)
	pr.Expr, pr.Cond = v, c
	a.add(pr)
	return nil
}

// addDepends parses "depends on E [if E]" of a config entry or a choice
// (whose block keeps it too).
func (a *attrLine) addDepends(toks []token) error {
	p, pos := a.p, a.pos
	if len(toks) < 2 || toks[1].text != "on" {
		return p.errf(pos, "expected 'depends on'")
	}
	e, c, err := p.dependsOn(pos, toks[2:])
	if err != nil {
		return err
	}
	d := a.prop(PropDepends)
	d.Expr, d.Cond = e, c
	if p.entry == entryChoice {
		p.choice.Deps = append(p.choice.Deps, d)
		top := p.stack[len(p.stack)-1]
		top.deps = append(top.deps, d)
	} else {
		p.def.Deps = append(p.def.Deps, d)
	}
	return nil
}

// addSelect parses "select SYM [if E]" or "imply SYM [if E]" of a config
// entry.
func (a *attrLine) addSelect(toks []token) error {
	p, pos, kw := a.p, a.pos, a.kw
	if p.entry != entryConfig {
		return p.errf(pos, "%s is only allowed in a config entry", kw)
	}
	val, cond, has := splitIf(toks[1:])
	if len(val) != 1 || val[0].kind != tokWord {
		return p.errf(pos, "%s needs one symbol name", kw)
	}
	c, err := p.cond(pos, cond, has, kw)
	if err != nil {
		return err
	}
	k := PropSelect
	if kw == "imply" {
		k = PropImply
	}
	pr := a.prop(k)
	pr.Expr, pr.Cond = Sym(val[0].text), c
	a.add(pr)
	return nil
}

// addRange parses "range A B [if E]" of a config entry.
func (a *attrLine) addRange(toks []token) error {
	p, pos := a.p, a.pos
	if p.entry != entryConfig {
		return p.errf(pos, "range is only allowed in a config entry")
	}
	val, cond, has := splitIf(toks[1:])
	if len(val) != 2 || val[0].kind == tokString || val[1].kind == tokString ||
		(val[0].kind != tokWord && val[0].kind != tokMacro) || (val[1].kind != tokWord && val[1].kind != tokMacro) {
		return p.errf(pos, "range needs two symbols or numbers")
	}
	c, err := p.cond(pos, cond, has, "range")
	if err != nil {
		return err
	}
	pr := a.prop(PropRange)
	pr.Expr, pr.Expr2, pr.Cond = leaf(val[0]), leaf(val[1]), c
	a.add(pr)
	return nil
}

// finish links selects and implies to their targets and fills in choice
// types.
func (p *parser) finish() {
	names := make([]string, 0, len(p.kc.Symbols))
	for n := range p.kc.Symbols {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		for _, d := range p.kc.Symbols[n].Defs {
			for _, pr := range d.Props {
				switch pr.Kind {
				case PropSelect:
					t := p.symbol(pr.Expr.Name)
					t.SelectedBy = append(t.SelectedBy, pr)
				case PropImply:
					t := p.symbol(pr.Expr.Name)
					t.ImpliedBy = append(t.ImpliedBy, pr)
				}
			}
		}
	}
	for _, c := range p.kc.Choices {
		if c.Type == TypeUnknown {
			for _, m := range c.Members {
				if m.Type != TypeUnknown {
					c.Type = m.Type
					break
				}
			}
		}
	}
}
