package series

import (
	"context"
	"fmt"
	"net/mail"
	"sort"
	"strings"
	"time"

	"github.com/patcheval/patcheval/internal/fail"
	"github.com/patcheval/patcheval/internal/lazyre"
	"github.com/patcheval/patcheval/mbox"
)

// role is what a thread message is to Resolve.
type role int

const (
	roleFollowup role = iota // reply, or anything else
	rolePatch
	roleCover
)

type info struct {
	msg     *mbox.Message
	sub     Subject
	role    role
	version int
	diff    bool
	stat    bool
}

// vgroup is one version of the series found in the thread.
type vgroup struct {
	version int
	total   int
	cover   *info
	patches map[int]*info // by number
	first   *info         // earliest message of this version
}

// Resolve turns a Thread into the Series of one version.
//
// Messages are sorted into patches (a diff, not a reply), cover letters
// ("0/N", or a non-reply with a diffstat and no diff) and follow-ups. Patches
// are grouped by version; the version whose first message is the newest is
// chosen unless opt.Version picks one, and Series.Reason says why. A version
// with missing patches whose patches reply to the same-numbered patches of
// the version before is a partial re-roll: the missing patches are taken
// from the earlier version (Patch.FromVersion) and a note says so. Patches
// still missing are in Series.Missing and the notes ("2/3 missing").
//
// Trailers are collected from follow-ups (quoted lines ignored): a reply
// below a patch gives trailers to that patch, a reply below the cover letter
// gives them to every patch (FromCover). A person trailer (Reviewed-by, ...)
// is accepted only when the reply's sender is that person, unless
// opt.AnySender: the sender's address must match the trailer's (case
// ignored, "+tag" ignored, one sub-domain level ignored, like b4), or, when
// the addresses differ, the names must be equal (case ignored) — people
// often review from another address than the one they want in the trailer.
// Refused trailers are in Series.Refused with a note. Like b4, "Cc:",
// "To:", "From:" lines and values with an http(s) URL are not taken from
// replies, and replies in Thread.Orphans (parent missing) give no trailers.
// Trailers given on an earlier version of a patch with the same
// `git patch-id --stable` are carried over (b4 does the same), with their
// Version showing where they were given.
//
// A thread with no patch at all is a fail.Input error naming the thread.
func Resolve(t *mbox.Thread, opt Options) (*Series, error) {
	return ResolveContext(context.Background(), t, opt)
}

// ResolveContext is Resolve that stops when ctx is done (a client that
// left, a signal): a fail.Infra error wrapping ctx.Err(). A thread of
// 100k messages takes seconds.
func ResolveContext(ctx context.Context, t *mbox.Thread, opt Options) (*Series, error) {
	if err := hasMessages(t); err != nil {
		return nil, err
	}
	r := &resolution{ctx: ctx, t: t, opt: opt, s: &Series{}}
	if err := r.classifyMessages(); err != nil {
		return nil, err
	}
	r.inheritVersions()
	r.groupByVersion()
	if err := r.listVersions(); err != nil {
		return nil, err
	}
	if err := r.chooseVersion(); err != nil {
		return nil, err
	}
	r.fillPartialReroll()
	r.findCover()
	if err := r.takePatches(); err != nil {
		return nil, err
	}
	if err := collectTrailers(ctx, t, r.infos, r.s, r.g, r.cover, r.chosen, opt); err != nil {
		return nil, err
	}
	r.keepThreadNotes()
	return r.s, nil
}

// resolution is the state of one ResolveContext call, filled step by
// step.
type resolution struct {
	ctx context.Context
	t   *mbox.Thread
	opt Options
	s   *Series

	infos  map[string]*info // by Message-ID
	all    []*info          // in thread order
	groups map[int]*vgroup  // by version
	vs     []*vgroup        // the versions that have patches, lowest first

	g         *vgroup       // the chosen version
	chosen    map[int]*info // its patches by number, with those filled from the version before
	fromV     map[int]int   // the version a filled patch came from, by number
	prevCover *info         // the earlier cover letter a partial re-roll takes along
	cover     *info         // the series' cover letter, or nil
}

