package series

import (
	"net/mail"
	"regexp"
	"strings"

	"github.com/patcheval/patcheval/mbox"
)

// personTrailers are the trailer names that name a person. Any other name
// ending in "-by" (Nacked-by, Bisected-by, ...) is a person trailer too.
var personTrailers = map[string]bool{
	"reviewed-by":            true,
	"acked-by":               true,
	"tested-by":              true,
	"reported-by":            true,
	"suggested-by":           true,
	"co-developed-by":        true,
	"signed-off-by":          true,
	"reviewed-and-tested-by": true,
	"cc":                     true,
}

// utilityTrailers are the non-person trailers ParseTrailers knows.
var utilityTrailers = map[string]bool{
	"fixes":                 true,
	"closes":                true,
	"link":                  true,
	"buglink":               true,
	"change-id":             true,
	"message-id":            true,
	"obsoleted-by":          true,
	"base-commit":           false, // series metadata, not a commit trailer
	"from":                  false,
	"subject":               false,
	"date":                  false,
	"to":                    false,
	"email":                 false,
	"phone":                 false,
	"author":                false,
	"prerequisite-patch-id": false,
}

var (
	trailerLineRE = regexp.MustCompile(`^([A-Za-z][A-Za-z0-9-]*[A-Za-z0-9]):[ \t]+(\S.*?)\s*$`)
	emailRE       = regexp.MustCompile(`[^\s<>"()]+@[^\s<>"()]+\.[^\s<>"()]+`)
	extinfoRE     = regexp.MustCompile(`^\s*\[[^\]]+\]\s*$`)
)

// IsPersonTrailer reports whether name is a trailer that names a person
// (Reviewed-by, Acked-by, Cc, any "*-by").
func IsPersonTrailer(name string) bool {
	l := strings.ToLower(name)
	return personTrailers[l] || strings.HasSuffix(l, "-by")
}

// knownTrailer says whether "name: value" is a trailer we accept.
func knownTrailer(name, value string) bool {
	l := strings.ToLower(name)
	if ok, listed := utilityTrailers[l]; listed {
		return ok
	}
	if IsPersonTrailer(l) {
		return emailRE.MatchString(value)
	}
	return false
}

// ParseTrailers returns the trailers ("Name: value" lines) found in body,
// which is a reply or the trailer block of a commit message. Lines quoted
// with ">" and everything below a "-- " signature line are ignored. A
// value wrapped onto the next line (indented continuation, or an address
// "<...>" alone on the next line, or the rest of a "Fixes: sha (title"
// whose parenthesis closes on the next line) is joined. Person trailers
// (Reviewed-by, Acked-by, Tested-by, Reported-by, Suggested-by,
// Co-developed-by, Signed-off-by, Reviewed-and-tested-by, Cc and any other
// "*-by") are accepted only when the value carries an email address, and
// get Person set; Fixes, Closes, Link, BugLink, Change-Id, Message-ID and
// Obsoleted-by are accepted as they are. Other "Name: value" lines (Test:,
// Note:, From:, Subject:, ...) are not trailers.
//
// Provenance fields are left empty; Resolve fills them in.
func ParseTrailers(body string) []Trailer {
	var out []Trailer
	last := -1 // index in out of the trailer the previous line belonged to
	for _, line := range strings.Split(body, "\n") {
		line = strings.TrimRight(line, "\r")
		if line == "-- " {
			break
		}
		trim := strings.TrimLeft(line, " \t")
		if strings.HasPrefix(trim, ">") {
			last = -1
			continue
		}
		if last >= 0 && trim != "" {
			t := &out[last]
			switch {
			case line != trim && !trailerLineRE.MatchString(trim):
				// Indented continuation (git interpret-trailers rule).
				t.Value += " " + strings.TrimSpace(trim)
				fixPerson(t)
				continue
			case strings.HasPrefix(trim, "<") && strings.HasSuffix(trim, ">") && t.Person == nil && IsPersonTrailer(t.Name):
				t.Value += " " + trim
				fixPerson(t)
				continue
			case strings.Count(t.Value, "(") > strings.Count(t.Value, ")") && strings.HasSuffix(trim, ")") && !trailerLineRE.MatchString(trim):
				t.Value += " " + trim
				continue
			case extinfoRE.MatchString(trim):
				// "[for the foo bits]" note under a trailer: part of the
				// block, not of the value.
				last = -1
				continue
			}
		}
		last = -1
		if !strings.Contains(trim, ": ") && !strings.Contains(trim, ":\t") {
			continue
		}
		m := trailerLineRE.FindStringSubmatch(trim)
		if m == nil {
			continue
		}
		name, value := m[1], m[2]
		if !knownTrailer(name, value) {
			// A person trailer whose address is wrapped to the next
			// line: keep it provisionally.
			if IsPersonTrailer(name) && !strings.Contains(value, "@") {
				out = append(out, Trailer{Name: name, Value: value})
				last = len(out) - 1
			}
			continue
		}
		t := Trailer{Name: name, Value: value}
		fixPerson(&t)
		out = append(out, t)
		last = len(out) - 1
	}
	// Drop provisional person trailers that never got an address.
	kept := out[:0]
	for _, t := range out {
		if IsPersonTrailer(t.Name) && t.Person == nil {
			continue
		}
		kept = append(kept, t)
	}
	return kept
}

