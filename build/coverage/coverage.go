// Package coverage says whether the files a series changes were compiled
// into a kernel that was measured: Record reads kbuild's .cmd files in the
// O= directory (the source each object was compiled from, and the headers
// it included), and Check answers for each changed file — compiled,
// included, not built (with the Kconfig symbols whose Makefile lines
// would build it: `obj-$(CONFIG_X) += foo.o`, composite objects and the
// directory's own gate followed upwards), or not kernel code at all.
//
// A benchmark result over code that never ran is no evidence about the
// series; the report and the draft say so when a changed file was not
// built.
package coverage

import (
	"bufio"
	"bytes"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"

	"github.com/patcheval/patcheval/internal/lazyre"
)

// Record is what one build compiled: source files (relative to the source
// tree) and the headers/other files objects depended on.
type Record struct {
	Compiled map[string]bool
	Included map[string]bool
}

// FromObjDir reads every .cmd file under out (kbuild's O= directory) of a
// build whose sources are in src.
func FromObjDir(src, out string) (*Record, error) {
	r := &Record{Compiled: map[string]bool{}, Included: map[string]bool{}}
	srcAbs, _ := filepath.Abs(src)
	rel := func(p string) (string, bool) {
		if !filepath.IsAbs(p) {
			p = filepath.Join(out, p) // relative paths are from O=
		}
		p = filepath.Clean(p)
		for _, root := range []string{srcAbs, src} {
			if r, err := filepath.Rel(root, p); err == nil && !strings.HasPrefix(r, "..") {
				return filepath.ToSlash(r), true
			}
		}
		return "", false
	}
	err := filepath.WalkDir(out, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return nil
		}
		if !d.Type().IsRegular() {
			return nil // directories; and links, pipes or devices the build left
		}
		name := d.Name()
		if !strings.HasPrefix(name, ".") || !strings.HasSuffix(name, ".o.cmd") {
			return nil
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return nil
		}
		parseCmd(b, func(kind, file string) {
			if r2, ok := rel(file); ok {
				if kind == "source" {
					r.Compiled[r2] = true
				} else {
					r.Included[r2] = true
				}
			}
		})
		return nil
	})
	if len(r.Compiled) == 0 && err == nil {
		err = fmt.Errorf("coverage: no compiled objects (.*.o.cmd) under %s", out)
	}
	return r, err
}

// parseCmd finds `source_X := file` and the `deps_X := \` list.
func parseCmd(b []byte, each func(kind, file string)) {
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(make([]byte, 1<<16), 1<<24)
	inDeps := false
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "source_") {
			if _, v, ok := strings.Cut(line, ":="); ok {
				each("source", strings.TrimSpace(v))
			}
			inDeps = false
			continue
		}
		if strings.HasPrefix(line, "deps_") {
			inDeps = true
			continue
		}
		if !inDeps {
			continue
		}
		t := strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(line), "\\"))
		if t == "" {
			inDeps = strings.HasSuffix(strings.TrimSpace(line), "\\")
			continue
		}
		if strings.HasPrefix(t, "$(wildcard") {
			continue
		}
		if !strings.HasSuffix(strings.TrimSpace(line), "\\") {
			inDeps = false
		}
		each("dep", t)
	}
}

// Encode writes the record as text ("c path" / "h path" lines, sorted).
func (r *Record) Encode() []byte {
	var lines []string
	for f := range r.Compiled {
		lines = append(lines, "c "+f)
	}
	for f := range r.Included {
		if !r.Compiled[f] {
			lines = append(lines, "h "+f)
		}
	}
	sort.Strings(lines)
	return []byte(strings.Join(lines, "\n") + "\n")
}

// Decode reads Encode's output.
func Decode(b []byte) (*Record, error) {
	r := &Record{Compiled: map[string]bool{}, Included: map[string]bool{}}
	for i, line := range strings.Split(string(b), "\n") {
		if line == "" {
			continue
		}
		k, f, ok := strings.Cut(line, " ")
		switch {
		case ok && k == "c":
			r.Compiled[f] = true
		case ok && k == "h":
			r.Included[f] = true
		default:
			return nil, fmt.Errorf("coverage record line %d: %q", i+1, line)
		}
	}
	return r, nil
}

// Status of a changed file.
const (
	Compiled = "compiled"  // a compiled source of the kernel
	Included = "included"  // a header (or other file) compiled objects depend on
	NotBuilt = "not-built" // kernel code that this build left out
	Deleted  = "deleted"   // the series removes it
	NoCode   = "no-code"   // documentation, Kconfig, Makefiles, tools, scripts
)

// File is one changed file's coverage.
type File struct {
	Path   string `json:"path"`
	Status string `json:"status"`
	// Symbols are the Kconfig symbols that would build a NotBuilt file,
	// outermost last (the directory's gate after the file's own).
	Symbols []string `json:"symbols,omitempty"`
	// Why explains Symbols: the Makefile lines that gate the file.
	Why []string `json:"why,omitempty"`
	// Note is set when the file is not kernel code or not decidable.
	Note string `json:"note,omitempty"`
}

