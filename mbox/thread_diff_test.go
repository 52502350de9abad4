package mbox

import (
	"fmt"
	"math/rand"
	"reflect"
	"strings"
	"testing"
	"time"
)

// TestThreadDifferential links random reply graphs (cycles, self
// references, missing parents, duplicates, subject fallbacks, equal dates)
// with NewThread and with the quadratic linker it replaced (kept below as
// the reference) and wants the same tree, roots, orphans and notes.
func TestThreadDifferential(t *testing.T) {
	rng := rand.New(rand.NewSource(35))
	for round := 0; round < 3000; round++ {
		ms := randomGraph(rng)
		got, want := NewThread(ms, "rand"), newThreadQuadratic(ms, "rand")
		if g, w := threadShape(got), threadShape(want); !reflect.DeepEqual(g, w) {
			t.Fatalf("round %d: linked differently\n got %v\nwant %v", round, g, w)
		}
		// IsAncestor agrees with walking the parents.
		for _, m := range got.Messages {
			anc := map[*Message]bool{}
			for _, a := range got.Ancestors(m) {
				anc[a] = true
			}
			for _, a := range got.Messages {
				if got.IsAncestor(a, m) != anc[a] {
					t.Fatalf("round %d: IsAncestor(%s, %s) = %v, the parents say %v", round, a.MessageID, m.MessageID, !anc[a], anc[a])
				}
			}
		}
	}
}

func randomGraph(rng *rand.Rand) []*Message {
	n := 1 + rng.Intn(40)
	pool := n + rng.Intn(10) // ids beyond n are referenced but missing
	id := func(i int) string { return fmt.Sprintf("m%d@x", i) }
	subjects := []string{"[PATCH] a", "[PATCH] b", "Re: [PATCH] a", "RE: Re: [PATCH] b", "c", "Re: c", "Aw: d", "d"}
	base := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	var ms []*Message
	for i := 0; i < n; i++ {
		m := &Message{
			MessageID: id(i),
			Subject:   subjects[rng.Intn(len(subjects))],
			Date:      base.Add(time.Duration(rng.Intn(n)) * time.Minute),
			Body:      "body",
			Source:    fmt.Sprintf("rand:%d", i),
		}
		if rng.Intn(5) > 0 {
			m.InReplyTo = id(rng.Intn(pool))
		}
		for k := rng.Intn(4); k > 0; k-- {
			m.References = append(m.References, id(rng.Intn(pool)))
		}
		ms = append(ms, m)
		if rng.Intn(8) == 0 { // a duplicate, sometimes different
			d := *m
			d.Source += "-dup"
			if rng.Intn(2) == 0 {
				d.Body = "other"
			}
			ms = append(ms, &d)
		}
	}
	rng.Shuffle(len(ms), func(i, j int) { ms[i], ms[j] = ms[j], ms[i] })
	return ms
}

func threadShape(t *Thread) []string {
	ids := func(ms []*Message) string {
		s := ""
		for _, m := range ms {
			s += m.MessageID + " "
		}
		return s
	}
	out := []string{"messages " + ids(t.Messages), "roots " + ids(t.Roots), "orphans " + ids(t.Orphans), fmt.Sprint("dups ", t.Duplicates)}
	out = append(out, t.Notes...)
	for _, m := range t.Messages {
		p := "-"
		if pm := t.Parent(m); pm != nil {
			p = pm.MessageID
		}
		out = append(out, m.MessageID+" <- "+p+" children "+ids(t.Children(m)))
	}
	return out
}

// newThreadQuadratic is NewThread as it was before the union-find (commit
// 5bfa7b2): the reference for TestThreadDifferential.
func newThreadQuadratic(msgs []*Message, source string) *Thread {
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
		if irt := m.InReplyTo; irt != "" && irt != m.MessageID && t.byID[irt] != nil && !wouldCycle(m.MessageID, irt) {
			t.parent[m.MessageID] = irt
			continue
		}
		for i := len(chain) - 1; i >= 0; i-- {
			p := chain[i]
			if _, ok := t.byID[p]; !ok || wouldCycle(m.MessageID, p) {
				continue
			}
			t.parent[m.MessageID] = p
			linked = true
			if w := wantedParent(m, chain); w != p {
				t.Notes = append(t.Notes, fmt.Sprintf("%s: parent <%s> is missing; linked to ancestor %s", m.Ref(), w, t.byID[p].Ref()))
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
			t.Notes = append(t.Notes, fmt.Sprintf("orphan %s (its parent <%s> is missing) linked by subject to %s", m.Ref(), wantedParent(m, refChain(m)), p.Ref()))
		} else {
			t.Notes = append(t.Notes, fmt.Sprintf("%s has no References; linked by subject %q to %s", m.Ref(), base, p.Ref()))
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
			t.Notes = append(t.Notes, fmt.Sprintf("orphan %s %q: replies to <%s>, which is not in the thread", m.Ref(), m.Subject, wantedParent(m, refChain(m))))
		}
	}
	return t
}
