package numbers

import (
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/patcheval/patcheval/internal/lazyre"
)

// cellValue is one table cell or inline figure read as a number.
type cellValue struct {
	v       float64
	unit    string // normalised: "%", "ms", "us/op", "ops/s", "bogo-ops/s", "s", ...
	signed  bool   // written with an explicit + or - sign
	approx  bool   // written with ~ or ≈
	paren   bool   // written in parentheses: "(-32%)"
	percent bool
}

// numRE is a number as people write them in mail: an optional ~ and sign,
// digits with thousands separators (1,234,567 or 1 234 567 or with the
// narrow no-break spaces some clients use), an optional fraction, an
// optional k/M/G multiplier and an optional unit.
var numRE = lazyre.New(`^([~≈]\s?)?([+\-−]\s?)?(\d{1,3}(?:[,\x{00a0}\x{202f} ]\d{3})+|\d+)(\.\d+)?\s?([kKMG](?:\b|$))?\s?(` + unitAlt + `)?$`)

// unitAlt lists the units a value cell may carry, longest first.
const unitAlt = `bogo-ops/sec|bogo-ops/s|bogo ops/s|ops/sec|ops/s|op/s|usecs/op|usec/op|us/op|µs/op|nsecs/op|nsec/op|ns/op|msecs|msec|ms|usecs|usec|us|µs|nsecs|nsec|ns|secs|sec|s|%`

// minSecRE is time(1)'s "0m1.936s".
var minSecRE = lazyre.New(`^(\d+)m(\d+(?:\.\d+)?)s$`)

// parseValue reads a cell as a number; ok is false for anything else
// (words, version strings such as 6.15-rc6, diffstat "16 +++").
func parseValue(cell string) (cellValue, bool) {
	s := strings.TrimSpace(cell)
	var cv cellValue
	if len(s) >= 2 && s[0] == '(' && s[len(s)-1] == ')' {
		s = strings.TrimSpace(s[1 : len(s)-1])
		cv.paren = true
	}
	if s == "" || !strings.ContainsRune("0123456789~≈+-−", firstRune(s)) {
		// Neither numRE nor minSecRE can match: most cells are words.
		return cellValue{}, false
	}
	if m := minSecRE.FindStringSubmatch(s); m != nil {
		min, _ := strconv.ParseFloat(m[1], 64)
		sec, _ := strconv.ParseFloat(m[2], 64)
		cv.v, cv.unit = min*60+sec, "s"
		return cv, true
	}
	m := numRE.FindStringSubmatch(s)
	if m == nil {
		return cellValue{}, false
	}
	digits := separators.Replace(m[3])
	v, err := strconv.ParseFloat(digits+m[4], 64)
	if err != nil {
		return cellValue{}, false
	}
	switch m[5] {
	case "k", "K":
		v *= 1e3
	case "M":
		v *= 1e6
	case "G":
		v *= 1e9
	}
	if m[2] != "" {
		cv.signed = true
		if m[2][0] != '+' {
			v = -v
		}
	}
	cv.approx = m[1] != ""
	cv.v = v
	cv.unit = normUnit(m[6])
	cv.percent = cv.unit == "%"
	return cv, true
}

// separators drops a number's thousands separators (built once: a
// Replacer per call cost more than the regexp match it follows).
var separators = strings.NewReplacer(",", "", " ", "", "\u00a0", "", "\u202f", "")

// firstRune is s's first rune (s not empty).
func firstRune(s string) rune {
	r, _ := utf8.DecodeRuneInString(s)
	return r
}

// normUnit spells a unit one way.
func normUnit(u string) string {
	switch strings.ToLower(u) {
	case "":
		return ""
	case "bogo-ops/sec", "bogo-ops/s", "bogo ops/s":
		return "bogo-ops/s"
	case "ops/sec", "ops/s", "op/s":
		return "ops/s"
	case "usecs/op", "usec/op", "us/op", "µs/op":
		return "us/op"
	case "nsecs/op", "nsec/op", "ns/op":
		return "ns/op"
	case "msecs", "msec", "ms":
		return "ms"
	case "usecs", "usec", "us", "µs":
		return "us"
	case "nsecs", "nsec", "ns":
		return "ns"
	case "secs", "sec", "s":
		return "s"
	}
	return u
}

// metricRE finds a metric named in a header or caption, with the word
// before it (the benchmark: "kill bogo-ops/sec", "syscall usec/op").
var metricRE = lazyre.New(`(?i)(?:([A-Za-z_][\w.-]*)\s+)?(bogo[- ]ops/s(?:ec)?|ops/s(?:ec)?|usecs?/op|us/op|nsecs?/op|ns/op)\b`)

// unitInParensRE is a unit named in a header: "Base (ns)", "(in usec)", "(ms)".
var unitInParensRE = lazyre.New(`\((?:in\s+)?(ns|nsec|nsecs|us|usec|usecs|ms|msec|msecs|s|sec|secs|%)\)`)

// metricOf reads the metric named in text: its words, normalised unit and
// the benchmark word before it ("" when none).
func metricOf(text string) (metric, unit, bench string) {
	if !strings.Contains(text, "/") && !strings.Contains(text, ")") {
		return "", "", "" // every metricRE match has a "/", every unitInParensRE one a ")"
	}
	if m := metricRE.FindStringSubmatch(text); m != nil {
		bench = strings.ToLower(m[1])
		switch bench {
		case "bench", "perf", "in", "of", "the", "and", "results", "higher", "lower", "(", "stress-ng", "kill()":
			if bench == "kill()" {
				bench = "kill"
			} else {
				bench = ""
			}
		}
		return m[2], normUnit(strings.ToLower(m[2])), bench
	}
	if m := unitInParensRE.FindStringSubmatch(text); m != nil {
		return "", normUnit(m[1]), ""
	}
	return "", "", ""
}

// higherIsBetter says which way a unit improves; known is false for
// units that say nothing (%, plain counts).
func higherIsBetter(unit string) (higher, known bool) {
	switch unit {
	case "ops/s", "bogo-ops/s":
		return true, true
	case "us/op", "ns/op", "ms", "us", "ns", "s":
		return false, true
	}
	return false, false
}