// fixPerson sets t.Person from t.Value for person trailers.
func fixPerson(t *Trailer) {
	if !IsPersonTrailer(t.Name) {
		return
	}
	if a, ok := parsePerson(t.Value); ok {
		t.Person = &a
	}
}

// parsePerson extracts "Name <email>" from a trailer value, ignoring a
// trailing "# comment" or "[note]".
func parsePerson(v string) (mbox.Address, bool) {
	s := v
	if i := strings.Index(s, " #"); i >= 0 {
		s = s[:i]
	}
	if i := strings.Index(s, ">"); i >= 0 {
		s = s[:i+1]
	}
	s = strings.TrimSpace(s)
	if a, err := mail.ParseAddress(s); err == nil {
		return mbox.Address{Name: a.Name, Email: a.Address}, true
	}
	e := emailRE.FindString(s)
	if e == "" {
		return mbox.Address{}, false
	}
	name := s
	if i := strings.Index(s, "<"); i >= 0 {
		name = s[:i]
	} else {
		name = strings.Replace(s, e, "", 1)
	}
	name = strings.Trim(strings.TrimSpace(name), `"`)
	return mbox.Address{Name: name, Email: strings.Trim(e, "<>")}, true
}

// splitTrailerBlock splits a commit message (without title) into the text
// and its final trailer block: the last paragraph when every non-empty line
// of it is a trailer, a continuation of one, or a "[note]" line. block is ""
// when there is none.
func splitTrailerBlock(msg string) (text, block string) {
	msg = strings.TrimRight(msg, "\n")
	i := strings.LastIndex(msg, "\n\n")
	para := msg[i+1:]
	if i < 0 {
		para = msg
	}
	para = strings.TrimLeft(para, "\n")
	if para == "" {
		return msg, ""
	}
	lines := strings.Split(para, "\n")
	trailers := 0
	for j, l := range lines {
		trim := strings.TrimSpace(l)
		switch {
		case trailerLineRE.MatchString(trim) && l == trim:
			// Any "Token: value" line counts, like git interpret-trailers
			// does for a block made only of such lines.
			trailers++
		case j > 0 && (l != trim || extinfoRE.MatchString(trim) || (strings.HasPrefix(trim, "<") && strings.HasSuffix(trim, ">"))):
			// continuation / note
		default:
			return msg, ""
		}
	}
	if trailers == 0 {
		return msg, ""
	}
	if i < 0 {
		return "", para
	}
	return strings.TrimRight(msg[:i], "\n"), para
}

// sameTrailer is b4's equality: name and value, case-insensitively.
func sameTrailer(a, b Trailer) bool {
	return strings.EqualFold(a.Name, b.Name) && strings.EqualFold(strings.TrimSpace(a.Value), strings.TrimSpace(b.Value))
}
