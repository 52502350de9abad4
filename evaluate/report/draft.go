package report

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"regexp"
	"strings"
	"time"
	"unicode/utf8"

	message "github.com/emersion/go-message"

	"github.com/patcheval/patcheval/internal/fail"
	"github.com/patcheval/patcheval/internal/lazyre"
	"github.com/patcheval/patcheval/mbox"
)

// MaxBodyWidth is the widest body line of a Draft, in columns.
const MaxBodyWidth = 72

// Draft is a reply mail, ready to be written as .eml. Header values are
// kept as plain decoded text; WriteDraft encodes and sanitises them.
type Draft struct {
	From       mbox.Address   `json:"from"`
	To         []mbox.Address `json:"to"`
	Cc         []mbox.Address `json:"cc,omitempty"`
	Subject    string         `json:"subject"`
	Date       time.Time      `json:"date"`
	MessageID  string         `json:"message_id"` // without brackets
	InReplyTo  string         `json:"in_reply_to"`
	References []string       `json:"references"`
	// Body is the plain-text body, LF line ends.
	Body string `json:"body"`
	// Notes say what NewDraft decided (Tested-by left out because of a
	// regression, addresses dropped as malformed, ...). Not in the mail.
	Notes []string `json:"notes,omitempty"`
	// TestedBy is set when the body carries a Tested-by trailer.
	TestedBy bool `json:"tested_by"`
}

// DraftOptions steer NewDraft.
type DraftOptions struct {
	// From is the sender (git config user.name / user.email, or settings).
	From mbox.Address
	// TestedBy asks for a "Tested-by: From" trailer; it is added only when
	// no comparison found a regression.
	TestedBy bool
	// Greeting opens the mail ("Hi Shrikanth,"); empty: none.
	Greeting string
	// Intro replaces the generated first paragraph of the results.
	Intro string
	// Quote replaces the quoted part of the answered message.
	Quote string
	// QuoteLines caps the quote (0: 10 lines).
	QuoteLines int
	// MaxListedDeltas caps the derived config differences listed per
	// pair, highlighted ones aside (0: 12).
	MaxListedDeltas int
	// Domain is the right-hand side of the Message-ID; empty: the From
	// address's domain, or patcheval.local.
	Domain string
	// To and Cc, when To is set, replace the reply-all addressing (a
	// bot's: the author, the list, the maintainers; see
	// series/recipients). The sender and malformed addresses are still
	// left out.
	To, Cc []mbox.Address
	// Reproducer, when set, is one Methodology line saying how to get
	// the evaluation's reproducer (pipelines/experiments/repro).
	Reproducer string
	// Now and Rand make drafts reproducible in tests (zero: time.Now,
	// crypto/rand).
	Now  time.Time
	Rand io.Reader
}

// NewDraft writes the reply to parent (the message being answered) that
// reports r: reply-all addressing, threading headers, an attribution line
// and a trimmed quote, then the results, methodology and verdicts.
func NewDraft(r *Report, parent *mbox.Message, o DraftOptions) (*Draft, error) {
	if r == nil {
		return nil, fail.Inputf("draft: no report")
	}
	d, err := newReply(parent, o)
	if err != nil {
		return nil, err
	}
	regs := r.Regressions()
	d.TestedBy = o.TestedBy && len(regs) == 0
	if o.TestedBy && len(regs) > 0 {
		d.Notes = append(d.Notes, "Tested-by left out: "+strings.Join(regs, "; "))
	}
	d.Body = draftBody(r, parent, o, d)
	if err := CheckBody(d.Body); err != nil {
		return nil, fmt.Errorf("draft: internal error: %w", err)
	}
	return d, nil
}

