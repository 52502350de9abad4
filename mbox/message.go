package mbox

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"mime"
	"net/mail"
	"net/textproto"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	message "github.com/emersion/go-message"
	"github.com/emersion/go-message/charset"
	gmtextproto "github.com/emersion/go-message/textproto"

	"github.com/patcheval/patcheval/internal/fail"
	"github.com/patcheval/patcheval/internal/lazyre"
)

var wordDecoder = &mime.WordDecoder{CharsetReader: charset.Reader}

// maxParts bounds the MIME parts walked in one message (hostile input).
const maxParts = 200

// ParseMessage decodes one RFC 5322 message. raw is the message without a
// From_ line (mboxrd already unescaped); CRLF is turned into LF. source
// names the message in errors and notes (file:line, URL).
//
// The parser is lenient where mail in the wild is broken and records what
// it repaired in Message.Notes. It fails (fail.Input) only when raw has no
// header at all.
func ParseMessage(raw []byte, source string) (*Message, error) {
	raw = normalizeNewlines(raw)
	m := &Message{Raw: raw, Source: source, Header: map[string][]string{}}

	hdr, body, err := splitHeader(raw, m)
	if err != nil {
		return nil, fail.Inputf("%s: %v", source, err)
	}
	var h gmtextproto.Header
	for _, f := range hdr {
		h.Add(f.key, f.value)
		key := textproto.CanonicalMIMEHeaderKey(f.key)
		m.Header[key] = append(m.Header[key], decodeText(unfold(f.value)))
	}

	// Identity and threading headers.
	if ids := msgIDs(h.Get("Message-Id")); len(ids) > 0 {
		m.MessageID = ids[0]
	} else {
		sum := sha256.Sum256(raw)
		m.MessageID = "patcheval-" + hex.EncodeToString(sum[:10]) + "@synthetic.invalid"
		m.NoMessageID = true
		m.note("no Message-ID header: no Link: or Message-ID will be written for it")
	}
	if ids := msgIDs(h.Get("In-Reply-To")); len(ids) > 0 {
		m.InReplyTo = ids[len(ids)-1]
	}
	for _, v := range h.Values("References") {
		m.References = append(m.References, msgIDs(v)...)
	}

	m.Subject = collapseSpace(decodeText(unfold(h.Get("Subject"))))
	if f := h.Get("From"); f != "" {
		if as := parseAddrs(f); len(as) > 0 {
			m.From = as[0]
		}
	}
	for _, v := range h.Values("To") {
		m.To = append(m.To, parseAddrs(v)...)
	}
	for _, v := range h.Values("Cc") {
		m.Cc = append(m.Cc, parseAddrs(v)...)
	}
	if d := strings.TrimSpace(unfold(h.Get("Date"))); d != "" {
		t, err := parseDate(d)
		if err != nil {
			m.note("unparsable Date %q", clip(d, 60))
		} else {
			m.Date = t
		}
	} else {
		m.note("no Date header")
	}

	// MIME body.
	e, err := message.New(message.Header{Header: h}, bytes.NewReader(body))
	if err != nil && e == nil {
		m.note("cannot decode body: %v", err)
		m.Body = toUTF8(body)
		return m, nil
	}
	if err != nil {
		m.note("%v; body kept undecoded", err)
	}
	var w walker
	w.m = m
	w.walk(e, true, 0)
	m.Body = w.body.String()
	for _, p := range w.patches {
		if m.Body != "" && !strings.HasSuffix(m.Body, "\n") {
			m.Body += "\n"
		}
		m.Body += p
	}
	return m, nil
}

func (m *Message) note(format string, a ...any) {
	m.Notes = append(m.Notes, fmt.Sprintf(format, a...))
}

type field struct{ key, value string }

// splitHeader parses the header block leniently: continuation lines are
// joined, stray From_ lines are skipped, and a line that is not a header
// ends the header block (the rest is body, with a note).
func splitHeader(raw []byte, m *Message) ([]field, []byte, error) {
	var fs []field
	pos := 0
	for pos < len(raw) {
		end := bytes.IndexByte(raw[pos:], '\n')
		var line []byte
		next := len(raw)
		if end >= 0 {
			line = raw[pos : pos+end]
			next = pos + end + 1
		} else {
			line = raw[pos:]
		}
		switch {
		case len(line) == 0:
			if len(fs) == 0 {
				return nil, nil, fmt.Errorf("not a mail message: empty line where the header should start")
			}
			return fs, raw[next:], nil
		case (line[0] == ' ' || line[0] == '\t') && len(fs) > 0:
			fs[len(fs)-1].value += "\n" + string(line)
		case bytes.HasPrefix(line, []byte("From ")) || bytes.HasPrefix(line, []byte(">From ")):
			// A second From_ line (some mboxo writers); not a header.
		case isHeaderLine(line):
			i := bytes.IndexByte(line, ':')
			fs = append(fs, field{key: string(line[:i]), value: strings.TrimLeft(string(line[i+1:]), " \t")})
		default:
			if len(fs) == 0 {
				return nil, nil, fmt.Errorf("not a mail message: first line is %q, not a header", clip(string(line), 60))
			}
			m.note("header block ends at non-header line %q; rest taken as body", clip(string(line), 40))
			return fs, raw[pos:], nil
		}
		pos = next
	}
	if len(fs) == 0 {
		return nil, nil, fmt.Errorf("not a mail message: no header")
	}
	return fs, nil, nil
}

