package follow

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/patcheval/patcheval/internal/testinbox"
	"github.com/patcheval/patcheval/mbox"
	"github.com/patcheval/patcheval/pipelines/store"
	"github.com/patcheval/patcheval/series"
)

// queue is the Submitter of these tests: it creates the evaluation in the
// store in state "queued" and cancels it by marking it "cancelled", which
// is what the service's submission does before a worker takes the job
// (the stages themselves need kernels and stay out of these tests).
type queue struct {
	st *store.Store
	mu sync.Mutex
	n  int
}

func (q *queue) Submit(ctx context.Context, l List, s *series.Series, t *mbox.Thread) (int64, error) {
	q.mu.Lock()
	q.n++
	q.mu.Unlock()
	first := s.First()
	ev, _, err := q.st.CreateOrResumeEvaluation(store.Key("follow", l.Pipeline, first.MessageID, fmt.Sprint(s.Version), l.Tree),
		store.EvaluationMeta{Pipeline: l.Pipeline, SeriesMsgID: first.MessageID, SeriesTitle: s.Title, SeriesVersion: s.Version, Tree: l.Tree})
	if err != nil {
		return 0, err
	}
	return ev.ID, q.st.SetEvaluationStatus(ev.ID, "queued")
}

func (q *queue) Cancel(ctx context.Context, id int64) error {
	return q.st.SetEvaluationStatus(id, "cancelled")
}

func seriesBy(t *testing.T, st *store.Store) map[string]*store.FollowSeries {
	t.Helper()
	all, err := st.FollowSeriesList("", "")
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]*store.FollowSeries{}
	for _, s := range all {
		out[fmt.Sprintf("%s v%d", strings.SplitN(s.Root, "-", 2)[0], s.Version)] = s
	}
	return out
}

func waitFor(t *testing.T, what string, limit time.Duration, cond func() bool) time.Duration {
	t.Helper()
	start := time.Now()
	for !cond() {
		if time.Since(start) > limit {
			t.Fatalf("after %s: %s", limit, what)
		}
		time.Sleep(20 * time.Millisecond)
	}
	return time.Since(start)
}

