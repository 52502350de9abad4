package debian

import "strings"

// CompareVersions compares two Debian versions ([epoch:]upstream[-revision])
// the way dpkg does: <0 when a is older than b, 0 when equal, >0 when newer.
// "7.2.13-1" > "7.2.12-1~bpo13+1" > "7.2.12~rc1-1".
func CompareVersions(a, b string) int {
	ea, ua, ra := splitVersion(a)
	eb, ub, rb := splitVersion(b)
	if c := compareNum(ea, eb); c != 0 {
		return c
	}
	if c := comparePart(ua, ub); c != 0 {
		return c
	}
	return comparePart(ra, rb)
}

// Upstream is the upstream part of a Debian version: "7.2.13-1~bpo13+1"
// gives "7.2.13".
func Upstream(v string) string {
	_, u, _ := splitVersion(v)
	return u
}

func splitVersion(v string) (epoch, upstream, revision string) {
	if e, rest, ok := strings.Cut(v, ":"); ok && e != "" && strings.Trim(e, "0123456789") == "" {
		epoch, v = e, rest
	}
	upstream = v
	if i := strings.LastIndexByte(v, '-'); i >= 0 {
		upstream, revision = v[:i], v[i+1:]
	}
	return epoch, upstream, revision
}

func isDigit(c byte) bool { return c >= '0' && c <= '9' }

// order is dpkg's weight of a non-digit character: '~' before everything,
// even the end of the string; letters before other characters.
func order(c byte) int {
	switch {
	case c == '~':
		return -1
	case c == 0:
		return 0
	case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z':
		return int(c)
	default:
		return int(c) + 256
	}
}

func comparePart(a, b string) int {
	for a != "" || b != "" {
		// The non-digit prefixes, character by character.
		for (a != "" && !isDigit(a[0])) || (b != "" && !isDigit(b[0])) {
			var ca, cb byte
			if a != "" && !isDigit(a[0]) {
				ca = a[0]
			}
			if b != "" && !isDigit(b[0]) {
				cb = b[0]
			}
			if oa, ob := order(ca), order(cb); oa != ob {
				if oa < ob {
					return -1
				}
				return 1
			}
			if ca != 0 {
				a = a[1:]
			}
			if cb != 0 {
				b = b[1:]
			}
		}
		// Then the numbers.
		na, nb := leadingDigits(a), leadingDigits(b)
		if c := compareNum(na, nb); c != 0 {
			return c
		}
		a, b = a[len(na):], b[len(nb):]
	}
	return 0
}

func leadingDigits(s string) string {
	i := 0
	for i < len(s) && isDigit(s[i]) {
		i++
	}
	return s[:i]
}

// compareNum compares two digit strings as numbers of any length.
func compareNum(a, b string) int {
	a, b = strings.TrimLeft(a, "0"), strings.TrimLeft(b, "0")
	if len(a) != len(b) {
		if len(a) < len(b) {
			return -1
		}
		return 1
	}
	return strings.Compare(a, b)
}
