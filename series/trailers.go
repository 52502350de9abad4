package series

import (
	"fmt"
	"net/mail"
	"strings"

	"github.com/patcheval/patcheval/internal/lazyre"
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
	trailerLineRE = lazyre.New(`^([A-Za-z][A-Za-z0-9-]*[A-Za-z0-9]):[ \t]+(\S.*?)\s*$`)
	emailRE       = lazyre.New(`[^\s<>"()]+@[^\s<>"()]+\.[^\s<>"()]+`)
	extinfoRE     = lazyre.New(`^\s*\[[^\]]+\]\s*$`)
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
				t.unnormalize()
				t.Value += " " + strings.TrimSpace(trim)
				fixPerson(t)
				continue
			case strings.HasPrefix(trim, "<") && strings.HasSuffix(trim, ">") && t.Person == nil && IsPersonTrailer(t.Name):
				t.unnormalize()
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
			// line: keep it provisionally. One with an address that
			// is not valid is kept with Problem set.
			if IsPersonTrailer(name) {
				t := Trailer{Name: name, Value: value}
				fixPerson(&t)
				out = append(out, t)
				last = len(out) - 1
			}
			continue
		}
		t := Trailer{Name: name, Value: value}
		fixPerson(&t)
		out = append(out, t)
		last = len(out) - 1
	}
	// Drop provisional person trailers that never got an address (those
	// whose address is invalid stay, with Problem set, for the caller to
	// refuse with a note).
	kept := out[:0]
	for _, t := range out {
		if IsPersonTrailer(t.Name) && t.Person == nil && t.Problem == "" {
			continue
		}
		kept = append(kept, t)
	}
	return kept
}

// fixPerson sets t.Person from t.Value for person trailers. A value
// polluted by an HTML mail client ("Name <a@b.c<mailto:a@b.c>>", "Name
// <mailto:a@b.c>", "Name a@b.c <mailto:a@b.c>") is rewritten to "Name
// <a@b.c>" (the original kept in Normalized), like current b4 writes it; one
// that cannot be made a valid address gets Problem set and no Person.
func fixPerson(t *Trailer) {
	if !IsPersonTrailer(t.Name) {
		return
	}
	t.Person, t.Problem = nil, ""
	if v, problem, changed := cleanPersonValue(t.Value); problem != "" {
		if head, _, _ := strings.Cut(t.Value, " #"); strings.Contains(head, "@") {
			t.Problem = problem
		}
		return
	} else if changed {
		t.Normalized = t.Value
		t.Value = v
	}
	if a, ok := parsePerson(t.Value); ok {
		t.Person = &a
	}
}

// unnormalize puts back the value as the mail wrote it before more text
// is joined to it (fixPerson then cleans the whole again).
func (t *Trailer) unnormalize() {
	if t.Normalized != "" {
		t.Value, t.Normalized = t.Normalized, ""
	}
}

var (
	// mailtoRE is an HTML client's rendering of a link: "<mailto:x>",
	// "(mailto:x)", "[x](mailto:x)" or a bare "mailto:" prefix.
	mailtoAngleRE = lazyre.New(`(?i)\s*[<(]mailto:([^<>()\s]*)[>)]`)
	mailtoMDRE    = lazyre.New(`(?i)\[([^\[\]\s]+)\]\(mailto:[^()\s]*\)`)
	mailtoBareRE  = lazyre.New(`(?i)mailto:`)
	addrSpecRE    = lazyre.New(`^[^\s<>"(),;:@\[\]]+@[\p{L}\p{N}](?:[\p{L}\p{N}-]*[\p{L}\p{N}])?(?:\.[\p{L}\p{N}](?:[\p{L}\p{N}-]*[\p{L}\p{N}])?)+$`)
)

// cleanPersonValue removes the "mailto:" pollution of HTML mail from a
// person trailer's value and checks the address. It returns the value to
// use ("Name <addr>" plus a "# comment" or "[note]" that followed), whether
// it changed, or a problem when no single valid address can be made of it.
// Values without pollution come back unchanged (changed false) when their
// address is valid.
func cleanPersonValue(v string) (string, string, bool) {
	head, tail := v, ""
	if i := strings.Index(v, " #"); i >= 0 {
		head, tail = v[:i], v[i:]
	}
	polluted := strings.Contains(strings.ToLower(head), "mailto:")
	h := mailtoMDRE.ReplaceAllString(head, "$1")
	var linked []string
	h = mailtoAngleRE.ReplaceAllStringFunc(h, func(s string) string {
		linked = append(linked, mailtoAngleRE.FindStringSubmatch(s)[1])
		return ""
	})
	h = mailtoBareRE.ReplaceAllString(h, "")
	h = strings.TrimSpace(h)
	// "Name <a@b.c>>": a stray bracket left by a client.
	for strings.HasSuffix(h, ">>") {
		h = h[:len(h)-1]
		polluted = true
	}
	emails := emailRE.FindAllString(h, -1)
	if len(emails) == 0 && len(linked) > 0 && linked[0] != "" {
		// "Name <mailto:a@b.c>": the link was the address.
		h = strings.TrimSpace(h) + " <" + linked[0] + ">"
		emails = []string{linked[0]}
	}
	if len(emails) == 0 {
		return v, "no address in it", false
	}
	addr := strings.Trim(emails[0], "<>")
	for _, e := range append(emails[1:], linked...) {
		if e = strings.Trim(e, "<>"); e != "" && !strings.EqualFold(e, addr) {
			return v, fmt.Sprintf("two different addresses %s and %s", addr, e), false
		}
	}
	if !addrSpecRE.MatchString(addr) {
		return v, fmt.Sprintf("%q is not a valid address", addr), false
	}
	if !polluted {
		return v, "", false
	}
	name := h
	if i := strings.Index(h, "<"); i >= 0 {
		name = h[:i]
	} else {
		name = strings.Replace(h, emails[0], "", 1)
	}
	name = strings.Trim(strings.TrimSpace(name), `"`)
	out := "<" + addr + ">"
	switch {
	case name == "":
	case strings.ContainsAny(name, "\\\"()<>[]:;@,."):
		// RFC 5322 specials: quote the name (UTF-8 as it is, never
		// RFC 2047 in a commit message).
		out = `"` + strings.ReplaceAll(strings.ReplaceAll(name, `\`, `\\`), `"`, `\"`) + `" ` + out
	default:
		out = name + " " + out
	}
	// A "[note]" after the address stays.
	if i := strings.LastIndex(head, ">"); i >= 0 && i+1 < len(head) {
		if rest := strings.TrimSpace(head[i+1:]); extinfoRE.MatchString(rest) {
			out += " " + rest
		}
	}
	return out + tail, "", true
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
