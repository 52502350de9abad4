package runner

import (
	"os"
	"testing"

	"github.com/patcheval/patcheval/evaluate/report"
	"github.com/patcheval/patcheval/internal/testenv"
	"github.com/patcheval/patcheval/mbox"
	"github.com/patcheval/patcheval/mbox/numbers"
	"github.com/patcheval/patcheval/pipelines"
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

// The report's link follows the lore the evaluation names in any of its
// forms: a follower's list URL links into that list, an all index into
// itself (not ".../linuxppc-dev/all/" or ".../all/all/").
func TestReportLinkFollowsLoreForm(t *testing.T) {
	data := mustRead(t, testenv.BackportMbox())
	msgs, _ := mbox.ParseBytes(data, "backport.mbox")
	s, err := series.Resolve(mbox.NewThread(msgs, "backport.mbox"), series.Options{})
	if err != nil {
		t.Fatal(err)
	}
	id := s.First().MessageID
	for lore, want := range map[string]string{
		"https://lore.kernel.org/linuxppc-dev":               "https://lore.kernel.org/linuxppc-dev/",
		"https://lore.kernel.org/all/":                       "https://lore.kernel.org/all/",
		"http://127.0.0.1:8080/lists/test":                   "http://127.0.0.1:8080/lists/test/",
		"https://lore.kernel.org/linuxppc-dev/" + id + "/T/": "https://lore.kernel.org/linuxppc-dev/",
	} {
		ev := &evaluation{id: 1, p: &pipelines.Pipeline{Name: "t"}, in: inputs{Options: Options{Mbox: data, Lore: lore}}, series: s}
		r, err := buildReport(ev, report.TreeInfo{}, nil, nil, nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		if r.Series.Link != want+id+"/" {
			t.Errorf("lore %s: link %q, want %q", lore, r.Series.Link, want+id+"/")
		}
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

// The report carries the numbers the thread reports (mbox/numbers), for
// the renderers to set beside the comparisons.
func TestReportThreadNumbers(t *testing.T) {
	path := testenv.ThreadsDir() + "/ppc-dynamic-preempt-v4.mbox"
	data := mustRead(t, path)
	msgs, err := mbox.ParseBytes(data, path)
	if err != nil {
		t.Fatal(err)
	}
	s, err := series.Resolve(mbox.NewThread(msgs, path), series.Options{})
	if err != nil {
		t.Fatal(err)
	}
	ev := &evaluation{id: 1, p: &pipelines.Pipeline{Name: "t"}, in: inputs{Options: Options{Mbox: data, ThreadSource: path}}, series: s}
	r, err := buildReport(ev, report.TreeInfo{}, nil, nil, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, n := range r.Thread {
		found = found || n.Label == "6.16 (eln150)" && n.Change != nil && *n.Change == -32 && n.Benchmark == "kill"
	}
	if len(r.Thread) != 30 || !found {
		t.Errorf("%d thread numbers, 6.16 row found: %v", len(r.Thread), found)
	}
	// The backport thread reports none: nothing is added.
	data = mustRead(t, testenv.BackportMbox())
	msgs, _ = mbox.ParseBytes(data, "backport.mbox")
	if ev.series, err = series.Resolve(mbox.NewThread(msgs, "backport.mbox"), series.Options{}); err != nil {
		t.Fatal(err)
	}
	ev.in = inputs{Options: Options{Mbox: data}}
	if r, err = buildReport(ev, report.TreeInfo{}, nil, nil, nil, nil); err != nil || r.Thread != nil {
		t.Errorf("backport: %v, %d numbers", err, len(r.Thread))
	}
	// The upstream thread's numbers given with the backport (lore
	// --thread-numbers) are the report's, after the thread's own.
	v4 := threadNumbersOf(t, path)
	ev.in = inputs{Options: Options{Mbox: data, ThreadNumbers: v4}}
	if r, err = buildReport(ev, report.TreeInfo{}, nil, nil, nil, nil); err != nil || len(r.Thread) != len(v4) || r.Thread[0].MessageID != v4[0].MessageID {
		t.Errorf("backport with the v4 thread's numbers: %v, %d numbers, want %d", err, len(r.Thread), len(v4))
	}
}

// threadNumbersOf reads the numbers of the mbox at path.
func threadNumbersOf(t *testing.T, path string) []numbers.Number {
	t.Helper()
	msgs, err := mbox.ParseBytes(mustRead(t, path), path)
	if err != nil {
		t.Fatal(err)
	}
	return numbers.Read(mbox.NewThread(msgs, path))
}