// NewNotice writes a reply to parent that tells something other than
// results (the series does not apply, ...), addressed, threaded and
// quoted like NewDraft's, never with a Tested-by. text is paragraphs
// separated by blank lines, wrapped to the body width; a line that starts
// with two spaces is kept as it is (a block of code or of an error),
// tabs expanded and cut to the body width.
func NewNotice(parent *mbox.Message, o DraftOptions, text string) (*Draft, error) {
	d, err := newReply(parent, o)
	if err != nil {
		return nil, err
	}
	out := quoteBlock(parent, o)
	var para []string
	flush := func() {
		if len(para) > 0 {
			out = append(out, Wrap(strings.Join(para, " "), MaxBodyWidth, "", "")...)
			para = nil
		}
	}
	for _, l := range strings.Split(strings.TrimSpace(text), "\n") {
		switch {
		case strings.TrimSpace(l) == "":
			flush()
			out = append(out, "")
		case strings.HasPrefix(l, "  "):
			flush()
			out = append(out, cutWidth(strings.TrimRight(cleanText(l), " "), MaxBodyWidth))
		default:
			para = append(para, strings.TrimSpace(l))
		}
	}
	flush()
	d.Body = strings.Join(out, "\n") + "\n"
	if err := CheckBody(d.Body); err != nil {
		return nil, fmt.Errorf("notice: internal error: %w", err)
	}
	return d, nil
}

// cutWidth cuts s to width columns, ending it with "..." when cut.
func cutWidth(s string, width int) string {
	if Width(s) <= width {
		return s
	}
	w := 0
	for i, r := range s {
		if w+runeWidth(r) > width-3 {
			return s[:i] + "..."
		}
		w += runeWidth(r)
	}
	return s
}

// newReply is the reply to parent without its body: addressing,
// subject, threading and Message-ID.
func newReply(parent *mbox.Message, o DraftOptions) (*Draft, error) {
	if parent == nil {
		return nil, fail.Inputf("draft: no message to answer")
	}
	if !validEmail(o.From.Email) {
		return nil, fail.Inputf("draft: sender address %q is not a valid address (set git config user.email or the From setting)", oneLine(o.From.Email))
	}
	if !validEmail(parent.From.Email) {
		return nil, fail.Inputf("draft: the answered message <%s> has no usable From address (%q)", oneLine(parent.MessageID), oneLine(parent.From.Email))
	}
	// A message without a Message-ID header (its MessageID is synthetic)
	// is answered without In-Reply-To: a made-up id must not thread.
	pid := ""
	if !parent.NoMessageID {
		if pid = cleanID(parent.MessageID); pid == "" {
			return nil, fail.Inputf("draft: the answered message has an unusable Message-ID %q", oneLine(parent.MessageID))
		}
	}
	d := &Draft{From: cleanAddr(o.From), Date: o.Now, InReplyTo: pid}
	if d.Date.IsZero() {
		d.Date = time.Now()
	}
	d.Date = d.Date.Truncate(time.Second)

	// Addressing: To the author, Cc everybody else, never ourselves.
	seen := map[string]bool{strings.ToLower(d.From.Email): true}
	to, cc := []mbox.Address{parent.From}, [][]mbox.Address{parent.To, parent.Cc}
	if len(o.To) > 0 {
		to, cc = o.To, [][]mbox.Address{o.Cc}
	}
	for _, a := range to {
		a = cleanAddr(a)
		if k := strings.ToLower(a.Email); validEmail(a.Email) && !seen[k] {
			d.To = append(d.To, a)
			seen[k] = true
		}
	}
	for _, list := range cc {
		for _, a := range list {
			a = cleanAddr(a)
			k := strings.ToLower(a.Email)
			if !validEmail(a.Email) {
				if a.Email != "" {
					d.Notes = append(d.Notes, fmt.Sprintf("dropped malformed address %q", a.Email))
				}
				continue
			}
			if seen[k] {
				continue
			}
			seen[k] = true
			d.Cc = append(d.Cc, a)
		}
	}
	if len(d.To) == 0 && len(d.Cc) > 0 {
		// Answering our own message: the first Cc becomes To.
		d.To, d.Cc = d.Cc[:1], d.Cc[1:]
	}
	if len(d.To) == 0 {
		return nil, fail.Inputf("draft: nobody to send to: %s is from the sender and has no other recipients", oneLine(parent.Ref()))
	}

	d.Subject = ReplySubject(parent.Subject)
	for _, ref := range parent.References {
		if id := cleanID(ref); id != "" && id != pid && !containsStr(d.References, id) {
			d.References = append(d.References, id)
		}
	}
	if pid != "" {
		d.References = append(d.References, pid)
	}

	domain := o.Domain
	if domain == "" {
		if i := strings.LastIndexByte(d.From.Email, '@'); i >= 0 {
			domain = d.From.Email[i+1:]
		}
	}
	if !regexp.MustCompile(`^[A-Za-z0-9.-]+$`).MatchString(domain) {
		domain = "patcheval.local"
	}
	rnd := o.Rand
	if rnd == nil {
		rnd = rand.Reader
	}
	var buf [8]byte
	if _, err := io.ReadFull(rnd, buf[:]); err != nil {
		return nil, fail.Infraf("draft: random Message-ID: %v", err)
	}
	d.MessageID = d.Date.UTC().Format("20060102150405") + "." + hex.EncodeToString(buf[:]) + "@" + domain
	return d, nil
}