// hasMessages refuses a nil or empty thread.
func hasMessages(t *mbox.Thread) error {
	if t == nil || len(t.Messages) == 0 {
		src := "thread"
		if t != nil && t.Source != "" {
			src = t.Source
		}
		return fail.Inputf("%s: no messages", src)
	}
	return nil
}

// classifyMessages gives each message its role (patch, cover letter or
// follow-up) and the version its subject says.
func (r *resolution) classifyMessages() error {
	t := r.t
	r.infos = make(map[string]*info, len(t.Messages))
	for i, m := range t.Messages {
		if err := stopped(r.ctx, t, i); err != nil {
			return err
		}
		in := &info{msg: m, sub: ParseSubject(m.Subject)}
		in.diff = hasDiff(m.Body)
		in.stat = hasDiffstat(m.Body)
		switch {
		case in.sub.IsReply:
		case in.sub.HasCounter && in.sub.Index == 0:
			// 0/N is the cover letter even when it carries a diff (b4
			// does the same).
			in.role = roleCover
		case in.diff:
			in.role = rolePatch
		case in.stat && !in.sub.IsReply && in.sub.IsPatch:
			// A cover letter without 0/N is found below, from its patches.
		}
		in.version = in.sub.Version
		r.infos[m.MessageID] = in
		r.all = append(r.all, in)
	}
	return nil
}

// inheritVersions gives a patch without "vN" below a cover letter (or
// below patch 1) that has one its version, like b4.
func (r *resolution) inheritVersions() {
	for _, in := range r.all {
		if in.role != rolePatch || in.sub.HasVersion {
			continue
		}
		if p := r.t.Parent(in.msg); p != nil {
			pi := r.infos[p.MessageID]
			if pi.sub.HasVersion && ((!pi.diff && pi.stat) || pi.role == roleCover || (pi.role == rolePatch && pi.sub.Number() == 1)) {
				in.version = pi.sub.Version
			}
		}
	}
}

// groupByVersion sorts patches and cover letters into their versions,
// keeping one patch per position (with a note on the one left out).
func (r *resolution) groupByVersion() {
	s := r.s
	r.groups = map[int]*vgroup{}
	group := func(v int) *vgroup {
		g := r.groups[v]
		if g == nil {
			g = &vgroup{version: v, patches: map[int]*info{}}
			r.groups[v] = g
		}
		return g
	}
	for _, in := range r.all {
		switch in.role {
		case rolePatch:
			g := group(in.version)
			n := in.sub.Number()
			if old := g.patches[n]; old != nil {
				keep, drop := old, in
				if !old.sub.HasCounter && in.sub.HasCounter {
					// A numbered patch beats an unnumbered one beside it.
					keep, drop = in, old
					g.patches[n] = in
				}
				s.Notes = append(s.Notes, samePositionNote(keep, drop, n))
				continue
			}
			g.patches[n] = in
			if in.sub.Total > g.total {
				g.total = in.sub.Total
			}
			if g.first == nil || in.msg.Date.Before(g.first.msg.Date) {
				g.first = in
			}
		case roleCover:
			g := group(in.version)
			if g.cover == nil {
				g.cover = in
			}
			if in.sub.Total > g.total {
				g.total = in.sub.Total
			}
			if g.first == nil || in.msg.Date.Before(g.first.msg.Date) {
				g.first = in
			}
		}
	}
}

