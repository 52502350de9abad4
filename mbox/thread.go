package mbox

import (
	"context"
	"fmt"
	"sort"
	"strings"

	"github.com/patcheval/patcheval/internal/fail"
	"github.com/patcheval/patcheval/internal/lazyre"
)

// NewThread deduplicates msgs and links them into a reply tree.
//
// Deduplication: of several messages with one Message-ID the first in
// input order is kept (lore serves the same mail received through several
// lists); Thread.Duplicates counts the others. A dropped copy whose subject
// or body differs gets a note that says so.
//
// Linking, for each message M (the rule public-inbox applies):
//
//  1. In-Reply-To, when it names a message present in the thread, is the
//     parent (b4 and mail clients' threading do the same): References may
//     come in any order (some clients list the direct parent first and
//     the thread root last, others only the root), In-Reply-To names the
//     message answered.
//  2. Otherwise the reference chain of M is its References header followed
//     by its In-Reply-To, in that order, repeated IDs and M's own ID
//     removed, and the parent is the LAST message of the chain that is
//     present in the thread: a reply whose direct parent is missing hangs
//     under its nearest present ancestor (with a note).
//  3. When no message of the chain is present, M is an orphan if the chain
//     is not empty (it replies to something missing): it is kept, listed in
//     Orphans and in Roots.
//  4. Subject fallback: a message left without a parent whose subject is
//     "Re: X" (any number of Re:/Aw:/Sv: prefixes) is linked to the message
//     whose subject is exactly X (white space collapsed, case kept) when
//     exactly one message in the thread has that subject. public-inbox
//     groups a thread the same way, so lore's t.mbox.gz contains such
//     messages. An orphan re-attached this way stays in Orphans (its
//     referenced parent is still missing) but leaves Roots; a note says so.
//
// A link that would close a cycle is not made. Messages, Roots, Orphans and
// Children are ordered by Date, then Message-ID.
func NewThread(msgs []*Message, source string) *Thread {
	t, _ := NewThreadContext(context.Background(), msgs, source)
	return t
}

// NewThreadContext is NewThread that stops when ctx is done (a client that
// left, a signal): a fail.Infra error wrapping ctx.Err(), no thread.
func NewThreadContext(ctx context.Context, msgs []*Message, source string) (*Thread, error) {
	th := &threading{ctx: ctx, total: len(msgs), t: &Thread{
		Source:   source,
		byID:     make(map[string]*Message, len(msgs)),
		parent:   make(map[string]string, len(msgs)),
		children: make(map[string][]*Message),
	}}
	t := th.t
	if err := th.dedupe(msgs); err != nil {
		return nil, err
	}
	sortByDate(t.Messages)
	th.trees = newForest(t.Messages)
	if err := th.linkByReferences(); err != nil {
		return nil, err
	}
	th.linkBySubject()
	th.listRoots()
	if err := th.stop(0, "ordering"); err != nil {
		return nil, err
	}
	t.number(th.trees.idx)
	return t, nil
}

// threading is the state of one NewThreadContext, filled step by step.
type threading struct {
	ctx   context.Context
	total int // messages given
	t     *Thread

	// trees are the trees linked so far: making p the parent of m
	// closes a loop exactly when p is in m's tree (m never has a parent
	// yet when it is asked: each message is linked once, in the first
	// pass or, still without a parent, by subject, so m is the root of
	// its tree). A union-find answers that in near constant time
	// (walking p's ancestors made a reply chain of n messages cost n^2).
	trees    *forest
	unlinked []*Message      // left without a parent by References
	orphan   map[string]bool // replies to a message not in the thread
}

// stop is a fail.Infra error when ctx is done, asked every 256
// messages.
func (th *threading) stop(i int, what string) error {
	if i%256 != 0 || th.ctx.Err() == nil {
		return nil
	}
	return fail.Infra(fmt.Errorf("%s: threading stopped while %s (%d of %d messages): %w", th.t.Source, what, i, th.total, th.ctx.Err()))
}