func containsStr(l []string, s string) bool {
	for _, x := range l {
		if x == s {
			return true
		}
	}
	return false
}

var reRe = lazyre.New(`(?i)^\s*(re|aw|sv|antw)\s*(\[\d+\])?\s*:\s*`)

// ReplySubject is "Re: " + subject, without stacking Re: prefixes, on one
// clean line.
func ReplySubject(subject string) string {
	s := oneLine(subject)
	for {
		t := reRe.ReplaceAllString(s, "")
		if t == s {
			break
		}
		s = t
	}
	return "Re: " + s
}

// CheckBody reports the first body line wider than MaxBodyWidth columns,
// or a carriage return or other control character.
func CheckBody(body string) error {
	for i, l := range strings.Split(body, "\n") {
		if w := Width(l); w > MaxBodyWidth {
			return fmt.Errorf("body line %d is %d columns wide (max %d): %q", i+1, w, MaxBodyWidth, l)
		}
		if strings.ContainsAny(l, "\r\t\x00") {
			return fmt.Errorf("body line %d has a control character: %q", i+1, l)
		}
		if !utf8.ValidString(l) {
			return fmt.Errorf("body line %d is not valid UTF-8", i+1)
		}
	}
	return nil
}

// Attribution is the "On <date>, <name> wrote:" line(s) for m, wrapped to
// the body width.
func Attribution(m *mbox.Message) []string {
	who := oneLine(cleanAddr(m.From).String())
	text := who + " wrote:"
	if !m.Date.IsZero() {
		text = "On " + m.Date.Format("Mon, 02 Jan 2006 15:04:05 -0700") + ", " + text
	}
	return Wrap(text, MaxBodyWidth, "", "")
}

// inBodyHeader matches the in-body From:/Date:/Subject: lines of a patch.
var inBodyHeader = lazyre.New(`^(From|Date|Subject):\s`)

// attribLine ends an attribution line ("... wrote:", "... a écrit :").
var attribLine = lazyre.New(`(wrote|écrit|schrieb|escribió)\s*:$`)

// trailerLine matches commit trailers (Signed-off-by: and friends).
var trailerLine = lazyre.New(`^[A-Za-z][A-Za-z0-9-]*(-by|-to)?:\s+\S`)

// Quote picks the relevant part of m to quote: its own text (quoted lines,
// in-body headers, trailers, the diffstat, the diff and the signature cut
// away), the first paragraph, or more paragraphs up to maxLines lines
// (0: 10). "[...]" marks what was cut.
func Quote(m *mbox.Message, maxLines int) []string {
	if maxLines <= 0 {
		maxLines = 10
	}
	lines := strings.Split(cleanText(strings.ReplaceAll(m.Body, "\r", "")), "\n")
	var text []string
	start := true
	for _, l := range lines {
		t := strings.TrimRight(l, " ")
		if t == "---" || t == "-- " || l == "-- " || strings.HasPrefix(t, "diff --git ") || strings.HasPrefix(t, "Index: ") ||
			strings.HasPrefix(t, "base-commit: ") {
			break
		}
		if start {
			if t == "" || inBodyHeader.MatchString(t) {
				continue
			}
			start = false
		}
		if strings.HasPrefix(t, ">") {
			continue
		}
		if attribLine.MatchString(t) {
			// An attribution of quoted text, maybe wrapped: drop it
			// and its first half.
			if n := len(text); n > 0 && strings.HasPrefix(text[n-1], "On ") {
				text = text[:n-1]
			}
			continue
		}
		if trailerLine.MatchString(t) && isTrailer(t) {
			continue
		}
		text = append(text, t)
	}
	// The first paragraph is the summary worth quoting.
	var first []string
	rest := false
	for _, l := range text {
		if l == "" {
			if len(first) > 0 {
				rest = true
				break
			}
			continue
		}
		first = append(first, l)
	}
	if !rest {
		for _, l := range text[len(first):] {
			if l != "" {
				rest = true
			}
		}
	}
	var out []string
	if fits(prefixed("> ", first), MaxBodyWidth) {
		out = prefixed("> ", first)
	} else {
		// Too wide once quoted: refill the paragraph.
		out = Wrap(strings.Join(first, " "), MaxBodyWidth, "> ", "> ")
	}
	if len(out) > maxLines {
		out, rest = out[:maxLines], true
	}
	if rest {
		out = append(out, "> [...]")
	}
	return out
}

