package service

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/patcheval/patcheval/internal/testenv"
	"github.com/patcheval/patcheval/internal/testinbox"
)

// TestKillDuringBuild kills a serve process with SIGKILL while a kernel
// build job runs and starts another on the same database: the job left
// "running" is rescued at once (same job, attempt 2, the death recorded
// among its errors) and runs again; the applied series is not applied
// twice. (TestServeEndToEnd does the same during a boot and follows the
// evaluation to its end; it needs the kernels built.)
func TestKillDuringBuild(t *testing.T) {
	repo := testenv.LinuxTree(t)
	inbox := testinbox.Start(t, backport)
	db := filepath.Join(t.TempDir(), "patcheval.db")
	specJSON, _ := json.Marshal(map[string]string{"DB": db, "Lore": inbox.URL, "Tree": repo, "Cache": t.TempDir()})
	srv := startServe(t, string(specJSON))
	req := SubmitRequest{MsgID: "20261102093000.4121-0-tester@example.org", Pipeline: "ppc-preempt-dynamic", Tree: repo, Boots: 1}
	code, _, raw := call(t, "POST", srv.base+"/api/v1/evaluations", "", req)
	if code != 201 {
		t.Fatalf("submit: %d %s", code, raw)
	}
	var sub SubmitResponse
	json.Unmarshal(raw, &sub)
	id := sub.Evaluation.ID
	type job struct {
		ID      int64  `json:"id"`
		Kind    string `json:"kind"`
		State   string `json:"state"`
		Attempt int    `json:"attempt"`
		Errors  []struct {
			Error string `json:"error"`
		} `json:"errors"`
	}
	running := func(base string) *job {
		_, _, raw := call(t, "GET", fmt.Sprintf("%s/api/v1/jobs?evaluation=%d&state=running", base, id), "", nil)
		var r struct{ Jobs []job }
		json.Unmarshal(raw, &r)
		for _, j := range r.Jobs {
			if j.Kind == "build" {
				return &j
			}
		}
		return nil
	}
	var first *job
	for deadline := time.Now().Add(5 * time.Minute); first == nil; time.Sleep(200 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("no build job started")
		}
		first = running(srv.base)
	}
	time.Sleep(2 * time.Second) // well into the build
	srv.cmd.Process.Signal(syscall.SIGKILL)
	<-srv.done

	srv2 := startServe(t, string(specJSON))
	var again *job
	for deadline := time.Now().Add(2 * time.Minute); again == nil; time.Sleep(200 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the killed build job did not run again")
		}
		again = running(srv2.base)
	}
	if again.ID != first.ID || again.Attempt != 2 {
		t.Errorf("after the restart: build job %d attempt %d running, want job %d attempt 2", again.ID, again.Attempt, first.ID)
	}
	died := false
	for _, e := range again.Errors {
		died = died || strings.Contains(e.Error, "died")
	}
	if !died {
		t.Errorf("the rescued job's errors do not say its process died: %+v", again.Errors)
	}
	_, _, raw = call(t, "GET", fmt.Sprintf("%s/api/v1/jobs?evaluation=%d&state=completed", srv2.base, id), "", nil)
	if n := strings.Count(string(raw), `"kind": "apply"`); n != 1 {
		t.Errorf("%d completed apply jobs, want 1:\n%s", n, raw)
	}
	if code, _, raw := call(t, "POST", srv2.base+"/api/v1/evaluations/"+itoa(id)+"/cancel", "", ""); code != 200 {
		t.Errorf("cancel: %d %s", code, raw)
	}
	srv2.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case err := <-srv2.done:
		if err != nil {
			t.Errorf("serve after SIGTERM: %v", err)
		}
	case <-time.After(60 * time.Second):
		t.Errorf("serve did not stop within 60s of SIGTERM")
	}
}