// listVersions keeps the versions that have patches, lowest first, in
// Series.Versions; a thread with none is an Input error.
func (r *resolution) listVersions() error {
	for _, g := range r.groups {
		if len(g.patches) > 0 {
			r.vs = append(r.vs, g)
		}
	}
	if len(r.vs) == 0 {
		return fail.Inputf("%s: no patches in the thread (%d messages; a patch is a message with a diff whose subject is not a reply)", r.t.Source, len(r.t.Messages))
	}
	vs := r.vs
	sort.Slice(vs, func(i, j int) bool { return vs[i].version < vs[j].version })
	for _, g := range vs {
		v := Version{Version: g.version, Total: g.total, Date: g.first.msg.Date, MessageID: g.first.msg.PublicID()}
		for n := range g.patches {
			v.Found = append(v.Found, n)
		}
		sort.Ints(v.Found)
		if g.cover != nil {
			v.Title = g.cover.sub.Title
		} else {
			v.Title = g.patches[v.Found[0]].sub.Title
		}
		r.s.Versions = append(r.s.Versions, v)
	}
	return nil
}

// chooseVersion takes the version opt.Version asks for, or else the one
// whose first message is the newest, and says why in Series.Reason.
func (r *resolution) chooseVersion() error {
	s, vs := r.s, r.vs
	var g *vgroup
	if r.opt.Version > 0 {
		for _, c := range vs {
			if c.version == r.opt.Version {
				g = c
			}
		}
		if g == nil {
			var have []string
			for _, c := range vs {
				have = append(have, fmt.Sprintf("v%d", c.version))
			}
			return fail.Inputf("%s: no v%d patches in the thread (found %s)", r.t.Source, r.opt.Version, strings.Join(have, ", "))
		}
		s.Reason = requestedReason(g.version)
	} else {
		g = vs[0]
		for _, c := range vs[1:] {
			if c.first.msg.Date.After(g.first.msg.Date) || c.first.msg.Date.Equal(g.first.msg.Date) && c.version > g.version {
				g = c
			}
		}
		if len(vs) == 1 {
			s.Reason = fmt.Sprintf("v%d is the only version in the thread", g.version)
		} else {
			var others []string
			for _, c := range vs {
				if c != g {
					others = append(others, fmt.Sprintf("v%d %s", c.version, day(c.first.msg.Date)))
				}
			}
			s.Reason = fmt.Sprintf("v%d is the newest version: its first message %s is dated %s (others: %s)",
				g.version, g.first.msg.Ref(), day(g.first.msg.Date), strings.Join(others, ", "))
			if g.version != vs[len(vs)-1].version {
				s.Reason += fmt.Sprintf("; note v%d has a higher number but was sent earlier (b4 would take v%d)", vs[len(vs)-1].version, vs[len(vs)-1].version)
			}
		}
	}
	s.Version = g.version
	r.g = g
	return nil
}

// requestedReason is Series.Reason when Options.Version asked for v.
func requestedReason(v int) string { return fmt.Sprintf("v%d requested", v) }

// Requested is s as Resolve gives it when Options.Version asks for
// s.Version: a copy whose Reason says so. The version asked for decides
// which version is taken, nothing else: a caller that resolved the newest
// version and then pins it (pipelines/runner) need not resolve the thread
// again.
func (s *Series) Requested() *Series {
	if s == nil {
		return nil
	}
	c := *s
	c.Reason = requestedReason(s.Version)
	return &c
}