func prefixed(p string, lines []string) []string {
	out := make([]string, len(lines))
	for i, l := range lines {
		out[i] = p + l
	}
	return out
}

var trailerNames = map[string]bool{
	"signed-off-by": true, "acked-by": true, "reviewed-by": true, "tested-by": true,
	"reported-by": true, "suggested-by": true, "co-developed-by": true, "cc": true,
	"fixes": true, "link": true, "closes": true, "message-id": true,
}

func isTrailer(l string) bool {
	i := strings.IndexByte(l, ':')
	return i > 0 && trailerNames[strings.ToLower(l[:i])]
}

// quoteBlock opens a reply: the greeting, the attribution and the quote
// of parent, each followed by a blank line.
func quoteBlock(parent *mbox.Message, o DraftOptions) []string {
	const w = MaxBodyWidth
	var out []string
	if g := oneLine(o.Greeting); g != "" {
		out = append(out, Wrap(g, w, "", "")...)
		out = append(out, "")
	}
	var quote []string
	if o.Quote != "" {
		for _, l := range strings.Split(cleanText(strings.TrimRight(o.Quote, "\n")), "\n") {
			quote = append(quote, Wrap(l, w, "> ", "> ")...)
		}
	} else {
		quote = Quote(parent, o.QuoteLines)
	}
	if len(quote) > 0 {
		// Nothing worth quoting (a bare diff): no attribution either.
		out = append(out, Attribution(parent)...)
		out = append(out, quote...)
		out = append(out, "")
	}
	return out
}

// draftBody composes the mail text.
func draftBody(r *Report, parent *mbox.Message, o DraftOptions, d *Draft) string {
	t := &draftText{r: r, o: o}
	t.p(quoteBlock(parent, o)...)
	t.answer()
	t.summary()
	for _, b := range r.Benchmarks {
		t.benchmark(b)
	}
	t.decompositionsAndPerPatch()
	t.confounds()
	t.methodology()
	t.p("")
	if d.TestedBy {
		t.p("Tested-by: " + formatAddrText(d.From))
		t.p("")
	}
	// Trim trailing blank lines; end with one newline.
	out := t.out
	for len(out) > 0 && out[len(out)-1] == "" {
		out = out[:len(out)-1]
	}
	return strings.Join(out, "\n") + "\n"
}

// draftText is a draft's body as it is written, a line at a time.
type draftText struct {
	r   *Report
	o   DraftOptions
	out []string
}

func (t *draftText) p(lines ...string) { t.out = append(t.out, lines...) }

// para adds text wrapped as a paragraph.
func (t *draftText) para(text string) { t.p(Wrap(text, MaxBodyWidth, "", "")...) }

// answer says first what was measured: the intro asked for, or one made
// from the report.
func (t *draftText) answer() {
	r, o, p, para := t.r, t.o, t.p, t.para
	if o.Intro != "" {
		for _, pr := range strings.Split(strings.TrimSpace(o.Intro), "\n\n") {
			para(pr)
			p("")
		}
	} else {
		what := "this series"
		if r.Series.Version > 1 {
			what = fmt.Sprintf("v%d of this series", r.Series.Version)
		}
		intro := "I measured " + what + " with patcheval"
		if title := oneLine(r.Title); title != "" {
			intro += " (" + title + ")"
		}
		intro += "."
		if r.Arch != "" || r.Target.Kind != "" {
			intro += " Kernels built for " + oneLine(r.Arch)
			if r.Target.Deterministic {
				intro += " and run in deterministic QEMU (instruction counting)"
			} else if r.Target.Kind != "" {
				intro += " and run on " + oneLine(r.Target.Kind)
			}
			intro += "; details below."
		}
		para(intro)
		p("")
	}
}