// wouldCycle reports whether making p the parent of m closes a loop.
func (th *threading) wouldCycle(m, p string) bool { return th.trees.same(m, p) }

// link makes p the parent of m.
func (th *threading) link(m, p string) {
	th.t.parent[m] = p
	th.trees.union(m, p)
}

// dedupe keeps the first copy of each Message-ID (with a note, louder
// when the copies differ).
func (th *threading) dedupe(msgs []*Message) error {
	t := th.t
	for i, m := range msgs {
		if err := th.stop(i, "deduplicating"); err != nil {
			return err
		}
		if m == nil {
			continue
		}
		if old, ok := t.byID[m.MessageID]; ok {
			t.Duplicates++
			if strings.TrimSpace(old.Body) != strings.TrimSpace(m.Body) || old.Subject != m.Subject {
				// Not the same mail received twice: say so, the
				// dropped copy may be the one meant.
				t.Notes = append(t.Notes, fmt.Sprintf("duplicate %s with a DIFFERENT subject or body: kept the first copy (%s, %q), dropped %s (%q); if the dropped one is meant, remove the other from the input", dupName(m), old.Source, clip(old.Subject, 60), m.Source, clip(m.Subject, 60)))
				continue
			}
			t.Notes = append(t.Notes, fmt.Sprintf("duplicate %s: kept the copy from %s, dropped the one from %s", dupName(m), old.Source, m.Source))
			continue
		}
		t.byID[m.MessageID] = m
		t.Messages = append(t.Messages, m)
	}
	return nil
}

// linkByReferences links each message to its In-Reply-To, else to the
// last message of its reference chain in the thread (rules 1 to 3);
// those left without a parent are unlinked, and orphans when the chain
// is not empty.
func (th *threading) linkByReferences() error {
	t := th.t
	th.orphan = map[string]bool{}
	for i, m := range t.Messages {
		if err := th.stop(i, "linking"); err != nil {
			return err
		}
		chain := refChain(m)
		linked := false
		if irt := m.InReplyTo; irt != "" && irt != m.MessageID && t.byID[irt] != nil && !th.wouldCycle(m.MessageID, irt) {
			th.link(m.MessageID, irt)
			continue
		}
		for i := len(chain) - 1; i >= 0; i-- {
			p := chain[i]
			if _, ok := t.byID[p]; !ok || th.wouldCycle(m.MessageID, p) {
				continue
			}
			th.link(m.MessageID, p)
			linked = true
			if w := wantedParent(m, chain); w != p {
				t.Notes = append(t.Notes, fmt.Sprintf("%s: parent <%s> is missing; linked to ancestor %s", m.Ref(), w, t.byID[p].Ref()))
			}
			break
		}
		if !linked {
			if len(chain) > 0 {
				th.orphan[m.MessageID] = true
				t.Orphans = append(t.Orphans, m)
			}
			th.unlinked = append(th.unlinked, m)
		}
	}
	return nil
}

// linkBySubject links an unlinked "Re: X" to the one message whose
// subject is X (rule 4).
func (th *threading) linkBySubject() {
	t := th.t
	bySubject := map[string][]*Message{}
	for _, m := range t.Messages {
		s := collapseSpace(m.Subject)
		bySubject[s] = append(bySubject[s], m)
	}
	for _, m := range th.unlinked {
		base, isReply := stripReply(m.Subject)
		if !isReply {
			continue
		}
		cands := bySubject[base]
		if len(cands) != 1 || cands[0] == m || th.wouldCycle(m.MessageID, cands[0].MessageID) {
			continue
		}
		p := cands[0]
		th.link(m.MessageID, p.MessageID)
		if th.orphan[m.MessageID] {
			t.Notes = append(t.Notes, fmt.Sprintf("orphan %s (its parent <%s> is missing) linked by subject to %s", m.Ref(), wantedParent(m, refChain(m)), p.Ref()))
		} else {
			t.Notes = append(t.Notes, fmt.Sprintf("%s has no References; linked by subject %q to %s", m.Ref(), base, p.Ref()))
		}
	}
}