// walker collects the text body and attachments of a MIME tree.
type walker struct {
	m       *Message
	body    strings.Builder
	patches []string
	parts   int
	hasBody bool
}

func (w *walker) walk(e *message.Entity, top bool, depth int) {
	w.parts++
	if w.parts > maxParts || depth > 20 {
		if w.parts == maxParts+1 {
			w.m.note("more than %d MIME parts; rest ignored", maxParts)
		}
		return
	}
	mt, params, err := e.Header.ContentType()
	if err != nil || mt == "" {
		mt = "text/plain"
	}
	mt = strings.ToLower(mt)
	if mr := e.MultipartReader(); mr != nil {
		for {
			p, err := mr.NextPart()
			if err == io.EOF {
				break
			}
			if err != nil {
				if p == nil {
					w.m.note("MIME multipart: %v; later parts ignored", err)
					break
				}
				w.m.note("MIME part: %v", err)
			}
			w.walk(p, false, depth+1)
		}
		return
	}
	disp, dparams, _ := e.Header.ContentDisposition()
	filename := dparams["filename"]
	if filename == "" {
		filename = params["name"]
	}
	data, err := io.ReadAll(e.Body)
	if err != nil {
		w.m.note("MIME part %s: %v; kept what was readable", mt, err)
	}
	isText := strings.HasPrefix(mt, "text/") || isPatchName(filename)
	attachment := strings.EqualFold(disp, "attachment")
	if (mt == "text/plain" && !attachment) || (top && isText && mt != "text/html") {
		text := normalizeText(data)
		if w.hasBody && looksLikePatch(text) {
			w.patches = append(w.patches, text)
			return
		}
		if w.body.Len() > 0 && !strings.HasSuffix(w.body.String(), "\n") {
			w.body.WriteByte('\n')
		}
		w.body.WriteString(text)
		w.hasBody = true
		return
	}
	w.m.Attachments = append(w.m.Attachments, Attachment{Filename: filename, ContentType: mt, Data: data})
	if isText && mt != "text/html" {
		text := normalizeText(data)
		if looksLikePatch(text) {
			w.patches = append(w.patches, text)
		}
	}
}

func isPatchName(n string) bool {
	n = strings.ToLower(n)
	return strings.HasSuffix(n, ".patch") || strings.HasSuffix(n, ".diff")
}

var diffRE = lazyre.New(`(?m)^(diff --git |--- \S.*\n\+\+\+ \S|Index: \S)`)

func looksLikePatch(s string) bool { return diffRE.MatchString(s) }

// normalizeText makes decoded part data valid UTF-8 with LF line ends.
func normalizeText(b []byte) string {
	return toUTF8(normalizeNewlines(b))
}

// toUTF8 returns b as a string, reading invalid UTF-8 bytes as Latin-1 (old
// mail with 8-bit text and no charset).
func toUTF8(b []byte) string {
	if utf8.Valid(b) {
		return string(b)
	}
	var sb strings.Builder
	sb.Grow(len(b) + 16)
	for len(b) > 0 {
		r, n := utf8.DecodeRune(b)
		if r == utf8.RuneError && n <= 1 {
			sb.WriteRune(rune(b[0]))
			b = b[1:]
			continue
		}
		sb.Write(b[:n])
		b = b[n:]
	}
	return sb.String()
}

// unfold removes header folding (a newline before whitespace).
func unfold(s string) string {
	if !strings.Contains(s, "\n") {
		return s
	}
	return strings.ReplaceAll(s, "\n", "")
}

// decodeText decodes RFC 2047 encoded-words; on failure the text is kept.
func decodeText(s string) string {
	if strings.Contains(s, "=?") {
		if d, err := wordDecoder.DecodeHeader(s); err == nil {
			s = d
		}
	}
	return toUTF8([]byte(s))
}