// summary gives the merge note, the coverage warning, the headline and
// the bisection.
func (t *draftText) summary() {
	const w = MaxBodyWidth
	r, p, para := t.r, t.p, t.para
	if r.Merged != "" {
		para(oneLine(r.Merged))
		p("")
	}
	if w := r.CoverageWarning(); w != "" {
		para(w)
		p("")
	}
	if groups := r.Headline(); len(groups) > 0 {
		para(headlineTitle(r) + ":")
		for _, g := range groups {
			p(Wrap(g.Title+":", w, "", "")...)
			for _, l := range g.Lines {
				p(Wrap(l, w, "- ", "  ")...)
			}
		}
		p("")
	}

	if r.PerPatch != nil && r.PerPatch.Bisection != nil {
		para(r.PerPatch.Bisection.Sentence())
		p("")
	}
}

// benchmark gives one benchmark's tables (statistics, runs with PerRun,
// comparisons) and threads.
func (t *draftText) benchmark(b Benchmark) {
	const w = MaxBodyWidth
	r, p, para := t.r, t.p, t.para
	para(b.heading() + ":")
	p("")
	p(statsTable(b, false).lines("  ", w)...)
	p("")
	if r.PerRun {
		for _, row := range b.Rows {
			para(row.Variant + ":")
			p(runTable(b, row.Variant).lines("  ", w)...)
			p("")
		}
	}
	if len(b.Comparisons) > 0 {
		p(compTable(b, false).lines("  ", w)...)
		p("")
		if tl := threadLines(r, b, w, "", 6); len(tl) > 0 {
			p(tl...)
			p("")
		}
	}
}

// decompositionsAndPerPatch gives the decompositions and the per-patch tables
// (the bisection was said above).
func (t *draftText) decompositionsAndPerPatch() {
	const w = MaxBodyWidth
	r, p := t.r, t.p
	if len(r.Decompositions) > 0 {
		for _, dc := range r.Decompositions {
			p(decompLines(dc, w, "")...)
			p("")
		}
	}
	if r.PerPatch != nil && len(r.PerPatch.Tables) > 0 {
		pp := *r.PerPatch
		pp.Bisection = nil // said above
		p(perPatchLines(&pp, w, false)...)
	}
}

// confounds lists the config differences between the compared kernels.
func (t *draftText) confounds() {
	const w = MaxBodyWidth
	r, o, p, para := t.r, t.o, t.p, t.para
	if len(r.Confounds) > 0 {
		para("Config differences between the compared kernels (requested by " +
			"the variant, or derived by Kconfig):")
		limit := o.MaxListedDeltas
		if limit <= 0 {
			limit = 12
		}
		for _, c := range r.Confounds {
			p(confoundLines(c, w, "- ", "  ", limit)...)
		}
		p("")
	}
}

// methodology lists how it was measured: tree, commits, arch, kernels,
// target, samples, benchmarks, rule, wall time, notes, reproducer.
func (t *draftText) methodology() {
	const w = MaxBodyWidth
	r, o, p := t.r, t.o, t.p
	p("Methodology:")
	item := func(name, val string) {
		if val != "" {
			p(Wrap(name+": "+val, w, "- ", "  ")...)
		}
	}
	item("tree", treeText(r.Tree))
	if len(r.Tree.Commits) > 0 {
		p("- commits:")
		for _, c := range r.Tree.Commits {
			p(Wrap(short(c.Hash, 12)+" (\""+oneLine(c.Subject)+"\")", w, "    ", "      ")...)
		}
	}
	item("arch", oneLine(r.Arch))
	if len(r.Variants) > 0 {
		p("- kernels:")
		for _, v := range r.Variants {
			p(variantLines(v, w, "    ")...)
		}
	}
	item("target", targetText(r.Target))
	item("samples", nText(r))
	for _, b := range r.Benchmarks {
		if b.Description != "" {
			item(b.Name, b.Description)
		}
	}
	if r.Rule != "" {
		item("verdict rule", r.Rule)
	}
	if len(r.Timings) > 0 {
		item("wall time", timingText(r))
	}
	for _, n := range r.Notes {
		item("note", n)
	}
	item("reproducer", oneLine(o.Reproducer))
}

