package report

import (
	"strings"

	"github.com/patcheval/patcheval/internal/lazyre"
	"github.com/patcheval/patcheval/mbox"
)

// Header hygiene: every value that came from mail (names, addresses,
// subjects, Message-IDs) passes through these before it reaches a header.

// atext of RFC 5322 plus the dot: what an unquoted local part may hold.
var (
	localRe  = lazyre.New(`^[A-Za-z0-9!#$%&'*+/=?^_{|}~.-]+$`)
	domainRe = lazyre.New(`^[A-Za-z0-9](?:[A-Za-z0-9-]*[A-Za-z0-9])?(?:\.[A-Za-z0-9](?:[A-Za-z0-9-]*[A-Za-z0-9])?)*$`)
	idRe     = lazyre.New(`^[\x21-\x7e]+$`)
)

// validEmail accepts a plain addr-spec (local@domain, ASCII, no quoting,
// no comments, no whitespace or control characters).
func validEmail(e string) bool {
	i := strings.LastIndexByte(e, '@')
	if i <= 0 || i == len(e)-1 || len(e) > 254 {
		return false
	}
	local, domain := e[:i], e[i+1:]
	return localRe.MatchString(local) && !strings.HasPrefix(local, ".") && !strings.HasSuffix(local, ".") &&
		!strings.Contains(local, "..") && domainRe.MatchString(domain)
}

// cleanAddr strips control characters and folding from an address.
func cleanAddr(a mbox.Address) mbox.Address {
	return mbox.Address{Name: oneLine(a.Name), Email: strings.TrimSpace(oneLine(a.Email))}
}

// cleanID returns a Message-ID without brackets, or "" when it holds
// anything but visible ASCII (whitespace, CR/LF, <, > or controls).
func cleanID(id string) string {
	id = strings.TrimSpace(id)
	id = strings.TrimPrefix(id, "<")
	id = strings.TrimSuffix(id, ">")
	if id == "" || len(id) > 900 || !idRe.MatchString(id) || strings.ContainsAny(id, "<>") {
		return ""
	}
	return id
}

// needsEncoding: non-ASCII, controls, or something a decoder would take
// for an encoded word.
func needsEncoding(s string) bool {
	if strings.Contains(s, "=?") || strings.Contains(s, "?=") {
		return true
	}
	for i := 0; i < len(s); i++ {
		if s[i] < 0x20 || s[i] > 0x7e {
			return true
		}
	}
	return false
}

// encodeText returns s for an unstructured header (Subject): plain
// printable ASCII words stay as they are; each run of words that needs
// encoding (non-ASCII, controls, "=?") becomes RFC 2047 Q-encoded words
// (at most 60 characters each, so go-message can fold the line).
func encodeText(s string) string {
	if !needsEncoding(s) {
		return s
	}
	words := strings.Split(s, " ")
	var out []string
	for i := 0; i < len(words); {
		if !needsEncoding(words[i]) {
			out = append(out, words[i])
			i++
			continue
		}
		j := i
		for j < len(words) && needsEncoding(words[j]) {
			j++
		}
		out = append(out, encodeWords(strings.Join(words[i:j], " ")))
		i = j
	}
	return strings.Join(out, " ")
}

func encodeWords(s string) string {
	const prefix, suffix = "=?UTF-8?q?", "?="
	const max = 60 - len(prefix) - len(suffix)
	var words []string
	var cur strings.Builder
	for _, r := range s {
		var enc string
		switch {
		case r == ' ':
			enc = "_"
		case r < 0x80 && (r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("!*+-/", r)):
			enc = string(r)
		default:
			var b strings.Builder
			for _, c := range []byte(string(r)) {
				b.WriteString("=")
				b.WriteString(strings.ToUpper(hexByte(c)))
			}
			enc = b.String()
		}
		if cur.Len()+len(enc) > max {
			words = append(words, prefix+cur.String()+suffix)
			cur.Reset()
		}
		cur.WriteString(enc)
	}
	if cur.Len() > 0 || len(words) == 0 {
		words = append(words, prefix+cur.String()+suffix)
	}
	return strings.Join(words, " ")
}

func hexByte(c byte) string {
	const h = "0123456789abcdef"
	return string([]byte{h[c>>4], h[c&15]})
}

// phraseRe is what a display name may be without quoting (atoms and
// spaces).
var phraseRe = lazyre.New(`^[A-Za-z0-9!#$%&'*+/=?^_{|}~ -]+$`)

// formatAddr renders an address for a header: the display name as atoms,
// a quoted string or encoded words; invalid addresses give "".
func formatAddr(a mbox.Address) string {
	a = cleanAddr(a)
	if !validEmail(a.Email) {
		return ""
	}
	name := a.Name
	switch {
	case name == "":
		return a.Email
	case needsEncoding(name):
		// The whole phrase: a partly encoded name could leave
		// specials unquoted.
		name = encodeWords(name)
	case !phraseRe.MatchString(name):
		name = `"` + strings.NewReplacer(`\`, `\\`, `"`, `\"`).Replace(name) + `"`
	}
	return name + " <" + a.Email + ">"
}

// formatList renders valid addresses separated by ", ".
func formatList(l []mbox.Address) string {
	var parts []string
	for _, a := range l {
		if s := formatAddr(a); s != "" {
			parts = append(parts, s)
		}
	}
	return strings.Join(parts, ", ")
}