func TestFollowerOnPublicInbox(t *testing.T) {
	g := &gen{t0: time.Now().Add(-time.Hour)}
	dir := t.TempDir()
	ppc := []string{"arch/powerpc/kernel/time.c", "arch/powerpc/include/asm/time.h"}
	seed := writeMbox(t, dir, "seed.mbox", g.series("old", "Old Timer <old@example.org>", "powerpc: old work", 1, 1, ppc, "")...)
	srv := testinbox.StartWith(t, testinbox.Options{Bulk: true, NoAll: true}, seed)
	st, err := store.Open(filepath.Join(dir, "db"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	q := &queue{st: st}
	l := List{Name: "test", URL: srv.URL + "/" + srv.Inbox, Pipeline: "selinux-tax", Paths: []string{"arch/powerpc/**"},
		Base: "tree", Quiet: 0, IncompleteAfter: 3 * time.Second, Poll: 200 * time.Millisecond}
	f := &Follower{Store: st, Lists: []List{l}, Submit: q, Dir: filepath.Join(dir, "mirrors")}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()

	// First use without a start date starts now: the old series is not
	// evaluated.
	if err := f.Poll(ctx); err != nil {
		t.Fatal(err)
	}
	if ls, _ := st.FollowListState("test"); ls.Epoch != 0 || ls.LastCommit == "" || q.n != 0 {
		t.Fatalf("after the first poll: %+v, %d submitted", ls, q.n)
	}

	done := make(chan error, 1)
	go func() { done <- f.Run(ctx) }()

	// A new powerpc series, a malformed message, a series that touches
	// x86 only and an incomplete one arrive while the follower runs.
	a1 := g.series("aaa", "Ann Dev <ann@example.org>", "powerpc/time: faster decrementer", 1, 3, ppc, "")
	x86 := g.series("xxx", "Xavier <x@example.org>", "x86/tsc: calibrate faster", 1, 2, []string{"arch/x86/kernel/tsc.c"}, "")
	inc := g.series("ccc", "Cid <c@example.org>", "powerpc/mm: half there", 1, 3, ppc, "")[:3]
	bad := []byte("From: broken\nSubject: [PATCH 1/1] no message id\nDate: yesterday\nContent-Type: multipart/mixed\n\n--\n")
	msgs := append(append(append([][]byte{}, a1...), bad), x86...)
	msgs = append(msgs, inc...)
	imported := time.Now()
	srv.Add(t, writeMbox(t, dir, "new.mbox", msgs...))
	took := waitFor(t, "aaa v1 submitted", 60*time.Second, func() bool {
		s := seriesBy(t, st)["aaa v1"]
		return s != nil && s.Status == store.SeriesSubmitted
	})
	t.Logf("aaa v1 submitted %s after the import returned (%s after it started)", took, time.Since(imported))
	waitFor(t, "xxx filtered, ccc incomplete", 30*time.Second, func() bool {
		s := seriesBy(t, st)
		return s["xxx v1"] != nil && s["xxx v1"].Status == store.SeriesFiltered &&
			s["ccc v1"] != nil && s["ccc v1"].Status == store.SeriesIncomplete
	})
	s := seriesBy(t, st)
	// The mangled message (no Message-ID, broken MIME, bad Date), which
	// public-inbox took, is no series and stopped nothing.
	if len(s) != 3 {
		t.Errorf("series: %v, want aaa v1, xxx v1, ccc v1", s)
	}
	if s["aaa v1"].Total != 3 || s["aaa v1"].Found != 3 || s["aaa v1"].EvaluationID == 0 {
		t.Errorf("aaa v1: %+v", s["aaa v1"])
	}
	ev, err := st.Evaluation(s["aaa v1"].EvaluationID)
	if err != nil || ev.Status != "queued" || ev.SeriesMsgID != "aaa-v1-0@example.org" || ev.Pipeline != "selinux-tax" {
		t.Errorf("aaa v1's evaluation: %+v, %v", ev, err)
	}
	if !strings.Contains(s["xxx v1"].Reason, "arch/powerpc/**") || s["xxx v1"].EvaluationID != 0 {
		t.Errorf("xxx v1: %+v", s["xxx v1"])
	}
	if s["ccc v1"].Found != 2 || s["ccc v1"].EvaluationID != 0 {
		t.Errorf("ccc v1: %+v", s["ccc v1"])
	}
	ls, _ := st.FollowListState("test")
	t.Logf("list state: %+v", ls)

	// v2 of the powerpc series, sent in reply to v1's cover letter.
	a2 := g.series("aaa", "Ann Dev <ann@example.org>", "powerpc/time: faster decrementer", 2, 3, ppc, "aaa-v1-0@example.org")
	a2 = append(a2, g.reply("rev1", "Rita Reviewer <rita@example.org>", "[PATCH v2 1/3] powerpc/time", "aaa-v2-1@example.org", "aaa-v1-0@example.org"))
	srv.Add(t, writeMbox(t, dir, "v2.mbox", a2...))
	waitFor(t, "aaa v2 submitted", 60*time.Second, func() bool {
		s := seriesBy(t, st)["aaa v2"]
		return s != nil && s.Status == store.SeriesSubmitted
	})
	s = seriesBy(t, st)
	if s["aaa v1"].Status != store.SeriesSuperseded || !strings.Contains(s["aaa v1"].Reason, "cancelled") {
		t.Errorf("aaa v1 after v2: %+v", s["aaa v1"])
	}
	if ev, _ := st.Evaluation(s["aaa v1"].EvaluationID); ev == nil || ev.Status != "cancelled" {
		t.Errorf("aaa v1's evaluation after v2: %+v", ev)
	}
	if ev, _ := st.Evaluation(s["aaa v2"].EvaluationID); ev == nil || ev.Status != "queued" || ev.SeriesVersion != 2 {
		t.Errorf("aaa v2's evaluation: %+v", ev)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if q.n != 2 {
		t.Errorf("%d submissions, want 2 (aaa v1, aaa v2)", q.n)
	}

	// A restart reads nothing twice.
	f2 := &Follower{Store: st, Lists: []List{l}, Submit: q, Dir: filepath.Join(dir, "mirrors")}
	if err := f2.Poll(context.Background()); err != nil {
		t.Fatal(err)
	}
	if ls2, _ := st.FollowListState("test"); ls2.Messages != ls.Messages+len(a2) || q.n != 2 {
		t.Errorf("after a restart: %+v (before %+v), %d submissions", ls2, ls, q.n)
	}
}

func TestMatchPath(t *testing.T) {
	for _, c := range []struct {
		glob, path string
		want       bool
	}{
		{"arch/powerpc/**", "arch/powerpc/kernel/time.c", true},
		{"arch/powerpc/**", "arch/powerpc", true},
		{"arch/powerpc/**", "arch/x86/kernel/tsc.c", false},
		{"**/Kconfig", "arch/powerpc/Kconfig", true},
		{"kernel/sched/*.c", "kernel/sched/core.c", true},
		{"kernel/sched/*.c", "kernel/sched/x/core.c", false},
	} {
		if got := matchPath(c.glob, c.path); got != c.want {
			t.Errorf("matchPath(%q, %q) = %v", c.glob, c.path, got)
		}
	}
}