// fillPartialReroll takes the chosen version's patches and, when it is a
// partial re-roll (its patches reply to the same-numbered patches of the
// version before), fills the missing ones (and the cover letter) from the
// version before.
func (r *resolution) fillPartialReroll() {
	s, g := r.s, r.g
	r.chosen = map[int]*info{}
	r.fromV = map[int]int{}
	for n, in := range g.patches {
		r.chosen[n] = in
	}
	total := g.total
	prev := r.groups[g.version-1]
	if prev == nil || len(prev.patches) == 0 || countMissing(r.chosen, total) == 0 {
		return
	}
	prevByKey := patchesByKey(r.infos, g.version-1)
	for n, in := range g.patches {
		if !repliesToSameNumber(r.t, prevByKey, in, n, in.sub.Total) {
			return
		}
	}
	var filled []string
	for n, pin := range prev.patches {
		if n == 0 || n > total {
			continue
		}
		if _, ok := r.chosen[n]; !ok {
			r.chosen[n] = pin
			r.fromV[n] = prev.version
			filled = append(filled, fmt.Sprintf("%d/%d", n, total))
		}
	}
	if len(filled) == 0 {
		return
	}
	sort.Strings(filled)
	var sent []string
	for n := range g.patches {
		sent = append(sent, fmt.Sprintf("%d/%d", n, total))
	}
	sort.Strings(sent)
	s.Notes = append(s.Notes, fmt.Sprintf("partial re-roll: v%d re-sent only %s as replies to the v%d patches; %s taken from v%d",
		g.version, strings.Join(sent, ", "), prev.version, strings.Join(filled, ", "), prev.version))
	if g.cover == nil && prev.cover != nil {
		// b4 takes the earlier cover letter along too.
		r.prevCover = prev.cover
		s.Notes = append(s.Notes, fmt.Sprintf("partial re-roll: using the v%d cover letter %s", prev.version, prev.cover.msg.Ref()))
	}
}

// findCover finds the cover letter (the version's own, the one a partial
// re-roll took along, or a non-reply with a diffstat above the first
// patch) and takes the series' title, author, date and base from it.
func (r *resolution) findCover() {
	s, g := r.s, r.g
	var cover *info
	if g.cover != nil {
		cover = g.cover
	} else if r.prevCover != nil {
		cover = r.prevCover
	} else {
		for _, n := range sortedKeys(g.patches) {
			if p := r.t.Parent(g.patches[n].msg); p != nil {
				pi := r.infos[p.MessageID]
				if pi.role != rolePatch && !pi.sub.IsReply && pi.stat && !pi.diff {
					cover = pi
					pi.role = roleCover
				}
			}
			break
		}
	}
	r.cover = cover
	if cover == nil {
		return
	}
	s.Cover = cover.msg
	s.CoverMessageID = cover.msg.PublicID()
	if cover.msg.NoMessageID {
		s.Notes = append(s.Notes, fmt.Sprintf("the cover letter %q (%s) has no Message-ID header: no link to it is written", cover.sub.Title, cover.msg.Source))
	}
	s.Title = cover.sub.Title
	s.Author = cover.msg.From
	s.Date = cover.msg.Date
	parseBase(cover.msg.Body, &s.Base)
}

// takePatches puts the chosen patches in order in Series.Patches (those
// cut short marked Broken, those from an earlier version renumbered),
// lists the missing ones, and, without a cover letter, takes the series'
// title, author and date from the first patch. A version left with no
// patch is an Input error.
func (r *resolution) takePatches() error {
	s, g, total := r.s, r.g, r.g.total
	for _, n := range sortedKeys(r.chosen) {
		if n == 0 {
			continue
		}
		in := r.chosen[n]
		p, notes := buildPatch(in)
		s.Notes = append(s.Notes, notes...)
		if why := truncatedHunk(p.Diff); why != "" {
			p.Broken = why
			s.Notes = append(s.Notes, fmt.Sprintf("patch %d/%d %q is cut short: %s", n, total, p.Subject.Title, why))
		}
		p.FromVersion = r.fromV[n]
		if p.FromVersion != 0 {
			// Renumber like b4: the patch belongs to the new version now.
			p.Subject.Version = g.version
			p.Subject.HasVersion = g.version > 1
			p.Subject.Total = total
		}
		s.Patches = append(s.Patches, p)
		if r.cover == nil {
			parseBase(in.msg.Body, &s.Base)
		}
	}
	for n := 1; n <= total; n++ {
		if _, ok := r.chosen[n]; !ok {
			s.Missing = append(s.Missing, n)
			s.Notes = append(s.Notes, fmt.Sprintf("%d/%d missing from v%d", n, total, g.version))
		}
	}
	if len(s.Patches) == 0 {
		return fail.Inputf("%s: v%d has no patches", r.t.Source, g.version)
	}
	if r.cover == nil {
		first := s.Patches[0]
		s.Title = first.Subject.Title
		s.Author = first.Msg.From
		s.Date = first.Msg.Date
	}
	return nil
}