// collapseSpace turns runs of white space (including U+00A0 and U+202F)
// into one ASCII space and trims the ends.
func collapseSpace(s string) string {
	var sb strings.Builder
	space := false
	for _, r := range s {
		if unicode.IsSpace(r) || r == '\u202f' || r == '\u00a0' {
			space = true
			continue
		}
		if space && sb.Len() > 0 {
			sb.WriteByte(' ')
		}
		space = false
		sb.WriteRune(r)
	}
	return sb.String()
}

// msgIDs extracts Message-IDs from a header value: every <...> token
// without white space inside, or the bare words containing '@' when there
// are no brackets.
func msgIDs(v string) []string {
	var out []string
	for i := 0; i < len(v); i++ {
		if v[i] != '<' {
			continue
		}
		j := i + 1
		for j < len(v) && v[j] != '>' && v[j] != '<' && v[j] != ' ' && v[j] != '\t' && v[j] != '\n' {
			j++
		}
		if j < len(v) && v[j] == '>' && j > i+1 {
			out = append(out, v[i+1:j])
			i = j
		}
	}
	if len(out) == 0 {
		for _, f := range strings.Fields(v) {
			if strings.Contains(f, "@") {
				if id := strings.Trim(f, "<>,;\"'()"); id != "" {
					out = append(out, id)
				}
			}
		}
	}
	return out
}

var addrParser = &mail.AddressParser{WordDecoder: wordDecoder}

var angleRE = lazyre.New(`<([^<>]*)>`)

// parseAddrs parses an address list, falling back to a lenient split when
// net/mail refuses it (unquoted dots and commas in names, raw 8-bit).
func parseAddrs(v string) []Address {
	v = strings.TrimSpace(unfold(v))
	if v == "" {
		return nil
	}
	if as, err := addrParser.ParseList(v); err == nil {
		out := make([]Address, 0, len(as))
		for _, a := range as {
			out = append(out, Address{Name: collapseSpace(a.Name), Email: a.Address})
		}
		return out
	}
	var out []Address
	for _, part := range splitAddrList(v) {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		if a, err := addrParser.Parse(part); err == nil {
			out = append(out, Address{Name: collapseSpace(a.Name), Email: a.Address})
			continue
		}
		var a Address
		if mm := angleRE.FindStringSubmatchIndex(part); mm != nil {
			a.Email = strings.TrimSpace(part[mm[2]:mm[3]])
			a.Name = strings.Trim(strings.TrimSpace(part[:mm[0]]), "\"")
		} else if i := strings.Index(part, "("); i > 0 && strings.HasSuffix(part, ")") {
			a.Email = strings.TrimSpace(part[:i])
			a.Name = strings.TrimSpace(part[i+1 : len(part)-1])
		} else {
			a.Email = part
		}
		a.Name = collapseSpace(decodeText(a.Name))
		out = append(out, a)
	}
	return out
}

// splitAddrList splits at commas outside quotes and angle brackets.
func splitAddrList(v string) []string {
	var out []string
	quote, angle, start := false, 0, 0
	for i := 0; i < len(v); i++ {
		switch v[i] {
		case '"':
			quote = !quote
		case '<':
			angle++
		case '>':
			if angle > 0 {
				angle--
			}
		case ',':
			if !quote && angle == 0 {
				out = append(out, v[start:i])
				start = i + 1
			}
		}
	}
	return append(out, v[start:])
}

var dateLayouts = []string{
	"Mon, 2 Jan 2006 15:04:05 -0700",
	"Mon, 2 Jan 2006 15:04:05 MST",
	"Mon, 2 Jan 2006 15:04 -0700",
	"2 Jan 2006 15:04:05 -0700",
	"Mon, 2 Jan 06 15:04:05 -0700",
	"Mon Jan 2 15:04:05 2006 -0700",
	"Mon Jan 2 15:04:05 MST 2006",
	"Mon, 2 Jan 2006 15:04:05",
	time.RFC3339,
}

var dateCommentRE = lazyre.New(`\s*\([^)]*\)\s*$`)

func parseDate(d string) (time.Time, error) {
	// Fast path: what git send-email and most clients write.
	if t, err := time.Parse(time.RFC1123Z, d); err == nil {
		return t, nil
	}
	if t, err := mail.ParseDate(d); err == nil {
		return t, nil
	}
	d = collapseSpace(dateCommentRE.ReplaceAllString(d, ""))
	if t, err := mail.ParseDate(d); err == nil {
		return t, nil
	}
	for _, l := range dateLayouts {
		if t, err := time.Parse(l, d); err == nil {
			return t, nil
		}
	}
	return time.Time{}, fmt.Errorf("unparsable date %q", d)
}
