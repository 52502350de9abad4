// Package maintainers reads a kernel tree's MAINTAINERS file and answers,
// like scripts/get_maintainer.pl --no-git, who looks after a set of
// changed files: the maintainers (M:), reviewers (R:) and lists (L:) of
// every section whose F:/N: patterns match a file and whose X: patterns
// do not, most specific section first, plus the sections whose K:
// keywords match the patch's text. Each answer carries get_maintainer.pl's
// role ("maintainer:SCHEDULER", "reviewer:...", "open list:...").
//
// The entry point is Parse (or FromCommit, which reads MAINTAINERS from a
// commit of a git tree); File.ForFiles and File.ForPatch answer.
//
// What it leaves out of get_maintainer.pl: git history (--git,
// --git-fallback, blame, Fixes: signers), .mailmap rewriting, e-mail
// addresses found inside the changed files, and the MAINTAINERS/
// directory split of later kernels.
package maintainers

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"net/mail"
	"regexp"
	"sort"
	"strconv"
	"strings"

	"github.com/patcheval/patcheval/internal/fail"
	"github.com/patcheval/patcheval/internal/lazyre"
)

// Kind is what a Recipient is to a section.
type Kind string

const (
	Maintainer Kind = "maintainer" // an M: entry
	Reviewer   Kind = "reviewer"   // an R: entry
	List       Kind = "list"       // an L: entry
)

// Recipient is one address get_maintainer.pl would print.
type Recipient struct {
	Name  string `json:"name,omitempty"`
	Email string `json:"email"`
	Kind  Kind   `json:"kind"`
	// Role is get_maintainer.pl's role text: "maintainer:SCHEDULER",
	// "supporter:...", "reviewer:...", "open list:...", "moderated
	// list:...", "open list" (THE REST).
	Role string `json:"role"`
	// Section is the MAINTAINERS section that contributed the address
	// first; Status its S: entry.
	Section string `json:"section"`
	Status  string `json:"status,omitempty"`
	// Moderated is set for an L: entry marked "moderated".
	Moderated bool `json:"moderated,omitempty"`
}

// Address is the recipient as get_maintainer.pl formats it: "Name
// <addr>" (the name quoted when it has characters other than letters,
// digits, '_', ' ' and '-'), or the bare address.
func (r Recipient) Address() string { return formatEmail(r.Name, r.Email) }

// String is get_maintainer.pl's default output line: address (role).
func (r Recipient) String() string { return r.Address() + " (" + r.Role + ")" }

// entry is one "X:\tvalue" line.
type entry struct {
	typ   byte
	value string // F:/X: converted to a regular expression, as the perl script does
	line  int
	tvi   int // index in get_maintainer.pl's @typevalue array (keyword order)
	re    *regexp.Regexp
}

// Section is one MAINTAINERS section: its title line and its entries.
type Section struct {
	Name    string
	Line    int
	entries []entry
}

// Status is the section's (last) S: entry.
func (s *Section) Status() string {
	st := ""
	for _, e := range s.entries {
		if e.typ == 'S' {
			st = e.value
		}
	}
	return st
}

// File is a parsed MAINTAINERS file.
type File struct {
	Sections []*Section
	// Warnings name entries that were skipped (a K: or N: expression Go's
	// regexp cannot compile).
	Warnings []string
	keywords []keyword
}

type keyword struct {
	sec int
	e   *entry
}

// Chiefs are the addresses get_maintainer.pl drops from every answer
// unless --git-chief-penguins (its @penguin_chief list).
var Chiefs = []string{"torvalds@linux-foundation.org"}

var entryRe = lazyre.New(`^([A-Z]):\s*(.*)`)

