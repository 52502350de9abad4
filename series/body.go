package series

import (
	"crypto/sha1"
	"encoding/hex"
	"fmt"
	"strings"

	"github.com/patcheval/patcheval/internal/lazyre"
)

var (
	// hasDiffRE is b4's DIFF_RE: a unified diff header or a binary patch.
	hasDiffRE = lazyre.New(`(?mi)^(---.*\n\+\+\+|GIT binary patch|diff --git \w/\S+ \w/\S+)`)
	// hasDiffstatRE is b4's DIFFSTAT_RE.
	hasDiffstatRE = lazyre.New(`(?mi)^\s*\d+ file.*\d+ (insertion|deletion)`)
	inBodyHdrRE   = lazyre.New(`^(?i)(from|date|subject):\s*(.*)$`)
	baseCommitRE  = lazyre.New(`(?mi)^base-commit:\s*([0-9a-f]{7,64})\b`)
	prereqRE      = lazyre.New(`(?mi)^prerequisite-patch-id:\s*([0-9a-f]{7,64})\b`)
	changeIDRE    = lazyre.New(`(?mi)^change-id:\s*(\S+)`)
)

// parts is a patch mail body taken apart the way git mailinfo does.
type parts struct {
	// Header holds in-body "From:", "Date:", "Subject:" lines found at the
	// very top of the body (lower-case keys).
	Header map[string]string
	// Message is the commit message (without title) up to the "---" line
	// or the diff.
	Message string
	// BelowCut is the text between "---" and the diff.
	BelowCut string
	// Diff is the diff from its first header line on, signature removed.
	Diff string
}

func hasDiff(body string) bool     { return hasDiffRE.MatchString(body) }
func hasDiffstat(body string) bool { return hasDiffstatRE.MatchString(body) }

// isPatchBreak is git mailinfo's patchbreak(): "---" alone (trailing
// spaces allowed), "--- file", "diff -", "Index: ".
func isPatchBreak(line string) bool {
	if strings.HasPrefix(line, "diff -") || strings.HasPrefix(line, "Index: ") {
		return true
	}
	if strings.HasPrefix(line, "---") {
		rest := line[3:]
		if len(rest) > 1 && rest[0] == ' ' && rest[1] != ' ' && rest[1] != '\t' {
			return true
		}
		return strings.TrimSpace(rest) == ""
	}
	return false
}

// isDiffStart reports whether line i starts the diff proper.
func isDiffStart(lines []string, i int) bool {
	l := lines[i]
	if strings.HasPrefix(l, "diff -") || strings.HasPrefix(l, "Index: ") || strings.HasPrefix(l, "GIT binary patch") {
		return true
	}
	return strings.HasPrefix(l, "--- ") && i+1 < len(lines) && strings.HasPrefix(lines[i+1], "+++ ")
}

// splitBody takes a patch mail body apart.
func splitBody(body string) parts {
	var p parts
	body = strings.ReplaceAll(body, "\r\n", "\n")
	lines := strings.Split(body, "\n")
	i := 0
	for i < len(lines) && strings.TrimSpace(lines[i]) == "" {
		i++
	}
	// In-body headers: the first lines, when they are From:/Date:/Subject:,
	// up to a blank line.
	j := i
	hdr := map[string]string{}
	for j < len(lines) {
		m := inBodyHdrRE.FindStringSubmatch(lines[j])
		if m == nil {
			break
		}
		hdr[strings.ToLower(m[1])] = strings.TrimSpace(m[2])
		j++
		// folded continuation
		for j < len(lines) && len(lines[j]) > 0 && (lines[j][0] == ' ' || lines[j][0] == '\t') {
			hdr[strings.ToLower(m[1])] += " " + strings.TrimSpace(lines[j])
			j++
		}
	}
	if len(hdr) > 0 && (j == len(lines) || strings.TrimSpace(lines[j]) == "") {
		p.Header = hdr
		i = j
	}
	// Commit message up to the patch break.
	start := i
	for i < len(lines) && !isPatchBreak(lines[i]) {
		i++
	}
	p.Message = strings.Trim(strings.Join(lines[start:i], "\n"), "\n")
	if i == len(lines) {
		return p
	}
	// Below the cut: up to the diff.
	cut := i
	if strings.TrimSpace(lines[i]) == "---" || strings.HasPrefix(lines[i], "---") && !isDiffStart(lines, i) {
		cut++
	}
	k := cut
	for k < len(lines) && !isDiffStart(lines, k) {
		k++
	}
	p.BelowCut = strings.Trim(strings.Join(lines[cut:k], "\n"), "\n")
	diff := lines[k:]
	// Drop the "-- " signature (and what follows) at the end of the diff.
	for n := len(diff) - 1; n >= 0 && n >= len(diff)-12; n-- {
		if diff[n] == "-- " {
			diff = diff[:n]
			break
		}
	}
	p.Diff = strings.TrimRight(strings.Join(diff, "\n"), "\n")
	if p.Diff != "" {
		p.Diff += "\n"
	}
	return p
}

// parseBase reads base-commit:, prerequisite-patch-id: and change-id: lines.
func parseBase(body string, b *Base) {
	if b.Commit == "" {
		if m := baseCommitRE.FindStringSubmatch(body); m != nil {
			b.Commit = m[1]
		}
	}
	if b.ChangeID == "" {
		if m := changeIDRE.FindStringSubmatch(body); m != nil {
			b.ChangeID = m[1]
		}
	}
	for _, m := range prereqRE.FindAllStringSubmatch(body, -1) {
		dup := false
		for _, p := range b.Prerequisites {
			dup = dup || p == m[1]
		}
		if !dup {
			b.Prerequisites = append(b.Prerequisites, m[1])
		}
	}
}

