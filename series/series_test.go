package series

import (
	"testing"

	"github.com/patcheval/patcheval/mbox"
)

// First is the cover letter, else the first patch, else nil.
func TestFirst(t *testing.T) {
	cover, p1 := &mbox.Message{MessageID: "cover@x"}, &mbox.Message{MessageID: "p1@x"}
	for _, c := range []struct {
		s    *Series
		want *mbox.Message
	}{
		{&Series{Cover: cover, Patches: []*Patch{{Msg: p1}}}, cover},
		{&Series{Patches: []*Patch{{Msg: p1}}}, p1},
		{&Series{Patches: []*Patch{nil}}, nil},
		{&Series{}, nil},
		{nil, nil},
	} {
		if got := c.s.First(); got != c.want {
			t.Errorf("%+v: First() = %v, want %v", c.s, got, c.want)
		}
	}
	if got := (&Series{Patches: []*Patch{nil}}).Slug(); got != "undefined" {
		t.Errorf("Slug without a message = %q", got)
	}
}
