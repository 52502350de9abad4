package mbox

import (
	"fmt"
	"regexp"
	"sort"
	"strings"
)

// NewThread deduplicates msgs and links them into a reply tree.
//
// Deduplication: of several messages with one Message-ID the first in
// input order is kept (lore serves the same mail received through several
// lists); Thread.Duplicates counts the others.
//
// Linking, for each message M (the rule public-inbox applies):
//
//  1. The reference chain of M is its References header followed by its
//     In-Reply-To, in that order, repeated IDs and M's own ID removed. The
//     parent is the LAST message of the chain that is present in the
//     thread. So In-Reply-To decides when References stops short (some
//     clients put only the thread root in References), and a reply whose
//     direct parent is missing hangs under its nearest present ancestor
//     (with a note).
//  2. When no message of the chain is present, M is an orphan if the chain
//     is not empty (it replies to something missing): it is kept, listed in
//     Orphans and in Roots.
//  3. Subject fallback: a message left without a parent whose subject is
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
	t := &Thread{
		Source:   source,
		byID:     make(map[string]*Message, len(msgs)),
		parent:   make(map[string]string, len(msgs)),
		children: make(map[string][]*Message),
	}
	for _, m := range msgs {
		if m == nil {
			continue
		}
		if old, ok := t.byID[m.MessageID]; ok {
			t.Duplicates++
			t.Notes = append(t.Notes, fmt.Sprintf("duplicate Message-ID <%s>: kept the copy from %s, dropped the one from %s", m.MessageID, old.Source, m.Source))
			continue
		}
		t.byID[m.MessageID] = m
		t.Messages = append(t.Messages, m)
	}
	sortByDate(t.Messages)

	// wouldCycle reports whether making p the parent of m closes a loop.
	wouldCycle := func(m, p string) bool {
		for i, cur := 0, p; i <= len(t.Messages); i++ {
			if cur == m {
				return true
			}
			next, ok := t.parent[cur]
			if !ok {
				return false
			}
			cur = next
		}
		return true
	}

	var unlinked []*Message
	orphan := map[string]bool{}
	for _, m := range t.Messages {
		chain := refChain(m)
		linked := false
		for i := len(chain) - 1; i >= 0; i-- {
			p := chain[i]
			if _, ok := t.byID[p]; !ok || wouldCycle(m.MessageID, p) {
				continue
			}
			t.parent[m.MessageID] = p
			linked = true
			if i != len(chain)-1 {
				t.Notes = append(t.Notes, fmt.Sprintf("<%s>: parent <%s> is missing; linked to ancestor <%s>", m.MessageID, chain[len(chain)-1], p))
			}
			break
		}
		if !linked {
			if len(chain) > 0 {
				orphan[m.MessageID] = true
				t.Orphans = append(t.Orphans, m)
			}
			unlinked = append(unlinked, m)
		}
	}

	// Subject fallback.
	bySubject := map[string][]*Message{}
	for _, m := range t.Messages {
		s := collapseSpace(m.Subject)
		bySubject[s] = append(bySubject[s], m)
	}
	for _, m := range unlinked {
		base, isReply := stripReply(m.Subject)
		if !isReply {
			continue
		}
		cands := bySubject[base]
		if len(cands) != 1 || cands[0] == m || wouldCycle(m.MessageID, cands[0].MessageID) {
			continue
		}
		p := cands[0]
		t.parent[m.MessageID] = p.MessageID
		if orphan[m.MessageID] {
			t.Notes = append(t.Notes, fmt.Sprintf("orphan <%s> (its parent <%s> is missing) linked by subject to <%s>", m.MessageID, refChain(m)[len(refChain(m))-1], p.MessageID))
		} else {
			t.Notes = append(t.Notes, fmt.Sprintf("<%s> has no References; linked by subject %q to <%s>", m.MessageID, base, p.MessageID))
		}
	}

	for _, m := range t.Messages {
		if p, ok := t.parent[m.MessageID]; ok {
			t.children[p] = append(t.children[p], m)
		} else {
			t.Roots = append(t.Roots, m)
		}
	}
	for _, m := range t.Orphans {
		if _, ok := t.parent[m.MessageID]; !ok {
			c := refChain(m)
			t.Notes = append(t.Notes, fmt.Sprintf("orphan <%s> %q: replies to <%s>, which is not in the thread", m.MessageID, m.Subject, c[len(c)-1]))
		}
	}
	return t
}

// refChain is References then In-Reply-To, without repeats or self.
func refChain(m *Message) []string {
	seen := map[string]bool{m.MessageID: true}
	var out []string
	add := func(id string) {
		if id == "" || seen[id] {
			return
		}
		seen[id] = true
		out = append(out, id)
	}
	for _, r := range m.References {
		add(r)
	}
	add(m.InReplyTo)
	return out
}

var replyRE = regexp.MustCompile(`(?i)^\s*(re|aw|sv|antw|vs)(\[\d+\]|\(\d+\))?\s*:\s*`)

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