// formatAddrText renders an address for body text (a trailer): the name
// as is (cleaned), no encoding.
func formatAddrText(a mbox.Address) string {
	a = cleanAddr(a)
	if a.Name == "" {
		return "<" + a.Email + ">"
	}
	return a.Name + " <" + a.Email + ">"
}

// Recipients are the envelope recipients of d: To and Cc, deduplicated.
func (d Draft) Recipients() []string {
	var out []string
	seen := map[string]bool{}
	for _, a := range append(append([]mbox.Address(nil), d.To...), d.Cc...) {
		a = cleanAddr(a)
		k := strings.ToLower(a.Email)
		if validEmail(a.Email) && !seen[k] {
			seen[k] = true
			out = append(out, a.Email)
		}
	}
	return out
}

// Summary is what a sender confirms before d is sent: From, the envelope
// recipients and the Subject, one per line.
func (d Draft) Summary() string {
	return fmt.Sprintf("From:    %s\nTo:      %s\nSubject: %s\n",
		formatAddrText(d.From), strings.Join(d.Recipients(), ", "), oneLine(d.Subject))
}

// WriteDraft writes d as an RFC 5322 message: UTF-8 plain text,
// Content-Transfer-Encoding 8bit, LF line ends (the usual form of an .eml
// or mbox file; Send converts to CRLF). Header values are stripped of
// control characters and RFC 2047-encoded where needed, so no text from
// the answered message can add or break a header line.
func WriteDraft(w io.Writer, d Draft) error {
	if !validEmail(d.From.Email) {
		return fail.Inputf("draft: invalid From address %q", oneLine(d.From.Email))
	}
	type field struct{ k, v string }
	var fields []field
	set := func(k, v string) { fields = append(fields, field{k, v}) }
	date := d.Date
	if date.IsZero() {
		date = time.Now()
	}
	set("From", formatAddr(d.From))
	if to := formatList(d.To); to != "" {
		set("To", to)
	} else {
		return fail.Inputf("draft: no valid To address")
	}
	if cc := formatList(d.Cc); cc != "" {
		set("Cc", cc)
	}
	set("Subject", encodeText(oneLine(d.Subject)))
	set("Date", date.Format("Mon, 02 Jan 2006 15:04:05 -0700"))
	if id := cleanID(d.MessageID); id != "" {
		set("Message-ID", "<"+id+">")
	} else {
		return fail.Inputf("draft: invalid Message-ID %q", oneLine(d.MessageID))
	}
	if id := cleanID(d.InReplyTo); id != "" {
		set("In-Reply-To", "<"+id+">")
	}
	var refs []string
	for _, r := range d.References {
		if id := cleanID(r); id != "" {
			refs = append(refs, "<"+id+">")
		}
	}
	if len(refs) > 0 {
		set("References", strings.Join(refs, " "))
	}
	set("MIME-Version", "1.0")
	set("Content-Type", "text/plain; charset=UTF-8")
	set("Content-Transfer-Encoding", "8bit")
	set("User-Agent", "patcheval")
	// go-message writes the fields last-added first.
	var h message.Header
	for i := len(fields) - 1; i >= 0; i-- {
		h.Add(fields[i].k, fields[i].v)
	}

	var buf bytes.Buffer
	mw, err := message.CreateWriter(&buf, h)
	if err != nil {
		return fmt.Errorf("draft: %w", err)
	}
	body := strings.ReplaceAll(d.Body, "\r", "")
	if !strings.HasSuffix(body, "\n") {
		body += "\n"
	}
	for i, l := range strings.Split(body, "\n") {
		if len(l) > 998 {
			return fail.Inputf("draft: body line %d is %d bytes long (RFC 5322 allows 998)", i+1, len(l))
		}
	}
	if _, err := io.WriteString(mw, body); err != nil {
		return err
	}
	if err := mw.Close(); err != nil {
		return err
	}
	out := bytes.ReplaceAll(buf.Bytes(), []byte("\r\n"), []byte("\n"))
	_, err = w.Write(out)
	return err
}
