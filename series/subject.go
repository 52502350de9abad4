package series

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/patcheval/patcheval/internal/lazyre"
)

var (
	replyPrefixRE = lazyre.New(`(?i)^\s*(re|aw|fwd|fw|sv|antw|odp|vs|r)\s*(\[\d+\])?\s*:\s*`)
	counterRE     = lazyre.New(`^(\d{1,4})/(\d{1,4})$`)
	versionRE     = lazyre.New(`(?i)^v(\d{1,4})$`)
	patchVerRE    = lazyre.New(`(?i)^patch-?v(\d{1,4})$`)
	nestedRE1     = lazyre.New(`\[([^\]]*)\[([^\[\]]*)\]`)
	nestedRE2     = lazyre.New(`\[([^\]]*)\]([^\[\]]*)\]`)
)

// ParseSubject parses a patch subject line: reply prefixes (Re:, Aw:, Fwd:,
// ...), any number of leading [...] groups (nested brackets are
// flattened) with PATCH, PATCHv3, RFC, RESEND, vN, i/n, "i of n" and other
// prefixes (net-next, 6.1, ...), then the title. A subject without a version
// is v1; without a counter it is a lone patch (Index 0, Total 1,
// HasCounter false). "[PATCH 6/5]" (a patch added after the fact) gives a
// Total of 6.
func ParseSubject(s string) Subject {
	var sub Subject
	s = strings.Join(strings.Fields(s), " ")
	for {
		loc := replyPrefixRE.FindStringIndex(s)
		if loc == nil {
			break
		}
		sub.IsReply = true
		s = s[loc[1]:]
	}
	// Flatten brackets inside brackets, like b4 does.
	for nested(s) {
		old := s
		s = nestedRE1.ReplaceAllString(s, "[$1$2]")
		s = nestedRE2.ReplaceAllString(s, "[$1$2]")
		if s == old {
			break
		}
	}
	sub.Version = 1
	sub.Total = 1
	for strings.HasPrefix(s, "[") {
		end := strings.IndexByte(s, ']')
		if end < 0 {
			break
		}
		sub.parseBracket(s[1:end])
		s = strings.TrimSpace(s[end+1:])
		// "[Patch 2/2]: title"
		s = strings.TrimSpace(strings.TrimPrefix(s, ":"))
		// "Re: [PATCH] ..." after a list tag "[linux-foo] Re: ..."
		for {
			loc := replyPrefixRE.FindStringIndex(s)
			if loc == nil {
				break
			}
			sub.IsReply = true
			s = s[loc[1]:]
		}
	}
	if sub.Index > sub.Total {
		sub.Total = sub.Index
	}
	sub.Title = s
	return sub
}

func (sub *Subject) parseBracket(in string) {
	chunks := strings.FieldsFunc(in, func(r rune) bool { return r == ' ' || r == '\t' || r == ',' || r == ';' })
	for i := 0; i < len(chunks); i++ {
		c := chunks[i]
		lc := strings.ToLower(c)
		switch {
		case lc == "patch" || lc == "patches":
			sub.IsPatch = true
		case patchVerRE.MatchString(c):
			sub.IsPatch = true
			sub.HasVersion = true
			sub.Version, _ = strconv.Atoi(patchVerRE.FindStringSubmatch(c)[1])
		case versionRE.MatchString(c):
			sub.HasVersion = true
			sub.Version, _ = strconv.Atoi(c[1:])
		case counterRE.MatchString(c):
			m := counterRE.FindStringSubmatch(c)
			sub.Index, _ = strconv.Atoi(m[1])
			sub.Total, _ = strconv.Atoi(m[2])
			sub.HasCounter = true
		case i+2 < len(chunks) && isNum(c) && strings.EqualFold(chunks[i+1], "of") && isNum(chunks[i+2]):
			sub.Index, _ = strconv.Atoi(c)
			sub.Total, _ = strconv.Atoi(chunks[i+2])
			sub.HasCounter = true
			i += 2
		default:
			if strings.HasPrefix(lc, "rfc") {
				sub.RFC = true
			}
			if strings.HasPrefix(lc, "resend") {
				sub.Resend = true
			}
			sub.Prefixes = append(sub.Prefixes, c)
		}
	}
	if sub.Version < 1 {
		sub.Version = 1
	}
	if sub.Total < 1 {
		sub.Total = 1
	}
}

func isNum(s string) bool {
	if s == "" || len(s) > 4 {
		return false
	}
	for _, r := range s {
		if r < '0' || r > '9' {
			return false
		}
	}
	return true
}

// Number is the patch's position in its series: Index, or 1 for a lone
// patch without a counter.
func (s Subject) Number() int {
	if !s.HasCounter {
		return 1
	}
	return s.Index
}

// AMSubject renders the subject b4 writes into an am-ready mbox:
// "[PATCH RFC vN i/n] title": RFC when the subject had it, the version when
// above 1, the counter when the subject had one. Tree prefixes such as
// "net-next" or "6.1" and RESEND are dropped, like b4 does (git am strips
// the brackets anyway).
func (s Subject) AMSubject() string {
	parts := []string{"PATCH"}
	if s.RFC {
		parts = append(parts, "RFC")
	}
	if s.Version > 1 {
		parts = append(parts, fmt.Sprintf("v%d", s.Version))
	}
	if s.HasCounter {
		parts = append(parts, fmt.Sprintf("%d/%d", s.Index, s.Total))
	}
	return "[" + strings.Join(parts, " ") + "] " + s.Title
}

// nested reports whether a '[' or ']' appears inside a bracket group.
func nested(s string) bool {
	depth := 0
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case '[':
			if depth > 0 {
				return true
			}
			depth++
		case ']':
			if depth == 0 {
				return true
			}
			depth--
		}
	}
	return false
}