// Parse reads a MAINTAINERS file. isDir reports whether a path of the
// tree is a directory: get_maintainer.pl adds the trailing slash to an
// F:/X: pattern naming one (so it matches everything below), and so does
// Parse (nil: no pattern is a directory). name names the input in errors.
func Parse(r io.Reader, name string, isDir func(string) bool) (*File, error) {
	f := &File{}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64*1024), 1024*1024)
	var cur *Section
	lineNo, tvi := 0, 0
	for sc.Scan() {
		lineNo++
		line := sc.Text()
		if m := entryRe.FindStringSubmatch(line); m != nil {
			if cur == nil { // an entry before any title: the perl script's first section starts at it
				cur = &Section{Line: lineNo}
				f.Sections = append(f.Sections, cur)
			}
			e := entry{typ: m[1][0], value: m[2], line: lineNo, tvi: tvi}
			tvi++
			switch e.typ {
			case 'F', 'X':
				v := strings.ReplaceAll(e.value, ".", `\.`)
				v = strings.ReplaceAll(v, "*", ".*")
				v = strings.ReplaceAll(v, "?", ".")
				if isDir != nil && isDir(v) && !strings.HasSuffix(v, "/") {
					v += "/"
				}
				e.value = v
				re, err := regexp.Compile("^(?:" + v + ")")
				if err != nil {
					f.Warnings = append(f.Warnings, fmt.Sprintf("%s:%d: %c: %q is not a pattern Go can compile: skipped (%v)", name, lineNo, e.typ, m[2], err))
					continue
				}
				e.re = re
			case 'N', 'K':
				re, err := regexp.Compile(extended(e.value))
				if err != nil {
					f.Warnings = append(f.Warnings, fmt.Sprintf("%s:%d: %c: %q is not a regular expression Go can compile: skipped (%v)", name, lineNo, e.typ, e.value, err))
					continue
				}
				e.re = re
			}
			cur.entries = append(cur.entries, e)
			continue
		}
		if strings.TrimSpace(line) == "" || strings.HasPrefix(strings.TrimSpace(line), "#") {
			continue // the perl script skips these without ending the section
		}
		tvi++
		cur = &Section{Name: line, Line: lineNo}
		f.Sections = append(f.Sections, cur)
	}
	if err := sc.Err(); err != nil {
		return nil, fail.Inputf("%s: %v", name, err)
	}
	// Titles without entries (the file's preamble) are no sections.
	kept := f.Sections[:0]
	for _, s := range f.Sections {
		if len(s.entries) > 0 {
			kept = append(kept, s)
		}
	}
	f.Sections = kept
	if len(f.Sections) == 0 {
		return nil, fail.Inputf("%s: no MAINTAINERS sections (no \"X:\\tvalue\" entries)", name)
	}
	for i, s := range f.Sections {
		for j := range s.entries {
			if s.entries[j].typ == 'K' {
				f.keywords = append(f.keywords, keyword{i, &s.entries[j]})
			}
		}
	}
	return f, nil
}

// extended turns a Perl /x expression into one without the x flag:
// unescaped white space outside a character class goes, so does a '#'
// comment.
func extended(re string) string {
	var b strings.Builder
	inClass := false
	for i := 0; i < len(re); i++ {
		c := re[i]
		switch {
		case c == '\\' && i+1 < len(re):
			b.WriteByte(c)
			b.WriteByte(re[i+1])
			i++
		case inClass:
			if c == ']' {
				inClass = false
			}
			b.WriteByte(c)
		case c == '[':
			inClass = true
			b.WriteByte(c)
			if i+1 < len(re) && re[i+1] == '^' {
				b.WriteByte('^')
				i++
			}
			if i+1 < len(re) && re[i+1] == ']' { // a leading ']' is literal
				b.WriteByte(']')
				i++
			}
		case c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f':
		case c == '#':
			return b.String()
		default:
			b.WriteByte(c)
		}
	}
	return b.String()
}

// matchFile is get_maintainer.pl's file_match_pattern: a pattern ending
// in '/' matches everything below; others match only at the same depth.
func (e *entry) matchFile(file string) bool {
	if !e.re.MatchString(file) {
		return false
	}
	return strings.HasSuffix(e.value, "/") || strings.Count(file, "/") == strings.Count(e.value, "/")
}

// depth is how specific a matching F: pattern is (value_pd in the perl
// script): its slashes, one more when it is not a directory, -1 for a
// pattern starting with '*'.
func (e *entry) depth() int {
	if strings.HasPrefix(e.value, ".*") {
		return -1
	}
	d := strings.Count(e.value, "/")
	if !strings.HasSuffix(e.value, "/") {
		d++
	}
	return d
}

// sectionsFor are the indexes of the sections that cover file, most
// specific first (sections of equal depth in file order).
func (f *File) sectionsFor(file string) []int {
	type hit struct{ sec, depth, literal int }
	var hits []hit
	for i, s := range f.Sections {
		excluded := false
		for j := range s.entries {
			if e := &s.entries[j]; e.typ == 'X' && e.matchFile(file) {
				excluded = true
				break
			}
		}
		if excluded {
			continue
		}
		d, lit, ok := 0, 0, false
		for j := range s.entries {
			e := &s.entries[j]
			switch e.typ {
			case 'F':
				if e.matchFile(file) {
					// The last matching entry wins, as in the perl script.
					d, lit, ok = e.depth(), len(e.value)-3*strings.Count(e.value, ".*"), true
				}
			case 'N':
				if e.re.MatchString(file) {
					d, lit, ok = 0, 0, true
				}
			}
		}
		if ok {
			hits = append(hits, hit{i, d, lit})
		}
	}
	// Sections of equal depth come in Perl's hash order in the perl
	// script (it changes from run to run); here the pattern with more
	// literal text (arch/x86/net/bpf_jit_comp32.c before arch/*/net/*)
	// comes first, then file order.
	sort.SliceStable(hits, func(a, b int) bool {
		if hits[a].depth != hits[b].depth {
			return hits[a].depth > hits[b].depth
		}
		return hits[a].literal > hits[b].literal
	})
	out := make([]int, len(hits))
	for i, h := range hits {
		out[i] = h.sec
	}
	return out
}

