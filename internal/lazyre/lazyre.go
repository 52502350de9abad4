// Package lazyre holds package-level regular expressions that are compiled
// on first use, not at program start: a package's `var x = lazyre.New(...)`
// costs nothing until x is matched, so `patcheval -h` and commands that
// never read mail or build output do not compile the mail parser's or the
// build log reader's expressions (issue: start-up, 28 ms of package init).
//
// A Regexp has the methods of *regexp.Regexp the project uses, with the
// same meaning; Re returns the compiled expression for anything else. An
// expression that does not compile panics on first use, as MustCompile
// would have at start-up; CompileAll (run by a test of the program that
// links every package) catches that before any user does.
package lazyre

import (
	"regexp"
	"sync"
)

// Regexp is a regular expression compiled on first use. Safe for
// concurrent use.
type Regexp struct {
	expr string
	once sync.Once
	re   *regexp.Regexp
}

var all struct {
	mu sync.Mutex
	rs []*Regexp
}

// New records expr; it is compiled (regexp.MustCompile) on first use.
func New(expr string) *Regexp {
	r := &Regexp{expr: expr}
	all.mu.Lock()
	all.rs = append(all.rs, r)
	all.mu.Unlock()
	return r
}

// CompileAll compiles every expression New has recorded in this program
// and returns how many, or the first that does not compile.
func CompileAll() (int, error) {
	all.mu.Lock()
	rs := append([]*Regexp(nil), all.rs...)
	all.mu.Unlock()
	for _, r := range rs {
		if _, err := regexp.Compile(r.expr); err != nil {
			return 0, err
		}
	}
	return len(rs), nil
}

// Re is the compiled expression.
func (r *Regexp) Re() *regexp.Regexp {
	r.once.Do(func() { r.re = regexp.MustCompile(r.expr) })
	return r.re
}

// String is the source text (without compiling it).
func (r *Regexp) String() string { return r.expr }

// The methods below are those of *regexp.Regexp, on the compiled
// expression.

func (r *Regexp) Match(b []byte) bool       { return r.Re().Match(b) }
func (r *Regexp) MatchString(s string) bool { return r.Re().MatchString(s) }
func (r *Regexp) Find(b []byte) []byte      { return r.Re().Find(b) }
func (r *Regexp) FindIndex(b []byte) []int  { return r.Re().FindIndex(b) }
func (r *Regexp) FindString(s string) string {
	return r.Re().FindString(s)
}
func (r *Regexp) FindStringIndex(s string) []int { return r.Re().FindStringIndex(s) }
func (r *Regexp) FindSubmatch(b []byte) [][]byte { return r.Re().FindSubmatch(b) }
func (r *Regexp) FindStringSubmatch(s string) []string {
	return r.Re().FindStringSubmatch(s)
}
func (r *Regexp) FindStringSubmatchIndex(s string) []int {
	return r.Re().FindStringSubmatchIndex(s)
}
func (r *Regexp) FindAll(b []byte, n int) [][]byte { return r.Re().FindAll(b, n) }
func (r *Regexp) FindAllIndex(b []byte, n int) [][]int {
	return r.Re().FindAllIndex(b, n)
}
func (r *Regexp) FindAllString(s string, n int) []string {
	return r.Re().FindAllString(s, n)
}
func (r *Regexp) FindAllStringIndex(s string, n int) [][]int {
	return r.Re().FindAllStringIndex(s, n)
}
func (r *Regexp) FindAllSubmatch(b []byte, n int) [][][]byte {
	return r.Re().FindAllSubmatch(b, n)
}
func (r *Regexp) FindAllStringSubmatch(s string, n int) [][]string {
	return r.Re().FindAllStringSubmatch(s, n)
}
func (r *Regexp) FindAllStringSubmatchIndex(s string, n int) [][]int {
	return r.Re().FindAllStringSubmatchIndex(s, n)
}
func (r *Regexp) ReplaceAll(src, repl []byte) []byte { return r.Re().ReplaceAll(src, repl) }
func (r *Regexp) ReplaceAllString(src, repl string) string {
	return r.Re().ReplaceAllString(src, repl)
}
func (r *Regexp) ReplaceAllLiteralString(src, repl string) string {
	return r.Re().ReplaceAllLiteralString(src, repl)
}
func (r *Regexp) ReplaceAllStringFunc(src string, repl func(string) string) string {
	return r.Re().ReplaceAllStringFunc(src, repl)
}
func (r *Regexp) ReplaceAllFunc(src []byte, repl func([]byte) []byte) []byte {
	return r.Re().ReplaceAllFunc(src, repl)
}
func (r *Regexp) Split(s string, n int) []string { return r.Re().Split(s, n) }
func (r *Regexp) SubexpIndex(name string) int    { return r.Re().SubexpIndex(name) }
func (r *Regexp) SubexpNames() []string          { return r.Re().SubexpNames() }
func (r *Regexp) NumSubexp() int                 { return r.Re().NumSubexp() }