// PatchID computes `git patch-id --stable` of a diff: per file, the SHA-1
// of the diff lines with all white space removed (hunk headers and index
// lines left out), the per-file hashes summed bytewise; "" for no diff.
func PatchID(diff string) string {
	var result [20]byte
	h := sha1.New()
	before, after := -1, -1
	n := 0
	flush := func() {
		var sum [20]byte
		copy(sum[:], h.Sum(nil))
		h.Reset()
		carry := 0
		for i := 0; i < 20; i++ {
			carry += int(result[i]) + int(sum[i])
			result[i] = byte(carry)
			carry >>= 8
		}
	}
	started := false
	for _, line := range strings.Split(diff, "\n") {
		if !started {
			if strings.HasPrefix(line, "diff ") {
				started = true
			} else {
				continue
			}
		}
		if before == -1 {
			if strings.HasPrefix(line, "GIT binary patch") || strings.HasPrefix(line, "Binary files") {
				// Not supported precisely; hash the line.
				before, after = 0, 0
			} else if strings.HasPrefix(line, "index ") {
				continue
			} else if strings.HasPrefix(line, "--- ") {
				before, after = 1, 1
			} else if line == "" || !isAlpha(line[0]) {
				break
			}
		}
		if before == 0 && after == 0 {
			if strings.HasPrefix(line, "@@ -") {
				before, after = hunkCounts(line)
				continue
			}
			if !strings.HasPrefix(line, "diff ") {
				break
			}
			flush()
			before, after = -1, -1
		}
		if line != "" && (line[0] == '-' || line[0] == ' ') {
			before--
		}
		if line != "" && (line[0] == '+' || line[0] == ' ') {
			after--
		}
		s := removeSpace(line)
		n += len(s)
		h.Write([]byte(s))
	}
	if n == 0 {
		return ""
	}
	flush()
	return hex.EncodeToString(result[:])
}

func isAlpha(c byte) bool { return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' }

func removeSpace(s string) string {
	var b strings.Builder
	b.Grow(len(s))
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case ' ', '\t', '\n', '\r', '\v', '\f':
		default:
			b.WriteByte(s[i])
		}
	}
	return b.String()
}

// hunkCounts parses "@@ -a,b +c,d @@" into b and d (1 when absent).
func hunkCounts(l string) (int, int) {
	f := strings.Fields(l)
	if len(f) < 3 {
		return 0, 0
	}
	count := func(s string) int {
		if i := strings.IndexByte(s, ','); i >= 0 {
			n := 0
			for _, c := range s[i+1:] {
				if c < '0' || c > '9' {
					break
				}
				n = n*10 + int(c-'0')
			}
			return n
		}
		return 1
	}
	return count(f[1]), count(f[2])
}

// repairBlankContext restores blank context lines that a mail client (or
// trimming the mail's end) removed: a blank context line is " ", which
// clients that strip trailing white space turn into "" — harmless inside a
// hunk (git apply reads "" as an empty context line) but fatal at the end of
// the diff, where such lines vanish and the last hunk comes up short. When
// a hunk ends (end of the diff, or the next hunk or file starts) with the
// same number of old and new lines still missing, the missing lines can
// only have been context lines, and they were blank; they are added back as
// " ". fixed names each repaired hunk ("hunk #2 of a/b.c: 2 lines"). A hunk
// short by a different number of old and new lines is left as it is
// (ambiguous: git apply will say where it is corrupt).
func repairBlankContext(diff string) (string, []string) {
	if diff == "" {
		return diff, nil
	}
	lines := strings.Split(strings.TrimSuffix(diff, "\n"), "\n")
	var out []string
	var fixed []string
	file, hunk := "", 0
	for i := 0; i < len(lines); {
		l := lines[i]
		switch {
		case strings.HasPrefix(l, "diff --git "):
			file, hunk = strings.TrimPrefix(l, "diff --git "), 0
			if f := strings.Fields(file); len(f) == 2 {
				file = strings.TrimPrefix(f[1], "b/")
			}
		case strings.HasPrefix(l, "+++ ") && file == "":
			file = strings.TrimPrefix(strings.TrimPrefix(l, "+++ "), "b/")
		}
		out = append(out, l)
		i++
		if !strings.HasPrefix(l, "@@ -") {
			continue
		}
		hunk++
		o, n := hunkCounts(l)
	body:
		for (o > 0 || n > 0) && i < len(lines) {
			x := lines[i]
			switch {
			case x == "":
				if o == 0 || n == 0 {
					break body
				}
				o--
				n--
			case x[0] == ' ':
				o--
				n--
			case x[0] == '-':
				o--
			case x[0] == '+':
				n--
			case x[0] == '\\':
			default:
				break body
			}
			out = append(out, x)
			i++
		}
		// The hunk ended early: at the end of the diff or where the next
		// hunk or file starts. Trailing context is at most 3 lines (diff's
		// default): more missing is a mail cut mid-hunk, not blank lines
		// a client stripped, and is left for truncatedHunk to report.
		if o > 0 && o <= 3 && o == n && (i == len(lines) || startsDiffPart(lines[i])) {
			for k := 0; k < o; k++ {
				out = append(out, " ")
			}
			fixed = append(fixed, fmt.Sprintf("hunk #%d of %s: %d line(s)", hunk, file, o))
		}
	}
	return strings.Join(out, "\n") + "\n", fixed
}

// startsDiffPart reports whether l starts a new hunk or file of a diff.
func startsDiffPart(l string) bool {
	return strings.HasPrefix(l, "@@ -") || strings.HasPrefix(l, "diff ") || strings.HasPrefix(l, "--- ") || strings.HasPrefix(l, "Index: ")
}