// listRoots lists each message among its parent's children or the
// roots, and notes the orphans still without a parent.
func (th *threading) listRoots() {
	t := th.t
	for _, m := range t.Messages {
		if p, ok := t.parent[m.MessageID]; ok {
			t.children[p] = append(t.children[p], m)
		} else {
			t.Roots = append(t.Roots, m)
		}
	}
	for _, m := range t.Orphans {
		if _, ok := t.parent[m.MessageID]; !ok {
			t.Notes = append(t.Notes, fmt.Sprintf("orphan %s %q: replies to <%s>, which is not in the thread", m.Ref(), m.Subject, wantedParent(m, refChain(m))))
		}
	}
}

// number gives every message its depth-first entry and exit number (an
// iterative walk: a reply chain may be 100k deep), so that IsAncestor is
// two comparisons.
func (t *Thread) number(idx map[string]int32) {
	t.idx = idx
	t.enter = make([]int32, len(t.Messages))
	t.exit = make([]int32, len(t.Messages))
	var clock int32
	type frame struct {
		m    *Message
		next int
	}
	var stack []frame
	for _, r := range t.Roots {
		t.enter[idx[r.MessageID]] = clock
		clock++
		stack = append(stack[:0], frame{m: r})
		for len(stack) > 0 {
			f := &stack[len(stack)-1]
			kids := t.children[f.m.MessageID]
			if f.next < len(kids) {
				c := kids[f.next]
				f.next++
				t.enter[idx[c.MessageID]] = clock
				clock++
				stack = append(stack, frame{m: c})
				continue
			}
			t.exit[idx[f.m.MessageID]] = clock
			clock++
			stack = stack[:len(stack)-1]
		}
	}
}

// IsAncestor reports whether a is a (strict) ancestor of m: m replies to
// a, directly or further down. It costs two map lookups however deep the
// thread.
func (t *Thread) IsAncestor(a, m *Message) bool {
	if a == nil || m == nil || a == m || t.byID[a.MessageID] != a || t.byID[m.MessageID] != m {
		return false
	}
	ia, im := t.idx[a.MessageID], t.idx[m.MessageID]
	return t.enter[ia] < t.enter[im] && t.exit[im] < t.exit[ia]
}

// forest is a union-find over the reply trees of a thread's messages
// (union by size, path halving): same says whether two messages are in
// one tree.
type forest struct {
	idx  map[string]int32
	up   []int32
	size []int32
}

func newForest(ms []*Message) *forest {
	f := &forest{idx: make(map[string]int32, len(ms)), up: make([]int32, len(ms)), size: make([]int32, len(ms))}
	for i, m := range ms {
		f.idx[m.MessageID] = int32(i)
		f.up[i] = int32(i)
		f.size[i] = 1
	}
	return f
}

func (f *forest) find(x int32) int32 {
	for f.up[x] != x {
		f.up[x] = f.up[f.up[x]]
		x = f.up[x]
	}
	return x
}

// same reports whether messages a and b (both in the thread) share a tree.
func (f *forest) same(a, b string) bool {
	return f.find(f.idx[a]) == f.find(f.idx[b])
}

func (f *forest) union(a, b string) {
	ra, rb := f.find(f.idx[a]), f.find(f.idx[b])
	if ra == rb {
		return
	}
	if f.size[ra] < f.size[rb] {
		ra, rb = rb, ra
	}
	f.up[rb] = ra
	f.size[ra] += f.size[rb]
}

// dupName names a dropped duplicate: its Message-ID, or for a message
// without one, that it was the same mail (same synthetic id = same bytes).
func dupName(m *Message) string {
	if m.NoMessageID {
		return "message without Message-ID (the same mail twice)"
	}
	return "Message-ID <" + m.MessageID + ">"
}