// tied reports whether two sections cover file at the same depth (their
// order then decides which role a shared address gets).
func (f *File) tied(file string) bool {
	seen := map[int]bool{}
	for _, i := range f.sectionsFor(file) {
		d := -2
		for j := range f.Sections[i].entries {
			e := &f.Sections[i].entries[j]
			if e.typ == 'F' && e.matchFile(file) {
				d = e.depth()
			} else if e.typ == 'N' && e.re.MatchString(file) {
				d = 0
			}
		}
		if seen[d] {
			return true
		}
		seen[d] = true
	}
	return false
}

// ForFiles answers for changed files (paths relative to the tree's top).
func (f *File) ForFiles(files []string) []Recipient {
	var c collector
	for _, file := range files {
		for _, i := range f.sectionsFor(file) {
			c.add(f.Sections[i])
		}
	}
	return c.result()
}

// Patch is what ForPatch found in a patch.
type Patch struct {
	// Files are the paths the patch names (both sides of a rename).
	Files []string
	// Keywords are the sections that matched by a K: entry.
	Keywords []string
}

// ForPatch answers for a patch (git format-patch or a plain diff), as
// get_maintainer.pl does with a patch file: the files of its diff
// headers, and the K: keywords found in its header and commit message or
// in its added and removed lines.
func (f *File) ForPatch(patch []byte) ([]Recipient, Patch) {
	var p Patch
	var kwHits []*keyword
	seenKw := map[int]bool{}
	inDiff := false
	sc := bufio.NewScanner(bytes.NewReader(patch))
	sc.Buffer(make([]byte, 64*1024), 16*1024*1024)
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, " mode change ") && modeRe.MatchString(line):
			p.Files = append(p.Files, modeRe.FindStringSubmatch(line)[1])
		case renameRe.MatchString(line):
			p.Files = append(p.Files, renameRe.FindStringSubmatch(line)[1])
		case diffGitRe.MatchString(line):
			m := diffGitRe.FindStringSubmatch(line)
			p.Files = append(p.Files, m[1], m[2])
		case fileRe.MatchString(line):
			name := fileRe.FindStringSubmatch(line)[1]
			if i := strings.IndexByte(name, '/'); i >= 0 {
				name = name[i+1:]
			} else {
				name = ""
			}
			if name != "" {
				p.Files = append(p.Files, name)
			}
			inDiff = true
		case strings.HasPrefix(line, "@@ -"):
		default:
			if inDiff && !(strings.HasPrefix(line, "+") || strings.HasPrefix(line, "-")) {
				continue
			}
			for i := range f.keywords {
				k := &f.keywords[i]
				if !seenKw[k.e.tvi] && k.e.re.MatchString(line) {
					seenKw[k.e.tvi] = true
					kwHits = append(kwHits, k)
				}
			}
		}
	}
	p.Files = sortUniq(p.Files)
	// The perl script adds keyword sections after the files' ones, in the
	// string order of their @typevalue indexes.
	sort.Slice(kwHits, func(a, b int) bool {
		return strconv.Itoa(kwHits[a].e.tvi) < strconv.Itoa(kwHits[b].e.tvi)
	})
	var c collector
	for _, file := range p.Files {
		for _, i := range f.sectionsFor(file) {
			c.add(f.Sections[i])
		}
	}
	for _, k := range kwHits {
		c.add(f.Sections[k.sec])
		p.Keywords = append(p.Keywords, f.Sections[k.sec].Name)
	}
	return c.result(), p
}

var (
	modeRe    = lazyre.New(`^ mode change [0-7]+ => [0-7]+ (\S+)\s*$`)
	renameRe  = lazyre.New(`^rename (?:from|to) (\S+)\s*$`)
	diffGitRe = lazyre.New(`^diff --git a/(\S+) b/(\S+)\s*$`)
	fileRe    = lazyre.New(`^(?:\+\+\+|---)\s+(\S+)`)
)

