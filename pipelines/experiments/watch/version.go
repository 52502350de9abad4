package watch

import (
	"fmt"
	"path"
	"sort"
	"strconv"
	"strings"
)

// Version is a kernel tag's version: v6.2-rc10 is {6, 2} with RC 10,
// v6.1.23 is {6, 1, 23} with no RC.
type Version struct {
	Nums []int
	// RC is the -rcN number; 0 for a release.
	RC int
}

// ParseVersion parses a kernel-style tag: "v" (optional), dot-separated
// numbers, optionally "-rcN". Anything else (next-20250101, v6.1-debian)
// is not a version.
func ParseVersion(tag string) (Version, bool) {
	s := strings.TrimPrefix(tag, "v")
	var v Version
	if base, rc, ok := strings.Cut(s, "-rc"); ok {
		n, err := strconv.Atoi(rc)
		if err != nil || n <= 0 || rc != strconv.Itoa(n) {
			return Version{}, false
		}
		v.RC, s = n, base
	}
	if s == "" {
		return Version{}, false
	}
	for _, part := range strings.Split(s, ".") {
		n, err := strconv.Atoi(part)
		if err != nil || n < 0 || part != strconv.Itoa(n) {
			return Version{}, false
		}
		v.Nums = append(v.Nums, n)
	}
	return v, true
}

// Compare orders versions: numbers first (missing ones count as 0, so
// v6.2 == v6.2.0), then a release candidate before its release.
func (a Version) Compare(b Version) int {
	for i := 0; i < max(len(a.Nums), len(b.Nums)); i++ {
		x, y := at(a.Nums, i), at(b.Nums, i)
		if x != y {
			return cmpInt(x, y)
		}
	}
	switch {
	case a.RC == b.RC:
		return 0
	case a.RC == 0: // release after every rc
		return 1
	case b.RC == 0:
		return -1
	}
	return cmpInt(a.RC, b.RC)
}

func at(xs []int, i int) int {
	if i < len(xs) {
		return xs[i]
	}
	return 0
}

func cmpInt(a, b int) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// CompareTags orders two tag names: both versions by Compare (v6.2-rc9 <
// v6.2-rc10 < v6.2 < v6.2.1); a version before a name that is not one;
// otherwise by natural order (digit runs compared as numbers, so
// next-20250109 < next-20250110), then by name.
func CompareTags(a, b string) int {
	va, oka := ParseVersion(a)
	vb, okb := ParseVersion(b)
	switch {
	case oka && okb:
		if c := va.Compare(vb); c != 0 {
			return c
		}
		return strings.Compare(a, b)
	case oka:
		return -1
	case okb:
		return 1
	}
	if c := natural(a, b); c != 0 {
		return c
	}
	return strings.Compare(a, b)
}

// SortTags sorts tag names by CompareTags.
func SortTags(tags []string) {
	sort.SliceStable(tags, func(i, j int) bool { return CompareTags(tags[i], tags[j]) < 0 })
}

// natural compares strings with digit runs taken as numbers.
func natural(a, b string) int {
	for a != "" && b != "" {
		da, db := digits(a), digits(b)
		if da > 0 && db > 0 {
			x, y := strings.TrimLeft(a[:da], "0"), strings.TrimLeft(b[:db], "0")
			if len(x) != len(y) {
				return cmpInt(len(x), len(y))
			}
			if c := strings.Compare(x, y); c != 0 {
				return c
			}
			a, b = a[da:], b[db:]
			continue
		}
		if a[0] != b[0] {
			return cmpInt(int(a[0]), int(b[0]))
		}
		a, b = a[1:], b[1:]
	}
	return cmpInt(len(a), len(b))
}

func digits(s string) int {
	n := 0
	for n < len(s) && s[n] >= '0' && s[n] <= '9' {
		n++
	}
	return n
}

// ValidGlob checks a tag pattern (path.Match syntax: *, ?, [a-z]; no "/"
// needed for tags). An empty pattern or a malformed one is an error
// naming it.
func ValidGlob(pattern string) error {
	if strings.TrimSpace(pattern) == "" {
		return fmt.Errorf("tag pattern is empty (want a glob such as 'v6.*-rc*')")
	}
	if _, err := path.Match(pattern, ""); err != nil {
		return fmt.Errorf("tag pattern %q: %v (syntax: * ? [a-z], as in git tag -l)", pattern, err)
	}
	return nil
}

// MatchTag reports whether tag matches pattern. A "refs/tags/" prefix on
// either is ignored.
func MatchTag(pattern, tag string) bool {
	pattern = strings.TrimPrefix(pattern, "refs/tags/")
	tag = strings.TrimPrefix(tag, "refs/tags/")
	ok, err := path.Match(pattern, tag)
	return err == nil && ok
}
