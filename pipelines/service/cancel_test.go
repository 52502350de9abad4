package service

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/riverqueue/river/rivertype"

	"github.com/patcheval/patcheval/internal/testenv"
	"github.com/patcheval/patcheval/internal/testinbox"
)

// TestCancelAndRerun runs the real chain as far as a kernel build on the
// imported 6.1 tree (a fresh cache: the build has begun checking out
// when it is cancelled): submit over the API, apply records the series
// and queues one configure job per kernel in its transaction, the last
// configure queues one build job per kernel (every kernel is configured
// before any compiles), a duplicate
// submit returns the running evaluation, cancel stops the running builds
// (their contexts; serve builds up to DefaultBuildWorkers at once) and the
// queued ones, a second cancel is 409, re-run
// queues a new generation that finds the series applied and builds again.
//
// It runs on both databases: a SQLite file and a real PostgreSQL 15.
func TestCancelAndRerun(t *testing.T) {
	eachDatabase(t, testCancelAndRerun)
}

func testCancelAndRerun(t *testing.T, db string) {
	repo := testenv.LinuxTree(t)
	inbox := testinbox.Start(t, backport)
	s, base := testService(t, Config{Database: db, AllowTrees: []string{repo}, Lore: inbox.URL, CacheDir: t.TempDir(), Jobs: 1})
	req := SubmitRequest{MsgID: "20261102093000.4121-0-tester@example.org", Pipeline: "ppc-preempt-dynamic", Tree: repo, Boots: 1}
	code, _, raw := call(t, "POST", base+"/api/v1/evaluations", "", req)
	if code != 201 {
		t.Fatalf("submit: %d %s", code, raw)
	}
	var sub SubmitResponse
	json.Unmarshal(raw, &sub)
	id := sub.Evaluation.ID
	ctx := t.Context()
	jobs := func(states ...rivertype.JobState) map[string]int {
		js, err := s.Engine().Jobs(ctx, id, 100, states...)
		if err != nil {
			t.Fatal(err)
		}
		n := map[string]int{}
		for _, j := range js {
			n[j.Kind+"/"+string(j.State)]++
		}
		return n
	}
	waitFor := func(what string, cond func() bool) {
		t.Helper()
		for deadline := time.Now().Add(5 * time.Minute); !cond(); time.Sleep(200 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("timed out waiting for %s; jobs %v", what, jobs())
			}
		}
	}
	waitFor("a running build", func() bool { return jobs(rivertype.JobStateRunning)["build/running"] >= 1 })
	n := jobs()
	if n["apply/completed"] != 1 || n["build/running"]+n["build/available"] != 3 {
		t.Errorf("after apply: jobs %v, want apply completed and 3 build jobs", n)
	}
	if n["configure/completed"] != 3 {
		t.Errorf("builds running: jobs %v, want the 3 kernels' configures completed before", n)
	}
	if a, err := s.Store().AppliedOf(id); err != nil || a == nil || len(a.Commits) != 1 {
		t.Errorf("apply recorded %+v, %v; want one commit", a, err)
	}
	if code, _, raw := call(t, "POST", base+"/api/v1/evaluations", "", req); code != 200 {
		t.Errorf("duplicate submit while building: %d %s, want 200", code, raw)
	}
	if n := jobs(); n["apply/completed"] != 1 {
		t.Errorf("duplicate submit queued again: %v", n)
	}

	if code, _, raw := call(t, "POST", base+"/api/v1/evaluations/"+itoa(id)+"/cancel", "", ""); code != 200 {
		t.Fatalf("cancel: %d %s", code, raw)
	}
	waitFor("every job cancelled", func() bool {
		n := jobs(unfinished...)
		return len(n) == 0
	})
	if n := jobs(); n["build/cancelled"] != 3 {
		t.Errorf("after cancel: jobs %v, want the 3 builds cancelled", n)
	}
	if e, _ := s.Store().Evaluation(id); e.Status != StatusCancelled {
		t.Errorf("status %s after cancel, want cancelled", e.Status)
	}
	if code, _, raw := call(t, "POST", base+"/api/v1/evaluations/"+itoa(id)+"/cancel", "", ""); code != 409 {
		t.Errorf("second cancel: %d %s, want 409", code, raw)
	}

	if code, _, raw := call(t, "POST", base+"/api/v1/evaluations/"+itoa(id)+"/rerun", "", ""); code != 202 {
		t.Fatalf("rerun: %d %s", code, raw)
	}
	waitFor("the re-run's build", func() bool { return jobs(rivertype.JobStateRunning)["build/running"] >= 1 })
	if n := jobs(); n["apply/completed"] != 2 {
		t.Errorf("after re-run: jobs %v, want a second apply completed", n)
	}
	if code, _, raw := call(t, "POST", base+"/api/v1/evaluations/"+itoa(id)+"/rerun", "", ""); code != 409 {
		t.Errorf("re-run while running: %d %s, want 409", code, raw)
	}
	if code, _, raw := call(t, "POST", base+"/api/v1/evaluations/"+itoa(id)+"/cancel", "", ""); code != 200 {
		t.Fatalf("cancel of the re-run: %d %s", code, raw)
	}
	waitFor("the re-run cancelled", func() bool { return len(jobs(unfinished...)) == 0 })
}
