package series

import (
	"reflect"
	"regexp"
	"strings"
	"testing"
)

func TestParseSubject(t *testing.T) {
	cases := []struct {
		in   string
		want Subject
	}{
		{"[PATCH v4 1/1] powerpc: enable dynamic preemption",
			Subject{IsPatch: true, Version: 4, Index: 1, Total: 1, HasCounter: true, Title: "powerpc: enable dynamic preemption"}},
		{"[PATCH 6.1 v4 0/1] powerpc: Enable dynamic preemption (v6.1 backport)",
			Subject{Prefixes: []string{"6.1"}, IsPatch: true, Version: 4, Index: 0, Total: 1, HasCounter: true, Title: "powerpc: Enable dynamic preemption (v6.1 backport)"}},
		{"[PATCH net-next v3 0/4] net: a series",
			Subject{Prefixes: []string{"net-next"}, IsPatch: true, Version: 3, Index: 0, Total: 4, HasCounter: true, Title: "net: a series"}},
		{"[RFC PATCH v2 3/8] mm: thing",
			Subject{Prefixes: []string{"RFC"}, IsPatch: true, RFC: true, Version: 2, Index: 3, Total: 8, HasCounter: true, Title: "mm: thing"}},
		{"[PATCHv3] rcu: Reduce latency",
			Subject{IsPatch: true, Version: 3, Total: 1, Title: "rcu: Reduce latency"}},
		{"[PATCH RESEND] x86: foo",
			Subject{Prefixes: []string{"RESEND"}, IsPatch: true, Resend: true, Version: 1, Total: 1, Title: "x86: foo"}},
		{"[Patch 2/2]: sched: bar",
			Subject{IsPatch: true, Version: 1, Index: 2, Total: 2, HasCounter: true, Title: "sched: bar"}},
		{"[PATCH 0 of 2] intro",
			Subject{IsPatch: true, Version: 1, Index: 0, Total: 2, HasCounter: true, Title: "intro"}},
		{"[PATCH v2 6/5] extra patch",
			Subject{IsPatch: true, Version: 2, Index: 6, Total: 6, HasCounter: true, Title: "extra patch"}},
		{"Re: [PATCH v4 1/1] powerpc: enable dynamic preemption",
			Subject{IsReply: true, IsPatch: true, Version: 4, Index: 1, Total: 1, HasCounter: true, Title: "powerpc: enable dynamic preemption"}},
		{"AW: Re: [PATCH v5 0/8] Generic IRQ entry",
			Subject{IsReply: true, IsPatch: true, Version: 5, Index: 0, Total: 8, HasCounter: true, Title: "Generic IRQ entry"}},
		{"Fwd: [PATCH] a",
			Subject{IsReply: true, IsPatch: true, Version: 1, Total: 1, Title: "a"}},
		{"[PATCH [net] v2 1/3] nested",
			Subject{Prefixes: []string{"net"}, IsPatch: true, Version: 2, Index: 1, Total: 3, HasCounter: true, Title: "nested"}},
		{"[PATCH] [v2] [2/3] separate groups",
			Subject{IsPatch: true, Version: 2, Index: 2, Total: 3, HasCounter: true, Title: "separate groups"}},
		{"just a title", Subject{Version: 1, Total: 1, Title: "just a title"}},
		{"[PATCH   v2\t 1/2]   spaces   collapse", Subject{IsPatch: true, Version: 2, Index: 1, Total: 2, HasCounter: true, Title: "spaces collapse"}},
		{"[PATCH,v2,1/2] commas", Subject{IsPatch: true, Version: 2, Index: 1, Total: 2, HasCounter: true, Title: "commas"}},
		{"[PATCH V3 01/10] zero padded", Subject{IsPatch: true, Version: 3, Index: 1, Total: 10, HasCounter: true, Title: "zero padded"}},
		{"[PATCH", Subject{Version: 1, Total: 1, Title: "[PATCH"}},
	}
	hasV := regexp.MustCompile(`(?i)[\[ ,]v\d|patchv\d`)
	for _, c := range cases {
		got := ParseSubject(c.in)
		c.want.HasVersion = hasV.MatchString(c.in)
		if !reflect.DeepEqual(got, c.want) {
			t.Errorf("ParseSubject(%q)\n got %+v\nwant %+v", c.in, got, c.want)
		}
	}
}

func TestAMSubject(t *testing.T) {
	for in, want := range map[string]string{
		"[PATCH 6.1 v4 1/1] powerpc: x": "[PATCH v4 1/1] powerpc: x",
		"[RFC PATCH v2 3/8] mm: y":      "[PATCH RFC v2 3/8] mm: y",
		"[PATCH] z":                     "[PATCH] z",
		"[PATCH RESEND 2/2] w":          "[PATCH 2/2] w",
	} {
		if got := ParseSubject(in).AMSubject(); got != want {
			t.Errorf("AMSubject(%q) = %q, want %q", in, got, want)
		}
	}
}

func FuzzParseSubject(f *testing.F) {
	for _, s := range []string{"[PATCH v4 1/1] a", "[PATCH 6.1 v4 0/1] b", "Re: Aw: [RFC PATCH v2 3/8] c",
		"[PATCHv3] d", "[PATCH 0 of 2] e", "[[[x]]]] f", "[PATCH 9999/1]", "Re:", "[", "]"} {
		f.Add(s)
	}
	_, subjects := realMailBodies(f)
	for _, s := range subjects {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		sub := ParseSubject(s)
		if sub.Version < 1 || sub.Total < 1 || sub.Index < 0 || sub.Index > sub.Total {
			t.Fatalf("ParseSubject(%q) = %+v: bad numbers", s, sub)
		}
		if len(sub.Title) > len(s) {
			t.Fatalf("title longer than subject: %q -> %q", s, sub.Title)
		}
		if sub.Title != strings.TrimSpace(sub.Title) && strings.TrimSpace(sub.Title) != "" {
			// titles are trimmed
			t.Fatalf("untrimmed title %q", sub.Title)
		}
		// Parsing is deterministic.
		if !reflect.DeepEqual(sub, ParseSubject(s)) {
			t.Fatal("not deterministic")
		}
	})
}
