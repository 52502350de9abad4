package series

import (
	"bytes"
	"fmt"
	"io"
	"mime"
	"net/mail"
	"strings"
	"time"
	"unicode"

	"github.com/patcheval/patcheval/mbox"
)

// AMMessage returns the patch as one git-am-ready mail (no From_ line):
// From: the author, Date: the author date, Subject: "[PATCH vN i/n] title",
// Message-ID, a UTF-8 8bit text body with the commit message (collected
// trailers and Link: added, see CommitMessage), "---", the notes below the
// cut and the diff.
func (p *Patch) AMMessage(opt AMOptions) []byte {
	var b bytes.Buffer
	b.WriteString("From: " + encodeAddress(p.Author) + "\n")
	d := p.Date
	if d.IsZero() {
		d = time.Unix(0, 0).UTC()
	}
	b.WriteString("Date: " + d.Format(time.RFC1123Z) + "\n")
	b.WriteString("Subject: " + encodeHeader(p.Subject.AMSubject()) + "\n")
	if id := p.msgid(); id != "" {
		b.WriteString("Message-ID: <" + id + ">\n")
	}
	b.WriteString("MIME-Version: 1.0\nContent-Type: text/plain; charset=UTF-8\nContent-Transfer-Encoding: 8bit\n\n")
	cm := p.CommitMessage(opt)
	if _, body, ok := strings.Cut(cm, "\n\n"); ok {
		b.WriteString(body)
	}
	b.WriteString("---\n")
	if p.BelowCut != "" {
		b.WriteString(p.BelowCut)
		b.WriteString("\n\n")
	}
	b.WriteString(p.Diff)
	if p.Diff != "" && !strings.HasSuffix(p.Diff, "\n") {
		b.WriteString("\n")
	}
	return b.Bytes()
}

// WriteAM writes the series as a git-am-ready mboxrd: the patches in order
// (the cover letter left out), each rebuilt by AMMessage. A series with
// missing patches is written as far as it goes; check s.Missing first.
func (s *Series) WriteAM(w io.Writer, opt AMOptions) error {
	msgs := make([][]byte, 0, len(s.Patches))
	for _, p := range s.Patches {
		msgs = append(msgs, p.AMMessage(opt))
	}
	if err := mbox.WriteMboxrd(w, msgs...); err != nil {
		return fmt.Errorf("writing am mbox: %w", err)
	}
	return nil
}

// Slug is the file name stem b4 am uses for the series:
// "v<N>_<yyyymmdd>_<sender local part>_<title>" with runs of non-word
// characters turned into "_", lower case, no "v1_", at most 100 characters;
// taken from the cover letter, else the first patch.
func (s *Series) Slug() string {
	first := s.First()
	if len(s.Patches) == 0 || first == nil {
		return "undefined"
	}
	title := ParseSubject(first.Subject).Title
	local, _, _ := strings.Cut(first.From.Email, "@")
	slug := wordSlug(first.Date.Format("20060102") + "_" + local + "_" + title)
	if s.Version != 1 {
		slug = fmt.Sprintf("v%d_%s", s.Version, slug)
	}
	if len(slug) > 100 {
		slug = slug[:100]
	}
	return slug
}

// wordSlug is Python's re.sub(r'\W+', '_', s).strip('_').lower().
func wordSlug(s string) string {
	var b strings.Builder
	prev := false
	for _, r := range s {
		if r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r) {
			b.WriteRune(r)
			prev = false
		} else if !prev {
			b.WriteByte('_')
			prev = true
		}
	}
	return strings.ToLower(strings.Trim(b.String(), "_"))
}

func isASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] >= 0x80 {
			return false
		}
	}
	return true
}

func encodeHeader(s string) string {
	if isASCII(s) {
		return s
	}
	return mime.QEncoding.Encode("utf-8", s)
}

func encodeAddress(a mbox.Address) string {
	if a.Name == "" {
		return a.Email
	}
	return (&mail.Address{Name: a.Name, Address: a.Email}).String()
}
