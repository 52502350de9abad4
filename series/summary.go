package series

import (
	"fmt"
	"io"
	"strings"
	"time"
)

// WriteSummary renders the series for a terminal: title, version and why,
// author, date, cover, base, the patches with their collected trailers and
// where each came from ("Reviewed-by: X <x> (from <msgid>, v3)"), refused
// trailers, other versions found, orphans and notes.
func (s *Series) WriteSummary(w io.Writer, opt AMOptions) error {
	var b strings.Builder
	pf := func(format string, a ...any) { fmt.Fprintf(&b, format, a...) }
	pf("Series:   %s\n", s.Title)
	pf("Version:  v%d (%s)\n", s.Version, s.Reason)
	pf("Author:   %s\n", s.Author)
	pf("Date:     %s\n", s.Date.UTC().Format("2006-01-02 15:04 MST"))
	if s.CoverMessageID != "" {
		pf("Cover:    <%s>\n", s.CoverMessageID)
	} else if s.Cover != nil {
		pf("Cover:    %s (no Message-ID)\n", s.Cover.Source)
	} else {
		pf("Cover:    none\n")
	}
	var base []string
	if s.Base.Commit != "" {
		base = append(base, "base-commit "+s.Base.Commit)
	}
	for _, p := range s.Base.Prerequisites {
		base = append(base, "prerequisite-patch-id "+p)
	}
	if s.Base.ChangeID != "" {
		base = append(base, "change-id "+s.Base.ChangeID)
	}
	if len(base) == 0 {
		base = []string{"not given (no base-commit: line)"}
	}
	pf("Base:     %s\n", strings.Join(base, "\n          "))
	total := len(s.Patches) + len(s.Missing)
	pf("Patches:  %d of %d\n", len(s.Patches), total)
	missing := map[int]bool{}
	for _, n := range s.Missing {
		missing[n] = true
	}
	pi := 0
	for n := 1; n <= total; n++ {
		if missing[n] {
			pf("  [%d/%d] MISSING\n", n, total)
			continue
		}
		if pi >= len(s.Patches) {
			break
		}
		p := s.Patches[pi]
		pi++
		pf("  [%d/%d] %s\n", p.Subject.Number(), p.Subject.Total, p.Subject.Title)
		from := ""
		if p.FromVersion != 0 {
			from = fmt.Sprintf(", taken from v%d", p.FromVersion)
		}
		id := "<" + p.MessageID + ">"
		if p.MessageID == "" {
			id = "no Message-ID (" + p.Msg.Source + ")"
		}
		pf("        %s, author %s%s\n", id, p.Author, from)
		for _, t := range p.AddedTrailers(AMOptions{}) {
			pf("        + %s (%s)\n", t.String(), provenance(t))
		}
	}
	if len(s.Refused) > 0 {
		pf("Refused trailers (sender is not the person named; --any-sender accepts them):\n")
		for _, t := range s.Refused {
			pf("  - %s (%s, sent by %s)\n", t.String(), provenance(t), t.From)
		}
	}
	if len(s.Versions) > 1 {
		pf("Versions:\n")
		for _, v := range s.Versions {
			mark := " "
			if v.Version == s.Version {
				mark = "*"
			}
			pf("  %s v%d  %d/%d patches  %s  <%s>  %s\n", mark, v.Version, len(v.Found), v.Total, v.Date.UTC().Format(time.DateOnly), v.MessageID, v.Title)
		}
	}
	if len(s.Orphans) > 0 {
		pf("Orphans (parent not in the thread):\n")
		for _, o := range s.Orphans {
			if o == "" {
				pf("  (a message without Message-ID)\n")
				continue
			}
			pf("  <%s>\n", o)
		}
	}
	if len(s.Notes) > 0 {
		pf("Notes:\n")
		for _, n := range s.Notes {
			pf("  - %s\n", n)
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// provenance renders where a trailer came from: "from <msgid>, v3" plus
// ", cover letter" for cover-letter replies.
func provenance(t Trailer) string {
	s := fmt.Sprintf("from <%s>, v%d", t.MessageID, t.Version)
	if t.MessageID == "" {
		s = fmt.Sprintf("from a message without Message-ID sent by %s, v%d", t.From, t.Version)
	}
	if t.FromCover {
		s += ", cover letter"
	}
	return s
}