// Check classifies files (paths relative to the tree) against rec.
// readFile reads a file of the tree the kernel was built from (to follow
// Makefiles); deleted reports files the series removed.
func Check(files []string, rec *Record, readFile func(string) ([]byte, error), deleted func(string) bool) []File {
	var out []File
	for _, f := range files {
		c := File{Path: f}
		ext := path.Ext(f)
		base := path.Base(f)
		switch {
		case deleted != nil && deleted(f):
			c.Status = Deleted
		case rec.Compiled[f]:
			c.Status = Compiled
		case rec.Included[f]:
			c.Status = Included
		case strings.HasPrefix(f, "Documentation/") || strings.HasPrefix(f, "tools/") || strings.HasPrefix(f, "scripts/") ||
			strings.HasPrefix(f, "samples/") || strings.HasPrefix(f, "LICENSES/") || base == "MAINTAINERS" || ext == ".rst" || ext == ".txt" || ext == ".yaml":
			c.Status, c.Note = NoCode, "not part of the kernel image"
		case strings.HasPrefix(base, "Kconfig"):
			c.Status, c.Note = NoCode, "Kconfig: changes the configuration (see the config report), not code"
		case base == "Makefile" || base == "Kbuild" || strings.HasSuffix(base, ".mk"):
			c.Status, c.Note = NoCode, "build rules"
		case ext == ".c" || ext == ".S":
			c.Status = NotBuilt
			c.Symbols, c.Why = gates(f, readFile)
			if len(c.Symbols) == 0 {
				c.Note = "no obj-$(CONFIG_...) line found for it in its Makefile"
			}
		case ext == ".h":
			c.Status, c.Note = NotBuilt, "no compiled object of this kernel includes it"
		default:
			c.Status, c.Note = NotBuilt, "not compiled into this kernel"
		}
		out = append(out, c)
	}
	return out
}

var (
	contRE = lazyre.New(`\\\n`)
	// obj-$(CONFIG_FOO) += a.o b.o ; foo-y := ... ; foo-objs += ...
	assignRE = lazyre.New(`(?m)^\s*([A-Za-z0-9_.-]+?)-(\$\(CONFIG_([A-Za-z0-9_]+)\)|y|objs)\s*[:+]?=\s*(.*)$`)
)

// Gates returns the Kconfig symbols whose Makefile lines would build the
// C file (and the lines), read from the tree through readFile.
func Gates(file string, readFile func(string) ([]byte, error)) (syms, why []string) {
	return gates(file, readFile)
}

// gates follows the Makefiles from file upwards: the symbol of the line
// that names the object (through composite objects), then the symbol that
// gates the directory in its parent's Makefile, up to the top.
func gates(file string, readFile func(string) ([]byte, error)) (syms, why []string) {
	dir := path.Dir(file)
	obj := strings.TrimSuffix(path.Base(file), path.Ext(file)) + ".o"
	seen := map[string]bool{}
	add := func(sym, line string) {
		if sym != "" && !seen[sym] {
			seen[sym] = true
			syms = append(syms, "CONFIG_"+sym)
		}
		why = append(why, line)
	}
	for depth := 0; depth < 12 && dir != "." && dir != "/" && dir != ""; depth++ {
		mk := readMakefile(dir, readFile)
		found := false
		target := obj
		for hop := 0; hop < 4 && mk != ""; hop++ {
			lhs, sym, line, ok := findObject(mk, target)
			if !ok {
				break
			}
			found = true
			add(sym, dir+"/Makefile: "+line)
			if lhs == "obj" || lhs == "lib" || lhs == "core" || lhs == "drivers" || lhs == "libs" {
				break
			}
			target = lhs + ".o" // a composite object: find what builds it
		}
		_ = found
		// The directory itself: its parent's obj-$(CONFIG_X) += dir/.
		parent := path.Dir(dir)
		obj = path.Base(dir) + "/"
		if parent == "." {
			// Top level: the Kbuild/Makefile at the root names kernel/ mm/ ...
			mk := readMakefile(".", readFile)
			if _, sym, line, ok := findObject(mk, obj); ok && sym != "" {
				add(sym, "Makefile: "+line)
			}
			break
		}
		dir = parent
	}
	return syms, why
}

func readMakefile(dir string, readFile func(string) ([]byte, error)) string {
	var s string
	for _, n := range []string{"Kbuild", "Makefile"} {
		p := n
		if dir != "." {
			p = dir + "/" + n
		}
		if b, err := readFile(p); err == nil {
			s += "\n" + string(b)
		}
	}
	return contRE.ReplaceAllString(s, " ")
}

// findObject finds the assignment that names target ("foo.o", "dir/").
func findObject(mk, target string) (lhs, sym, line string, ok bool) {
	for _, m := range assignRE.FindAllStringSubmatch(mk, -1) {
		for _, w := range strings.Fields(m[4]) {
			if w == target || (strings.HasSuffix(target, "/") && w == strings.TrimSuffix(target, "/")+"/") {
				return m[1], m[3], strings.Join(strings.Fields(m[0]), " "), true
			}
		}
	}
	return "", "", "", false
}

// NotBuiltFiles returns the files of cov that are kernel code this build left
// out.
func NotBuiltFiles(cov []File) []File {
	var out []File
	for _, c := range cov {
		if c.Status == NotBuilt {
			out = append(out, c)
		}
	}
	return out
}

// Fragment is a config fragment turning on every symbol that would build
// the files: CONFIG_X=y lines with a comment naming the file (--cover).
func Fragment(cov []File) []byte {
	var b bytes.Buffer
	seen := map[string]bool{}
	for _, c := range NotBuiltFiles(cov) {
		for _, s := range c.Symbols {
			if !seen[s] {
				seen[s] = true
				fmt.Fprintf(&b, "# builds %s\n%s=y\n", c.Path, s)
			}
		}
	}
	return b.Bytes()
}