// keepThreadNotes carries the thread's orphans and notes into the Series.
func (r *resolution) keepThreadNotes() {
	for _, o := range r.t.Orphans {
		r.s.Orphans = append(r.s.Orphans, o.PublicID())
	}
	for _, n := range r.t.Notes {
		r.s.Notes = append(r.s.Notes, "thread: "+n)
	}
}

// samePositionNote explains why drop was left out for keep (both of one
// version and position n): the same patch sent twice, or a different patch
// (an unnumbered one beside "1/1", or two different n/N).
func samePositionNote(keep, drop *info, n int) string {
	kd, dd := PatchID(splitBody(keep.msg.Body).Diff), PatchID(splitBody(drop.msg.Body).Diff)
	if kd != "" && kd == dd {
		return fmt.Sprintf("v%d patch %d/%d sent twice: kept %s, ignored %s (same diff)",
			keep.version, n, keep.sub.Total, keep.msg.Ref(), drop.msg.Ref())
	}
	label := func(in *info) string {
		if !in.sub.HasCounter {
			return fmt.Sprintf("unnumbered patch %s %q", in.msg.Ref(), in.sub.Title)
		}
		return fmt.Sprintf("%d/%d %s %q", in.sub.Index, in.sub.Total, in.msg.Ref(), in.sub.Title)
	}
	if !drop.sub.HasCounter || !keep.sub.HasCounter {
		return fmt.Sprintf("ignored the %s: a different patch from v%d %s, not part of this series (resolve it on its own with -m FILE <its Message-ID>)",
			label(drop), keep.version, label(keep))
	}
	return fmt.Sprintf("v%d has two different patches numbered %d/%d: kept %s, ignored %s (their diffs differ)",
		keep.version, n, keep.sub.Total, label(keep), label(drop))
}

func day(t time.Time) string { return t.UTC().Format("2006-01-02 15:04 MST") }

func countMissing(m map[int]*info, total int) int {
	n := 0
	for i := 1; i <= total; i++ {
		if m[i] == nil {
			n++
		}
	}
	return n
}