// wantedParent is the message m answers: its In-Reply-To, else the last
// entry of its reference chain.
func wantedParent(m *Message, chain []string) string {
	if m.InReplyTo != "" && m.InReplyTo != m.MessageID {
		return m.InReplyTo
	}
	if len(chain) == 0 {
		return ""
	}
	return chain[len(chain)-1]
}

// refChain is References then In-Reply-To, without repeats or self.
func refChain(m *Message) []string {
	out := make([]string, 0, len(m.References)+1)
	var seen map[string]bool // only for long chains; short ones are scanned
	if len(m.References) > 16 {
		seen = make(map[string]bool, len(m.References)+2)
	}
	add := func(id string) {
		if id == "" || id == m.MessageID {
			return
		}
		if seen != nil {
			if seen[id] {
				return
			}
			seen[id] = true
		} else {
			for _, o := range out {
				if o == id {
					return
				}
			}
		}
		out = append(out, id)
	}
	for _, r := range m.References {
		add(r)
	}
	add(m.InReplyTo)
	return out
}

var replyRE = lazyre.New(`(?i)^\s*(re|aw|sv|antw|vs)(\[\d+\]|\(\d+\))?\s*:\s*`)

// stripReply removes leading reply prefixes ("Re: ", "RE: Re: ", "AW: ").
func stripReply(s string) (string, bool) {
	s = collapseSpace(s)
	found := false
	for {
		loc := replyRE.FindStringIndex(s)
		if loc == nil {
			return s, found
		}
		s = s[loc[1]:]
		found = true
	}
}

func sortByDate(ms []*Message) {
	sort.SliceStable(ms, func(i, j int) bool {
		a, b := ms[i], ms[j]
		if !a.Date.Equal(b.Date) {
			return a.Date.Before(b.Date)
		}
		return strings.Compare(a.MessageID, b.MessageID) < 0
	})
}

// ThreadOf picks the thread of the message id out of t, which may hold
// several unrelated threads (an mbox file with many conversations): the
// messages connected to it through Message-ID, In-Reply-To and References
// (also through a referenced message that is not in the mailbox) or by a
// subject link NewThread made, like b4's strict thread for `b4 am -m FILE
// MSGID`. The result is a new Thread (linked again); its Notes say how many
// messages of the mailbox were left out. An id that is not in t is a
// fail.Input error naming the source.
func (t *Thread) ThreadOf(id string) (*Thread, error) {
	id = trimID(id)
	if t.byID[id] == nil {
		return nil, fail.Inputf("%s: no message <%s> in it (%d messages)", t.Source, id, len(t.Messages))
	}
	uf := map[string]string{}
	var find func(string) string
	find = func(x string) string {
		for {
			p, ok := uf[x]
			if !ok || p == x {
				return x
			}
			if gp, ok := uf[p]; ok {
				uf[x] = gp
			}
			x = p
		}
	}
	union := func(a, b string) {
		if a == "" || b == "" {
			return
		}
		ra, rb := find(a), find(b)
		if ra != rb {
			uf[ra] = rb
		}
	}
	for _, m := range t.Messages {
		for _, r := range m.References {
			union(m.MessageID, r)
		}
		union(m.MessageID, m.InReplyTo)
		if p, ok := t.parent[m.MessageID]; ok {
			union(m.MessageID, p)
		}
	}
	root := find(id)
	var keep []*Message
	for _, m := range t.Messages {
		if find(m.MessageID) == root {
			keep = append(keep, m)
		}
	}
	nt := NewThread(keep, t.Source)
	nt.Duplicates += t.Duplicates
	if left := len(t.Messages) - len(keep); left > 0 {
		nt.Notes = append(nt.Notes, fmt.Sprintf("%s holds %d messages; took the %d of the thread of <%s>, left out %d of other threads", t.Source, len(t.Messages), len(keep), id, left))
	}
	return nt, nil
}
