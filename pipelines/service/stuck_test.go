package service

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/riverqueue/river"
	"github.com/riverqueue/river/rivertype"

	"github.com/patcheval/patcheval/evaluate/report"
	"github.com/patcheval/patcheval/pipelines/store"
)

// perPatchWaiting starts a per-patch run of a series evaluation in a
// service working only the series queue (seriesQueueOnly, cfg) and
// returns the service, its evaluation and the first prefix's evaluation,
// queued as its stage jobs (which nothing works) with the run's waiter.
func perPatchWaiting(t *testing.T, cfg Config) (s *Service, id, p1 int64) {
	t.Helper()
	tr := newSeriesTree(t)
	s, stop := seriesQueueOnly(t, cfg)
	t.Cleanup(func() { stop(); s.Close() })
	id = tr.evaluated(t, s, true)
	startPerPatch(t, s, id)
	w1 := prefixWaiter(t, s.Store(), 1)
	if w1.EvaluationID != id {
		t.Fatalf("the first prefix's waiter %+v", w1)
	}
	return s, id, w1.Prefix.EvaluationID
}

// waitStatus waits until evaluation id is status.
func waitStatus(t *testing.T, s *Service, id int64, status string) {
	t.Helper()
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(50 * time.Millisecond) {
		e, err := s.Store().Evaluation(id)
		if err != nil {
			t.Fatal(err)
		}
		if e.Status == status {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("evaluation %d is %s, want %s", id, e.Status, status)
		}
	}
}

// evalJobStates are evaluation id's jobs' states by kind.
func evalJobStates(t *testing.T, s *Service, id int64) map[string][]rivertype.JobState {
	t.Helper()
	jobs, err := s.Engine().Jobs(t.Context(), id, 100)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string][]rivertype.JobState{}
	for _, j := range jobs {
		out[j.Kind] = append(out[j.Kind], j.State)
	}
	return out
}

// addWaiter registers a waiter of evaluation id whose job is args, in a
// queue this test's service does not work.
func addWaiter(t *testing.T, s *Service, id int64, args river.JobArgs) {
	t.Helper()
	w, err := newWaiter(id, args, &river.InsertOpts{Queue: QueueWatch})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.db.Store.Tx(t.Context(), func(tx *store.Tx) error {
		_, err := s.db.Store.AddWaiterTx(tx, w)
		return err
	}); err != nil {
		t.Fatal(err)
	}
}

// TestStuckEvaluationEndsItsWaiters: a prefix's evaluation whose only
// job is deleted (as riverui's delete does) is never ended by a job; the
// stuck check ends it as failed, naming why, and its waiter carries the
// per-patch run on (here: not done, the reason in the report), so the
// evaluation that waited is done. Meanwhile, while the prefix's apply
// job is queued, neither the prefix's evaluation nor the evaluation
// waiting for it (which a watch waits for, and which has no job of its
// own while its per-patch run waits) is taken for stuck.
//
// It fails without the check: the prefix's evaluation stays queued and
// the per-patch run waits for ever.
func TestStuckEvaluationEndsItsWaiters(t *testing.T) {
	onBothDatabases(t, stuckEvaluationEndsItsWaiters)
}

func stuckEvaluationEndsItsWaiters(t *testing.T, root, db string) {
	s, id, p1 := perPatchWaiting(t, Config{Database: db, CacheDir: filepath.Join(root, "cache"),
		From: testFrom, Log: testWriter{t}, Grace: 5 * time.Second, StuckCheck: 50 * time.Millisecond, StuckConfirm: 200 * time.Millisecond})
	// A watch waits for the evaluation, as for a re-test's.
	addWaiter(t, s, id, RetestedArgs{WatchID: 1, Tag: 1, EvaluationID: id, Series: true})

	// Live: many checks and confirmations later, nothing was ended.
	time.Sleep(1500 * time.Millisecond)
	for _, e := range []struct {
		id     int64
		status string
	}{{p1, StatusQueued}, {id, "running"}} {
		if got, err := s.Store().Evaluation(e.id); err != nil || got.Status != e.status {
			t.Fatalf("evaluation %d: %+v %v, want %s", e.id, got, err, e.status)
		}
	}

	jobs, err := s.Engine().Jobs(t.Context(), p1, 100)
	if err != nil || len(jobs) != 1 || jobs[0].Kind != "apply" {
		t.Fatalf("prefix evaluation %d's jobs %+v %v, want its apply job", p1, jobs, err)
	}
	if err := s.db.Store.Tx(t.Context(), func(tx *store.Tx) error {
		_, err := tx.Exec(`DELETE FROM river_job WHERE id = ?`, jobs[0].ID)
		return err
	}); err != nil {
		t.Fatal(err)
	}

	waitStatus(t, s, p1, store.StatusFailed)
	waitStatus(t, s, id, store.StatusDone)
	f, err := os.Open(filepath.Join(s.OutDir(id), "report.json"))
	if err != nil {
		t.Fatal(err)
	}
	r, err := report.ReadJSON(f)
	f.Close()
	if err != nil {
		t.Fatal(err)
	}
	want := fmt.Sprintf("stuck: no stage job left for evaluation %d", p1)
	if r.PerPatch == nil || !strings.Contains(strings.Join(r.PerPatch.Notes, "\n"), want) {
		t.Fatalf("per-patch section %+v, want a note saying %q", r.PerPatch, want)
	}
	// The watch's waiter was queued by the evaluation's end.
	ws, err := s.Store().Waiters(RetestedArgs{}.Kind())
	if err != nil || len(ws) != 0 {
		t.Fatalf("the watch's waiter is still waiting: %+v %v", ws, err)
	}
	var queued bool
	all, err := s.Engine().Jobs(t.Context(), 0, 100)
	if err != nil {
		t.Fatal(err)
	}
	for _, j := range all {
		var a RetestedArgs
		if j.Kind == (RetestedArgs{}).Kind() && json.Unmarshal(j.EncodedArgs, &a) == nil && a.EvaluationID == id && a.End != nil &&
			a.End.Status == store.StatusDone {
			queued = true
		}
	}
	if !queued {
		t.Fatalf("no retested job told evaluation %d is done", id)
	}
}