func sortedKeys(m map[int]*info) []int {
	ks := make([]int, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	sort.Ints(ks)
	return ks
}

// repliesToSameNumber reports whether in replies (directly or further down)
// to a patch of the previous version (prev, by patchesByKey) with the same
// number and total. Each candidate is one IsAncestor test, so a thread as
// deep as it is long costs no more than a flat one.
func repliesToSameNumber(t *mbox.Thread, prev map[[2]int][]*info, in *info, n, total int) bool {
	for _, ai := range prev[[2]int{n, total}] {
		if t.IsAncestor(ai.msg, in.msg) {
			return true
		}
	}
	return false
}

// patchesByKey indexes the patch mails of version v by number and total.
func patchesByKey(infos map[string]*info, v int) map[[2]int][]*info {
	out := map[[2]int][]*info{}
	for _, ai := range infos {
		if ai.role == rolePatch && ai.version == v {
			k := [2]int{ai.sub.Number(), ai.sub.Total}
			out[k] = append(out[k], ai)
		}
	}
	return out
}

// buildPatch makes a Patch from a patch mail; notes say what had to be
// repaired or guessed (no Message-ID, no Subject, blank context lines a mail
// client stripped).
func buildPatch(in *info) (*Patch, []string) {
	m := in.msg
	pp := splitBody(m.Body)
	var notes []string
	p := &Patch{
		Msg:       m,
		MessageID: m.PublicID(),
		Subject:   in.sub,
		Author:    m.From,
		Date:      m.Date,
		Message:   pp.Message,
		BelowCut:  pp.BelowCut,
		Diff:      pp.Diff,
	}
	p.Subject.Version = in.version
	if f := pp.Header["from"]; f != "" {
		if a, err := mail.ParseAddress(f); err == nil {
			p.Author = mbox.Address{Name: a.Name, Email: a.Address}
		} else if a, ok := parsePerson(f); ok {
			p.Author = a
		}
	}
	if d := pp.Header["date"]; d != "" {
		if tm, err := mail.ParseDate(d); err == nil {
			p.Date = tm
		}
	}
	if sj := pp.Header["subject"]; sj != "" {
		p.Subject.Title = ParseSubject(sj).Title
	}
	label := func() string {
		if p.Subject.HasCounter {
			return fmt.Sprintf("patch %d/%d %q", p.Subject.Index, p.Subject.Total, p.Subject.Title)
		}
		return fmt.Sprintf("patch %q", p.Subject.Title)
	}
	if strings.TrimSpace(p.Subject.Title) == "" {
		// No Subject: header (or an empty one) and no in-body Subject:
		// the first paragraph of the body is the title, as git am reads
		// such a mail.
		title, rest, _ := strings.Cut(strings.TrimLeft(p.Message, "\n"), "\n\n")
		if t := strings.Join(strings.Fields(title), " "); t != "" {
			p.Subject.Title, p.Message = t, strings.TrimLeft(rest, "\n")
			notes = append(notes, fmt.Sprintf("%s (%s) has no subject (no or an empty Subject: header); its first body line is the title", label(), m.Source))
		}
	}
	if m.NoMessageID {
		notes = append(notes, fmt.Sprintf("%s (%s) has no Message-ID header: no Link: trailer and no Message-ID are written for it", label(), m.Source))
	}
	if d, fixed := repairBlankContext(p.Diff); len(fixed) > 0 {
		p.Diff = d
		notes = append(notes, fmt.Sprintf("%s: restored blank context lines a mail client stripped (%s; the hunk line counts say they are missing)", label(), strings.Join(fixed, ", ")))
	}
	p.PatchID = PatchID(p.Diff)
	_, block := splitTrailerBlock(p.Message)
	for _, tr := range ParseTrailers(block) {
		tr.MessageID = m.PublicID()
		tr.From = m.From
		tr.Version = in.version
		tr.InPatch = true
		p.Trailers = append(p.Trailers, tr)
	}
	return p, notes
}

var urlRE = lazyre.New(`https?://`)

// linkTrailers are the trailers whose value is a URL by nature.
var linkTrailers = map[string]bool{"link": true, "closes": true, "buglink": true}

// replyTrailers are the trailers a follow-up gives, decided per kind:
//   - person trailers (Reviewed-by, Tested-by, ...) with an address and no
//     URL in the value;
//   - Link:, Closes: and BugLink: when they stand in a trailer block (a
//     paragraph made only of trailer lines, e.g. below a Tested-by), not in
//     prose: current b4 keeps them for the patch they answer;
//   - other known trailers (Fixes:, ...) without a URL;
//   - Cc:, To:, From: and Author: lines are addressing, not trailers (b4
//     does not take them either).
//
// Every trailer not taken is in dropped, with the reason, for a note.
func replyTrailers(m *mbox.Message) (out []Trailer, dropped []string) {
	var block map[string]bool
	for _, tr := range ParseTrailers(m.Body) {
		l := strings.ToLower(tr.Name)
		switch {
		case l == "cc" || l == "to" || l == "from" || l == "author":
			dropped = append(dropped, fmt.Sprintf("%q (a %s: line in a reply is addressing, not a trailer)", tr.String(), tr.Name))
			continue
		case linkTrailers[l]:
			if block == nil {
				block = trailerBlockLines(m.Body)
			}
			if !block[l+":"+tr.Value] {
				dropped = append(dropped, fmt.Sprintf("%q (in the text, not in a trailer block)", tr.String()))
				continue
			}
		case urlRE.MatchString(tr.Value):
			dropped = append(dropped, fmt.Sprintf("%q (a URL in a %s: trailer)", tr.String(), tr.Name))
			continue
		}
		tr.MessageID = m.PublicID()
		tr.From = m.From
		out = append(out, tr)
	}
	return out, dropped
}

// trailerBlockLines returns "name:value" (name lower case) for every
// trailer line of body that stands in a trailer block: a paragraph (quoted
// lines and blank lines separate paragraphs) whose lines are all trailer
// lines or their continuations.
func trailerBlockLines(body string) map[string]bool {
	out := map[string]bool{}
	var para []string
	flush := func() {
		keys := map[string]bool{}
		for j, l := range para {
			trim := strings.TrimSpace(l)
			if m := trailerLineRE.FindStringSubmatch(trim); m != nil && l == trim {
				keys[strings.ToLower(m[1])+":"+m[2]] = true
				continue
			}
			if j > 0 && (l != trim || extinfoRE.MatchString(trim) || strings.HasPrefix(trim, "<") && strings.HasSuffix(trim, ">")) {
				continue
			}
			para = para[:0]
			return
		}
		for k := range keys {
			out[k] = true
		}
		para = para[:0]
	}
	for _, l := range strings.Split(body, "\n") {
		l = strings.TrimRight(l, "\r")
		if l == "-- " {
			break
		}
		if strings.TrimSpace(l) == "" || strings.HasPrefix(strings.TrimLeft(l, " \t"), ">") {
			flush()
			continue
		}
		para = append(para, l)
	}
	flush()
	return out
}

// senderMatches says whether a person trailer may be accepted from a
// message sent by from.
func senderMatches(tr Trailer, from mbox.Address) bool {
	if tr.Person == nil {
		return true
	}
	if emailEq(tr.Person.Email, from.Email) {
		return true
	}
	tn := strings.ToLower(strings.TrimSpace(tr.Person.Name))
	fn := strings.ToLower(strings.TrimSpace(from.Name))
	return tn != "" && tn == fn
}

var plusTagRE = lazyre.New(`\+[^@]+@`)

// emailEq is b4's fuzzy address comparison.
func emailEq(a, b string) bool {
	a, b = strings.ToLower(a), strings.ToLower(b)
	if a == b {
		return true
	}
	if !strings.Contains(a, "@") || !strings.Contains(b, "@") {
		return false
	}
	a, b = plusTagRE.ReplaceAllString(a, "@"), plusTagRE.ReplaceAllString(b, "@")
	if a == b {
		return true
	}
	al, ad, _ := strings.Cut(a, "@")
	bl, bd, _ := strings.Cut(b, "@")
	if al != bl {
		return false
	}
	d := strings.Count(ad, ".") - strings.Count(bd, ".")
	return (d == 1 || d == -1) && (strings.HasSuffix(ad, "."+bd) || strings.HasSuffix(bd, "."+ad))
}

// nearestUp finds a message's nearest ancestor whose info satisfies ok.
// Every walk records its answer for the messages it passed (memo), so the
// walks of all messages together are linear in the thread, however deep.
type nearestUp struct {
	t     *mbox.Thread
	infos map[string]*info
	ok    func(*info) bool
	memo  map[string]*info // message -> its nearest ok ancestor-or-self (nil: none)
}

func (u *nearestUp) from(m *mbox.Message) *info {
	var path []string
	var res *info
	for a := u.t.Parent(m); a != nil; a = u.t.Parent(a) {
		if r, seen := u.memo[a.MessageID]; seen {
			res = r
			break
		}
		if ai := u.infos[a.MessageID]; u.ok(ai) {
			res = ai
			break
		}
		path = append(path, a.MessageID)
	}
	for _, id := range path {
		u.memo[id] = res
	}
	return res
}

// collectTrailers walks the follow-ups and attaches their trailers.
func collectTrailers(ctx context.Context, t *mbox.Thread, infos map[string]*info, s *Series, g *vgroup, cover *info, chosen map[int]*info, opt Options) error {
	orphan := map[string]bool{}
	for _, o := range t.Orphans {
		orphan[o.MessageID] = true
	}
	// Which Patch each patch mail became, and earlier-version patches
	// with the same patch-id (trailer carry-over).
	byMsg := map[string]*Patch{}
	byPID := map[string]*Patch{}
	for _, p := range s.Patches {
		byMsg[p.Msg.MessageID] = p
		if p.PatchID != "" {
			byPID[p.PatchID] = p
		}
	}
	up := nearestUp{t: t, infos: infos, memo: map[string]*info{}, ok: func(ai *info) bool {
		return ai.role == rolePatch || ai.role == roleCover || !ai.sub.IsReply
	}}
	var coverTrailers []Trailer
	for i, m := range t.Messages {
		if err := stopped(ctx, t, i); err != nil {
			return err
		}
		in := infos[m.MessageID]
		if in.role != roleFollowup {
			continue
		}
		trs, dropped := replyTrailers(m)
		if len(trs) == 0 && len(dropped) == 0 {
			continue
		}
		if orphan[m.MessageID] {
			if len(trs) > 0 {
				s.Notes = append(s.Notes, fmt.Sprintf("orphan %s from %s carries %d trailer(s); not applied because the message it replies to is missing", m.Ref(), m.From, len(trs)))
			}
			continue
		}
		// Walk up to the patch or cover letter this reply belongs to.
		target := up.from(m)
		if target == nil {
			continue
		}
		var dest *Patch
		isCover := false
		switch {
		case target == cover:
			isCover = true
		case target.role == rolePatch:
			dest = byMsg[target.msg.MessageID]
			if dest == nil && target.version != g.version {
				// Carry over from an earlier/other version when the diff
				// is the same.
				dest = byPID[PatchID(splitBody(target.msg.Body).Diff)]
				if dest == nil {
					continue
				}
			}
			if dest == nil {
				continue
			}
		default:
			continue
		}
		for _, d := range dropped {
			s.Notes = append(s.Notes, fmt.Sprintf("not taken from %s: %s", m.Ref(), d))
		}
		for _, tr := range trs {
			tr.Version = target.version
			tr.FromCover = isCover
			if tr.Problem != "" {
				s.Refused = append(s.Refused, tr)
				s.Notes = append(s.Notes, fmt.Sprintf("refused %q from %s: %s", tr.String(), m.Ref(), tr.Problem))
				continue
			}
			if !opt.AnySender && !senderMatches(tr, m.From) {
				s.Refused = append(s.Refused, tr)
				s.Notes = append(s.Notes, fmt.Sprintf("refused %q from %s: sent by %s, not by the person named (use --any-sender to accept)", tr.String(), m.Ref(), m.From))
				continue
			}
			if tr.Normalized != "" {
				s.Notes = append(s.Notes, fmt.Sprintf("%q from %s written as %q (the address was polluted by an HTML mail client)", tr.Name+": "+tr.Normalized, m.Ref(), tr.String()))
			}
			if isCover {
				coverTrailers = append(coverTrailers, tr)
			} else {
				dest.Trailers = append(dest.Trailers, tr)
			}
		}
	}
	for _, p := range s.Patches {
		p.Trailers = append(p.Trailers, coverTrailers...)
	}
	return nil
}

// stopped checks ctx every 64 messages of a loop over t.
func stopped(ctx context.Context, t *mbox.Thread, i int) error {
	if i%64 != 0 || ctx.Err() == nil {
		return nil
	}
	return fail.Infra(fmt.Errorf("%s: resolving stopped after %d of %d messages: %w", t.Source, i, len(t.Messages), ctx.Err()))
}
