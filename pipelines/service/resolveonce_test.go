package service

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/patcheval/patcheval/mbox"
	"github.com/patcheval/patcheval/pipelines"
	"github.com/patcheval/patcheval/pipelines/runner"
	"github.com/patcheval/patcheval/pipelines/store"
	"github.com/patcheval/patcheval/series"
)

// TestSubmissionResolvesOnce: a submission's series is resolved once
// (issue 33): checkSubmission resolves it (to pick the version, the
// default pipeline) and Check, Submit and the stages take that one; they
// used to resolve the thread again (Check and Submit: 2 resolutions
// counted here, 3 with checkSubmission's own). The series stored is the
// one Submit stores when it resolves the submitted thread itself, byte
// for byte.
func TestSubmissionResolvesOnce(t *testing.T) {
	root := t.TempDir()
	tree := gitRepo(t, filepath.Join(root, "linux"))
	const tok = "0123456789abcdef-test-token"
	s, base := testService(t, Config{AllowTrees: []string{root}, Token: []byte(tok)})
	data, err := os.ReadFile(backport)
	if err != nil {
		t.Fatal(err)
	}
	count, restore := runner.CountResolutions()
	defer restore()
	code, _, raw := call(t, "POST", base+"/api/v1/evaluations", tok, SubmitRequest{Mbox: string(data), Pipeline: "ppc-preempt-dynamic",
		Tree: tree, Base: "HEAD", Boots: 1})
	if code != 201 {
		t.Fatalf("submit: %d %s", code, raw)
	}
	if n := count(); n != 1 {
		t.Errorf("the submission resolved its series %d times, want once", n)
	}
	var sub SubmitResponse
	json.Unmarshal(raw, &sub)
	id := sub.Evaluation.ID
	// Its first stage (apply: the series does not apply to this tree)
	// reads the series stored.
	for deadline := time.Now().Add(90 * time.Second); ; time.Sleep(200 * time.Millisecond) {
		e, err := s.Store().Evaluation(id)
		if err != nil {
			t.Fatal(err)
		}
		if e.Status == store.StatusFailed {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("evaluation %d is %s, want failed (the series does not apply)", id, e.Status)
		}
	}
	if n := count(); n != 1 {
		t.Errorf("the submission and its apply stage resolved the series %d times, want once", n)
	}
	got, err := s.Store().ResolvedSeries(id)
	if err != nil {
		t.Fatal(err)
	}
	restore()

	// The series Submit stores from the thread alone (the version the
	// submission resolved to pinned, as checkSubmission pins it).
	msgs, err := mbox.ParseBytes(data, "submitted mbox")
	if err != nil {
		t.Fatal(err)
	}
	th := mbox.NewThread(msgs, "submitted mbox")
	p, err := pipelines.Builtin("ppc-preempt-dynamic")
	if err != nil {
		t.Fatal(err)
	}
	st, err := store.Open(filepath.Join(t.TempDir(), "patcheval.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	o := runner.Options{Mbox: runner.ThreadMbox(th), ThreadSource: th.Source, Version: 4, Tree: tree, Base: "HEAD", Boots: 1,
		AM: series.AMOptions{LinkMask: series.DefaultLinkMask}}
	alone, _, err := runner.Submit(context.Background(), runner.Env{Store: st}, p, o)
	if err != nil {
		t.Fatal(err)
	}
	want, err := st.ResolvedSeries(alone)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) == 0 || !bytes.Equal(got, want) {
		t.Errorf("the series stored (%d bytes) is not the one Submit stores from the thread (%d bytes):\n%.400s\nvs\n%.400s", len(got), len(want), got, want)
	}
}
