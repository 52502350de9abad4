package apply

import (
	"fmt"
	"strings"

	"github.com/bluekeyes/go-gitdiff/gitdiff"
)

// splitLines splits content into lines that keep their "\n" (the last one
// may lack it).
func splitLines(b []byte) []string {
	if len(b) == 0 {
		return nil
	}
	s := string(b)
	n := strings.Count(s, "\n")
	if !strings.HasSuffix(s, "\n") {
		n++
	}
	out := make([]string, 0, n)
	for len(s) > 0 {
		i := strings.IndexByte(s, '\n')
		if i < 0 {
			out = append(out, s)
			break
		}
		out = append(out, s[:i+1])
		s = s[i+1:]
	}
	return out
}

// hunkError says why a hunk did not apply.
type hunkError struct {
	Index    int // 1-based hunk number
	Header   string
	Expected []string // first old lines of the hunk (context and deletions)
	Found    []string // the file's lines at the expected position
	Line     int      // 1-based expected line
}

func (e *hunkError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "hunk #%d %s does not apply at line %d or anywhere near", e.Index, strings.TrimSpace(e.Header), e.Line)
	if len(e.Expected) > 0 {
		b.WriteString("\n  the patch expects:")
		for _, l := range e.Expected {
			b.WriteString("\n    |" + strings.TrimSuffix(l, "\n"))
		}
	}
	if len(e.Found) > 0 {
		fmt.Fprintf(&b, "\n  the file has at line %d:", e.Line)
		for _, l := range e.Found {
			b.WriteString("\n    |" + strings.TrimSuffix(l, "\n"))
		}
	} else {
		fmt.Fprintf(&b, "\n  the file has only %d lines", e.Line-1)
	}
	return b.String()
}

// placeHunks applies the text fragments of one file to lines, in order,
// like git apply: each hunk at its stated position (shifted by what the
// earlier hunks changed), else the nearest position where its context
// matches (searching forwards and backwards alternately), else with up to
// fuzz context lines ignored at each end. It returns the new lines and
// notes about offsets and fuzz.
func placeHunks(lines []string, frags []*gitdiff.TextFragment, fuzz int) ([]string, []string, error) {
	var notes []string
	for i, f := range frags {
		var old, new []string
		for _, l := range f.Lines {
			if l.Old() {
				old = append(old, l.Line)
			}
			if l.New() {
				new = append(new, l.Line)
			}
		}
		leading, trailing := int(f.LeadingContext), int(f.TrailingContext)
		expect := int(f.NewPosition) - 1
		if f.NewLines == 0 || expect < 0 {
			expect = int(f.NewPosition)
			if expect < 0 {
				expect = 0
			}
		}
		if f.OldLines == 0 && f.OldPosition == 0 {
			expect = 0
		}
		matchBegin := f.OldPosition == 0 || f.OldPosition == 1
		matchEnd := trailing == 0
		pos := -1
		used := 0
		for fz := 0; fz <= fuzz; fz++ {
			dl, dt := min(fz, leading), min(fz, trailing)
			if fz > 0 && dl == 0 && dt == 0 {
				break
			}
			o := old[dl : len(old)-dt]
			mb, me := matchBegin, matchEnd
			if fz > 0 {
				mb, me = false, false
			}
			pos = findPos(lines, o, expect+dl, mb, me)
			if pos >= 0 {
				used = fz
				n := new[dl : len(new)-dt]
				out := make([]string, 0, len(lines)-len(o)+len(n))
				out = append(out, lines[:pos]...)
				out = append(out, n...)
				out = append(out, lines[pos+len(o):]...)
				lines = out
				pos -= dl
				break
			}
		}
		if pos < 0 {
			e := &hunkError{Index: i + 1, Header: f.Header(), Line: expect + 1}
			e.Expected = firstN(old, 4)
			if expect < len(lines) {
				e.Found = firstN(lines[expect:], 4)
			}
			return nil, notes, e
		}
		if off := pos - expect; off != 0 {
			s := "lines"
			if off == 1 || off == -1 {
				s = "line"
			}
			notes = append(notes, fmt.Sprintf("hunk #%d succeeded at %d (offset %d %s)", i+1, pos+1, off, s))
		}
		if used > 0 {
			notes = append(notes, fmt.Sprintf("hunk #%d applied with fuzz %d", i+1, used))
		}
	}
	return lines, notes, nil
}

func firstN(l []string, n int) []string {
	if len(l) > n {
		l = l[:n]
	}
	return l
}

// findPos finds where old occurs in lines, trying start first, then
// start+1, start-1, start+2, ... (git apply's order). matchBegin and
// matchEnd pin the hunk to the start or the end of the file.
func findPos(lines, old []string, start int, matchBegin, matchEnd bool) int {
	if len(old) > len(lines) {
		return -1
	}
	if matchBegin && matchEnd {
		if len(old) == len(lines) && equalAt(lines, old, 0) {
			return 0
		}
		return -1
	}
	if matchBegin {
		if equalAt(lines, old, 0) {
			return 0
		}
		return -1
	}
	if matchEnd {
		p := len(lines) - len(old)
		if equalAt(lines, old, p) {
			return p
		}
		return -1
	}
	last := len(lines) - len(old)
	if start > last {
		start = last
	}
	if start < 0 {
		start = 0
	}
	for d := 0; start+d <= last || start-d >= 0; d++ {
		if p := start + d; p <= last && equalAt(lines, old, p) {
			return p
		}
		if d > 0 {
			if p := start - d; p >= 0 && equalAt(lines, old, p) {
				return p
			}
		}
	}
	return -1
}

func equalAt(lines, old []string, p int) bool {
	if p < 0 || p+len(old) > len(lines) {
		return false
	}
	for i, l := range old {
		if lines[p+i] != l {
			return false
		}
	}
	return true
}
