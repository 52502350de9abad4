package series

import (
	"sort"
	"strings"
)

// DefaultLinkMask is the Link: trailer mask b4 and the kernel use; "%s" is
// replaced by the patch's Message-ID.
const DefaultLinkMask = "https://patch.msgid.link/%s"

// AMOptions steer CommitMessage and WriteAM.
//
// The zero value adds no Link: trailer; use DefaultAMOptions for the usual
// behaviour (Link: https://patch.msgid.link/<msgid>).
type AMOptions struct {
	// LinkMask is the Link: trailer value with "%s" standing for the
	// patch's Message-ID. Empty: no Link: trailer.
	LinkMask string
}

// DefaultAMOptions returns the options b4 am -l would use: a Link: trailer
// with DefaultLinkMask.
func DefaultAMOptions() AMOptions { return AMOptions{LinkMask: DefaultLinkMask} }

// Link returns the Link: value for msgid under the mask ("" when the mask
// or msgid is empty: a mail without Message-ID gets no Link:).
func (o AMOptions) Link(msgid string) string {
	if o.LinkMask == "" || msgid == "" {
		return ""
	}
	if !strings.Contains(o.LinkMask, "%s") {
		return o.LinkMask + msgid
	}
	return strings.Replace(o.LinkMask, "%s", msgid, 1)
}

// AddedTrailers returns the trailers CommitMessage appends below the
// patch's own ones, in b4's order: trailers given in replies to this patch
// (in the order given), then those given on the cover letter, then the
// Link: trailer (when opt.LinkMask is set). Trailers equal to one already in
// the commit message, or to an earlier one (name and value compared
// case-insensitively, like b4), are left out.
func (p *Patch) AddedTrailers(opt AMOptions) []Trailer {
	_, block := splitTrailerBlock(p.Message)
	have := ParseTrailers(block)
	var cand []Trailer
	for _, t := range p.Trailers {
		if !t.InPatch {
			cand = append(cand, t)
		}
	}
	sort.SliceStable(cand, func(i, j int) bool { return !cand[i].FromCover && cand[j].FromCover })
	if l := opt.Link(p.msgid()); l != "" {
		cand = append(cand, Trailer{Name: "Link", Value: l, MessageID: p.msgid()})
	}
	var out []Trailer
outer:
	for _, t := range cand {
		for _, h := range have {
			if sameTrailer(t, h) {
				continue outer
			}
		}
		for _, h := range out {
			if sameTrailer(t, h) {
				continue outer
			}
		}
		out = append(out, t)
	}
	return out
}

func (p *Patch) msgid() string {
	if p.Msg == nil {
		return ""
	}
	// A synthetic id (the mail had no Message-ID) never reaches a Link:
	// trailer or a Message-ID header.
	return p.Msg.PublicID()
}

// CommitMessage returns the commit message git am would make from the
// patch written by WriteAM: the title line, a blank line, the commit
// message body with the patch's own trailers, then the collected trailers
// (AddedTrailers) and the Link: trailer. Like git am, trailing whitespace is
// removed from lines and runs of blank lines are collapsed (git
// stripspace). It ends with one newline.
func (p *Patch) CommitMessage(opt AMOptions) string {
	return stripspace(p.commitMessage(opt))
}

func (p *Patch) commitMessage(opt AMOptions) string {
	var b strings.Builder
	b.WriteString(strings.TrimSpace(p.Subject.Title))
	b.WriteString("\n")
	msg := strings.Trim(p.Message, "\n")
	add := p.AddedTrailers(opt)
	if msg == "" && len(add) == 0 {
		return b.String()
	}
	b.WriteString("\n")
	if msg != "" {
		b.WriteString(msg)
		b.WriteString("\n")
		if _, block := splitTrailerBlock(msg); block == "" && len(add) > 0 {
			b.WriteString("\n")
		}
	}
	for _, t := range add {
		b.WriteString(t.Name)
		b.WriteString(": ")
		b.WriteString(t.Value)
		b.WriteString("\n")
	}
	return b.String()
}

// stripspace does what git stripspace does without comment stripping:
// trailing whitespace removed from every line, consecutive blank lines
// collapsed into one, no leading or trailing blank lines, one final
// newline.
func stripspace(s string) string {
	var b strings.Builder
	blank := false
	for _, l := range strings.Split(s, "\n") {
		l = strings.TrimRight(l, " \t\r\v\f")
		if l == "" {
			blank = b.Len() > 0
			continue
		}
		if blank {
			b.WriteString("\n")
			blank = false
		}
		b.WriteString(l)
		b.WriteString("\n")
	}
	return b.String()
}