func sortUniq(l []string) []string {
	sort.Strings(l)
	out := l[:0]
	for i, s := range l {
		if i == 0 || s != l[i-1] {
			out = append(out, s)
		}
	}
	return out
}

// collector is the perl script's add_categories with --no-git: people
// deduplicated by name or address (the first role wins), lists by
// address.
type collector struct {
	people, lists []Recipient
	names, addrs  map[string]bool
	listSeen      map[string]bool
}

func (c *collector) add(s *Section) {
	if c.names == nil {
		c.names, c.addrs, c.listSeen = map[string]bool{}, map[string]bool{}, map[string]bool{}
	}
	status := s.Status()
	for _, e := range s.entries {
		switch e.typ {
		case 'L':
			addr, extra := e.value, ""
			if i := strings.IndexAny(addr, " \t"); i >= 0 {
				addr, extra = addr[:i], strings.TrimSpace(addr[i:])
			}
			if strings.Contains(extra, "subscribers-only") || c.listSeen[strings.ToLower(addr)] {
				continue // the perl script leaves subscriber-only lists out by default
			}
			c.listSeen[strings.ToLower(addr)] = true
			kind := "open list"
			mod := strings.Contains(extra, "moderated")
			if mod {
				kind = "moderated list"
			}
			if s.Name != "THE REST" {
				kind += ":" + roleName(s.Name)
			}
			c.lists = append(c.lists, Recipient{Email: addr, Kind: List, Role: kind, Section: s.Name, Status: status, Moderated: mod})
		case 'M':
			c.person(e.value, Maintainer, maintainerRole(status)+":"+roleName(s.Name), s, status)
		case 'R':
			c.person(e.value, Reviewer, "reviewer:"+roleName(s.Name), s, status)
		}
	}
}

// roleName is a section's name in a role: clipped to 50 bytes like
// get_maintainer.pl's --output-section-maxlen default.
func roleName(name string) string {
	const max = 50
	if len(name) <= max {
		return name
	}
	return strings.TrimRight(name[:max-3], " \t") + "..."
}

func maintainerRole(status string) string {
	role := strings.ToLower(status)
	if role == "" {
		return "unknown"
	}
	switch role {
	case "supported":
		return "supporter"
	case "maintained":
		return "maintainer"
	case "odd fixes":
		return "odd fixer"
	case "orphan":
		return "orphan minder"
	case "obsolete":
		return "obsolete minder"
	case "buried alive in reporters":
		return "chief penguin"
	}
	return role
}

func (c *collector) person(value string, kind Kind, role string, s *Section, status string) {
	var addrs []Recipient
	if l, err := mail.ParseAddressList(value); err == nil {
		for _, a := range l {
			addrs = append(addrs, Recipient{Name: a.Name, Email: a.Address})
		}
	} else if name, addr := parseEmail(value); addr != "" {
		addrs = append(addrs, Recipient{Name: name, Email: addr})
	}
	for _, r := range addrs {
		r.Name = strings.Trim(strings.TrimSpace(r.Name), `"`)
		ln, la := strings.ToLower(r.Name), strings.ToLower(r.Email)
		if (ln != "" && c.names[ln]) || c.addrs[la] {
			continue
		}
		if ln != "" {
			c.names[ln] = true
		}
		c.addrs[la] = true
		r.Kind, r.Role, r.Section, r.Status = kind, role, s.Name, status
		c.people = append(c.people, r)
	}
}

var emailRe = []*lazyre.Regexp{
	lazyre.New(`^([^<]+)<(.+@.*)>.*$`),
	lazyre.New(`^\s*()<(.+@\S*)>.*$`),
	lazyre.New(`^()(.+@\S*).*$`),
}

// parseEmail is the perl script's parse_email, for what net/mail refuses.
func parseEmail(s string) (name, addr string) {
	for _, re := range emailRe {
		if m := re.FindStringSubmatch(s); m != nil {
			return strings.Trim(strings.TrimSpace(m[1]), `"`), strings.TrimSpace(m[2])
		}
	}
	return "", ""
}

var mustQuote = lazyre.New(`[^A-Za-z0-9_ \-]`)

func formatEmail(name, addr string) string {
	if name == "" {
		return addr
	}
	if mustQuote.MatchString(name) {
		name = `"` + strings.ReplaceAll(name, `"`, `\"`) + `"`
	}
	return name + " <" + addr + ">"
}

func (c *collector) result() []Recipient {
	var out []Recipient
	for _, r := range c.people {
		chief := false
		for _, a := range Chiefs {
			if strings.EqualFold(r.Email, a) {
				chief = true
			}
		}
		if !chief {
			out = append(out, r)
		}
	}
	return append(out, c.lists...)
}
