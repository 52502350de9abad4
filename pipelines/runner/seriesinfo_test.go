package runner

import (
	"os"
	"testing"

	"github.com/patcheval/patcheval/internal/testenv"
	"github.com/patcheval/patcheval/mbox"
	"github.com/patcheval/patcheval/series"
)

// The report names the series by its cover letter (else first patch) and
// links into the lore base the thread came from.
func TestSeriesInfo(t *testing.T) {
	msgs, err := mbox.ParseBytes(mustRead(t, testenv.BackportMbox()), "backport.mbox")
	if err != nil || len(msgs) != 2 {
		t.Fatalf("%d messages, %v", len(msgs), err)
	}
	s := &series.Series{Title: "powerpc: Enable dynamic preemption", Version: 4,
		Author: mbox.Address{Name: "Kernel Tester", Email: "tester@example.org"}, Cover: msgs[0],
		Patches: []*series.Patch{{Msg: msgs[1], Diff: "diff --git a/x b/x\n"}}}
	si := seriesInfo(s, "https://lore.kernel.org/all/")
	if si.MessageID != msgs[0].MessageID || si.Link != "https://lore.kernel.org/all/"+msgs[0].MessageID+"/" ||
		si.Patches != 1 || si.Subject != msgs[0].Subject || len(si.PatchHashes) != 1 || si.PatchHashes[0] != "1a059963bbf3198857755a48c741d351e21515186ce951464b89a0de0797c081" {
		t.Errorf("%+v", si)
	}
	if n := seriesInfo(nil, ""); n.Title != "" || n.Patches != 0 {
		t.Error("nil series")
	}
	// A cover letter without Message-ID: no id, no (dead) lore link.
	noID := *msgs[0]
	noID.NoMessageID = true
	s.Cover = &noID
	if si := seriesInfo(s, "https://lore.kernel.org/all/"); si.MessageID != "" || si.Link != "" {
		t.Errorf("no Message-ID: %+v", si)
	}
	// Another public-inbox than lore (--lore): the link follows it.
	s.Cover = msgs[0]
	if si := seriesInfo(s, "https://inbox.example.org/all/"); si.Link != "https://inbox.example.org/all/"+msgs[0].MessageID+"/" {
		t.Errorf("link into another inbox: %q", si.Link)
	}
}

func mustRead(t *testing.T, p string) []byte {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
