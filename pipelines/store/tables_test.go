package store

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/patcheval/patcheval/internal/fail"
)

// TestTablesOnBothDatabases runs the watches', posts' and follower's
// statements (upserts that add to the stored row, NULL-able references,
// optional filters, a duplicate name) and List's title search on each
// database: the same calls give the same results.
func TestTablesOnBothDatabases(t *testing.T) {
	eachDB(t, func(t *testing.T, db string) {
		s, _ := openTemp(t, db)
		e, _, err := s.CreateOrResumeEvaluation("k", EvaluationMeta{Pipeline: "p", SeriesTitle: "powerpc: Enable Dynamic preemption", SeriesMsgID: "a@b"})
		if err != nil {
			t.Fatal(err)
		}

		// Watches: a duplicate name is bad input; tags and events dedupe.
		w, err := s.AddWatch(Watch{Name: "rc", Remote: "/r.git", Tags: "v6.*", Pipeline: "p", Schedule: "@daily", Bisect: true})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := s.AddWatch(Watch{Name: "rc", Remote: "/r.git", Tags: "v6.*", Pipeline: "p", Schedule: "@daily"}); fail.KindOf(err) != fail.KindInput {
			t.Errorf("duplicate watch: %v, want a bad-input error", err)
		}
		if got, err := s.FindWatch("rc"); err != nil || got.ID != w.ID || !got.Bisect {
			t.Errorf("FindWatch: %+v %v", got, err)
		}
		tag, added, err := s.AddWatchTag(w.ID, "v6.2", "c1", TagKnown)
		if err != nil || !added {
			t.Fatalf("AddWatchTag: %v %v", added, err)
		}
		if _, added, _ := s.AddWatchTag(w.ID, "v6.2", "c1", TagKnown); added {
			t.Error("the same tag was added twice")
		}
		if err := s.SetWatchTag(tag.ID, TagDone, "", e.ID, nil); err != nil {
			t.Fatal(err)
		}
		if err := s.SetWatchTag(tag.ID, TagDone, "", 0, errors.New("x")); err != nil {
			t.Fatal(err)
		}
		tags, err := s.WatchTags(w.ID)
		if err != nil || len(tags) != 1 || tags[0].Commit != "c1" || tags[0].EvaluationID != e.ID || tags[0].ErrorText != "x" {
			t.Errorf("tags %+v %v: the commit and evaluation must be kept when not given", tags, err)
		}
		ev := WatchEvent{WatchID: w.ID, From: "v6.1", To: "v6.2", Variant: "v", Benchmark: "kill", Metric: "ns/op", Verdict: "regression", Change: 12.3456789012345}
		if _, added, err := s.AddWatchEvent(ev); err != nil || !added {
			t.Fatalf("AddWatchEvent: %v %v", added, err)
		}
		if got, added, err := s.AddWatchEvent(ev); err != nil || added || got.Change != ev.Change {
			t.Errorf("second AddWatchEvent: %+v %v %v (a double's full precision is kept)", got, added, err)
		}

		// Posts: the second identical post is skipped.
		p := Post{Reporter: "patchwork", Target: "m@x/ctx", EvaluationID: e.ID, State: "success", Digest: "d1", Payload: "{}"}
		if got, err := s.EnqueuePost(p, false); err != nil || got.Status != PostQueued {
			t.Fatalf("EnqueuePost: %+v %v", got, err)
		}
		if got, err := s.EnqueuePost(p, false); err != nil || got.Status != PostSkipped {
			t.Errorf("second EnqueuePost: %+v %v, want skipped", got, err)
		}
		if due, err := s.DuePosts(time.Now(), 10); err != nil || len(due) != 1 {
			t.Errorf("DuePosts %d %v", len(due), err)
		}
		if ps, err := s.Posts(0, "", 10); err != nil || len(ps) != 2 {
			t.Errorf("Posts(all) %d %v", len(ps), err)
		}

		// Follower: polls add up, messages dedupe, series upsert.
		for i := 0; i < 2; i++ {
			if err := s.FollowPoll("lkml", "http://127.0.0.1/lkml", 0, "c", 3, 1, nil); err != nil {
				t.Fatal(err)
			}
		}
		if err := s.FollowPoll("lkml", "http://127.0.0.1/lkml", 0, "c", 0, 0, errors.New("down")); err != nil {
			t.Fatal(err)
		}
		if l, err := s.FollowListState("lkml"); err != nil || l.Messages != 6 || l.Skipped != 2 || l.LastOK.IsZero() || l.LastError != "down" {
			t.Errorf("list state %+v %v", l, err)
		}
		if err := s.AddFollowMessages("lkml", []FollowMessage{{MsgID: "m1", Root: "r", Raw: []byte("one")}, {MsgID: "m2", Root: "r", Raw: []byte("two")}}); err != nil {
			t.Fatal(err)
		}
		if added, err := s.AddFollowMessage("lkml", "m1", "r", []byte("one")); err != nil || added {
			t.Errorf("AddFollowMessage of a known message: %v %v", added, err)
		}
		if msgs, err := s.FollowMessages("lkml", "r"); err != nil || len(msgs) != 2 || string(msgs[1]) != "two" {
			t.Errorf("FollowMessages %q %v", msgs, err)
		}
		fs, err := s.NoteFollowSeries(FollowSeries{List: "lkml", Root: "r", Version: 2, Total: 2, Found: 1}, time.Now())
		if err != nil {
			t.Fatal(err)
		}
		if again, err := s.NoteFollowSeries(FollowSeries{List: "lkml", Root: "r", Version: 2, Total: 2, Found: 2}, time.Now()); err != nil || again.ID != fs.ID || again.Found != 2 {
			t.Errorf("second NoteFollowSeries %+v %v", again, err)
		}
		if err := s.SetFollowSeries(fs.ID, SeriesSubmitted, "", e.ID); err != nil {
			t.Fatal(err)
		}
		if l, err := s.FollowSeriesList("", SeriesSubmitted); err != nil || len(l) != 1 || l[0].EvaluationID != e.ID {
			t.Errorf("FollowSeriesList %+v %v", l, err)
		}

		// List: the title search is case-insensitive on both.
		for _, q := range []string{"dynamic PREEMPTION", "<a@b>"} {
			if got, n, err := s.List(context.Background(), ListFilter{Series: q, Limit: 5}); err != nil || n != 1 || len(got) != 1 {
				t.Errorf("List(%q): %d %d %v", q, len(got), n, err)
			}
		}
		if _, n, err := s.List(context.Background(), ListFilter{Series: "x86"}); err != nil || n != 0 {
			t.Errorf("List(x86): %d %v", n, err)
		}
		// Pages: newest first, the second page holds the older one.
		e2, _, err := s.CreateOrResumeEvaluation("k2", EvaluationMeta{Pipeline: "p", SeriesTitle: "second"})
		if err != nil {
			t.Fatal(err)
		}
		for off, want := range []int64{e2.ID, e.ID} {
			got, n, err := s.List(context.Background(), ListFilter{Pipeline: "p", Limit: 1, Offset: off})
			if err != nil || n != 2 || len(got) != 1 || got[0].ID != want {
				t.Errorf("List page at offset %d: %v of %d, %v; want evaluation %d", off, got, n, err, want)
			}
		}
	})
}
