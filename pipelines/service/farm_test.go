package service

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/riverqueue/river"
	"github.com/riverqueue/river/rivertype"

	"github.com/patcheval/patcheval/internal/testpg"
	"github.com/patcheval/patcheval/pipelines"
	"github.com/patcheval/patcheval/pipelines/artifact"
	"github.com/patcheval/patcheval/pipelines/store"
)

// fastHeartbeats makes workers beat every 100 ms and count as lost after
// 1 s, for the test.
func fastHeartbeats(t *testing.T) {
	every, live := HeartbeatEvery, LiveWithin
	HeartbeatEvery, LiveWithin = 100*time.Millisecond, time.Second
	t.Cleanup(func() { HeartbeatEvery, LiveWithin = every, live })
}

// testWorker runs a Worker with caps on database db until the test ends
// (or stop is called).
func testWorker(t *testing.T, db, name string, caps Capabilities) (w *Worker, stop func()) {
	t.Helper()
	w, err := NewWorker(context.Background(), WorkerConfig{Database: db, Name: name, Capabilities: caps, Log: testWriter{t},
		CacheDir: t.TempDir(), Grace: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	var stopped bool
	stop = func() {
		if stopped {
			return
		}
		stopped = true
		cancel()
		if err := <-done; err != nil {
			t.Errorf("worker %s: Run: %v", name, err)
		}
		w.Close()
	}
	t.Cleanup(stop)
	return w, stop
}

func getPage(t *testing.T, url string) string {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 {
		t.Fatalf("GET %s: %s\n%s", url, resp.Status, b)
	}
	return string(b)
}

// TestWorkersTakeTheirQueues: on a real Postgres, a coordinator that runs
// only its own stages (serve --work coordinator) and workers with
// different capabilities. A build job for arm64 is routed to build-arm64;
// while no live worker takes that queue the dashboard shows it waiting
// with the reason (the cross compiler it needs), not failed; a ppc64le
// worker leaves it alone; an arm64 worker that joins runs it (River's
// attempted_by names it). The workers page lists every process with its
// capabilities and heartbeat, and a worker that left as stopped.
//
// The build itself ends at once as bad input (the evaluation has no
// stored inputs), which is what the job's run is checked by: no kernel.
func TestWorkersTakeTheirQueues(t *testing.T) {
	fastHeartbeats(t)
	ctx := context.Background()
	db := testpg.URL(t)
	coord, base := testService(t, Config{Database: db, Name: "coordinator", Work: &Capabilities{Coordinator: true, Cores: 1}})
	if got := coord.Engine().WorkedQueues(); strings.Join(got, " ") != "apply more report series watch" {
		t.Fatalf("coordinator works %v, want apply more report series watch", got)
	}
	e, _, err := coord.Store().CreateOrResumeEvaluation("farm", store.EvaluationMeta{Pipeline: "p", SeriesTitle: "farm test"})
	if err != nil {
		t.Fatal(err)
	}
	if err := coord.db.Store.Tx(ctx, func(tx *store.Tx) error {
		if err := coord.setStatus(tx, e.ID, StatusQueued); err != nil {
			return err
		}
		return coord.engine.insertManyTx(ctx, tx, []river.InsertManyParams{buildJob(e.ID, 1, pipelines.BuildSpec{Key: "k", Arch: "arm64"})})
	}); err != nil {
		t.Fatal(err)
	}
	job := func() *rivertype.JobRow {
		jobs, err := coord.Engine().Jobs(ctx, e.ID, 10)
		if err != nil || len(jobs) != 1 {
			t.Fatalf("jobs of evaluation %d: %v, %v", e.ID, jobs, err)
		}
		return jobs[0]
	}
	if q := job().Queue; q != "build-arm64" {
		t.Fatalf("the arm64 build went to queue %q, want build-arm64", q)
	}

	_, stopPPC := testWorker(t, db, "ppc-builder", Capabilities{Build: []string{"ppc64le"}, QEMU: []string{"ppc64le"}, Cores: 2})
	time.Sleep(1500 * time.Millisecond) // a dozen heartbeats and fetch polls
	if j := job(); j.State != rivertype.JobStateAvailable || len(j.AttemptedBy) > 0 {
		t.Fatalf("with only a ppc64le worker the arm64 build is %s (attempted by %v), want available and untouched", j.State, j.AttemptedBy)
	}
	evalPage := getPage(t, base+"/evaluations/"+itoa(e.ID))
	for _, want := range []string{`id="waiting"`, "no live worker takes queue build-arm64", "gcc-aarch64-linux-gnu"} {
		if !strings.Contains(evalPage, want) {
			t.Errorf("the evaluation page lacks %q", want)
		}
	}
	if strings.Contains(evalPage, `class="st st-failed"`) {
		t.Errorf("the evaluation page shows something failed while the job waits")
	}
	if q := getPage(t, base+"/queue"); !strings.Contains(q, "no live worker takes queue build-arm64") {
		t.Errorf("the queue page does not say why the build waits")
	}
	wp := getPage(t, base+"/workers")
	for _, want := range []string{"coordinator", "coordinator stages", "ppc-builder", "builds ppc64le", "QEMU ppc64le", "boot-ppc64le build-ppc64le", "live"} {
		if !strings.Contains(wp, want) {
			t.Errorf("the workers page lacks %q", want)
		}
	}
	stopPPC()

	arm, _ := testWorker(t, db, "arm-builder", Capabilities{Build: []string{"arm64"}, Cores: 2})
	deadline := time.Now().Add(30 * time.Second)
	for {
		j := job()
		if j.State == rivertype.JobStateCancelled || j.State == rivertype.JobStateCompleted || j.State == rivertype.JobStateDiscarded {
			if len(j.AttemptedBy) != 1 || j.AttemptedBy[0] != arm.s.WorkerID() {
				t.Fatalf("the arm64 build was attempted by %v, want arm-builder alone", j.AttemptedBy)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the arm64 worker did not run the build: %s, attempted by %v", j.State, j.AttemptedBy)
		}
		time.Sleep(100 * time.Millisecond)
	}
	// The build ran and failed the evaluation as bad input (no stored
	// inputs); its job ends cancelled with the evaluation's other jobs.
	if got, err := coord.Store().Evaluation(e.ID); err != nil || got.Status != "failed" {
		t.Errorf("evaluation after the arm64 worker ran its build: %v %v, want failed (no inputs)", got, err)
	}
	ws, err := coord.Store().Workers()
	if err != nil {
		t.Fatal(err)
	}
	states := map[string]string{}
	for _, w := range ws {
		states[w.Name] = w.State
		if w.Name == "arm-builder" && !strings.Contains(w.Queues, "build-arm64") {
			t.Errorf("arm-builder's queues %q", w.Queues)
		}
	}
	if states["ppc-builder"] != store.WorkerStopped || states["arm-builder"] != store.WorkerRunning || states["coordinator"] != store.WorkerRunning {
		t.Errorf("worker states %v: want ppc-builder stopped, arm-builder and coordinator running", states)
	}
	if !strings.Contains(getPage(t, base+"/workers"), "stopped") {
		t.Errorf("the workers page does not show ppc-builder stopped")
	}
}

// TestWorkerNeedsPostgres: a worker on a SQLite file, or one that can run
// nothing, is refused with the reason.
func TestWorkerNeedsPostgres(t *testing.T) {
	_, err := NewWorker(context.Background(), WorkerConfig{Database: t.TempDir() + "/p.db", Capabilities: Capabilities{Build: []string{"arm64"}}})
	if err == nil || !strings.Contains(err.Error(), "postgres://") {
		t.Errorf("worker on SQLite: %v", err)
	}
	_, err = NewWorker(context.Background(), WorkerConfig{Database: "postgres://u@127.0.0.1:1/db", Capabilities: Capabilities{Coordinator: true}})
	if err == nil || !strings.Contains(err.Error(), "can run nothing") {
		t.Errorf("worker without capabilities: %v", err)
	}
}

// TestQueueNames: queues follow the arch table and River's alphabet.
func TestQueueNames(t *testing.T) {
	c := Capabilities{Build: []string{"x86_64"}, QEMU: []string{"ppc64le"}, SSH: []string{"ssh://root@Board-7.lab:2222"}}
	if got := strings.Join(c.Queues(), " "); got != "boot-ppc64le boot-ssh-root-board-7-lab-2222 build-x86-64" {
		t.Errorf("queues %q", got)
	}
	long := SSHQueue("ssh://" + strings.Repeat("a", 80) + ".example.org")
	if len(long) > 64 || long == SSHQueue("ssh://"+strings.Repeat("a", 81)+".example.org") {
		t.Errorf("long SSH queue %q (%d)", long, len(long))
	}
	for _, q := range []string{BuildQueue("x86_64"), SSHQueue("ssh://u@h"), long} {
		if queuePart(q) != q {
			t.Errorf("queue %q is not in River's alphabet", q)
		}
	}
	if !strings.Contains(queueNeeds("boot-x86-64"), "qemu-system-x86_64") {
		t.Errorf("queueNeeds(boot-x86-64) = %q", queueNeeds("boot-x86-64"))
	}
}

// TestServeArtifacts: serve mounts the artifact store; a write needs the
// token and the content's sha256 as its key; a worker's client reads
// back what another put.
func TestServeArtifacts(t *testing.T) {
	tok := []byte("farm-token-0123456789")
	_, base := testService(t, Config{Token: tok})
	ctx := context.Background()
	body := []byte("System.map of a kernel")
	req, _ := http.NewRequest(http.MethodPut, base+ArtifactsPath+artifact.Key(body), strings.NewReader(string(body)))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("PUT without the token: %s", resp.Status)
	}
	w1 := &artifact.Client{Base: base + ArtifactsPath, Token: tok, Cache: artifact.Dir{Path: t.TempDir()}}
	if err := w1.Put(ctx, artifact.Key([]byte("other")), strings.NewReader(string(body))); err == nil {
		t.Errorf("PUT under another content's key was taken")
	}
	if err := w1.Put(ctx, artifact.Key(body), strings.NewReader(string(body))); err != nil {
		t.Fatal(err)
	}
	w2 := &artifact.Client{Base: base + ArtifactsPath, Token: tok, Cache: artifact.Dir{Path: t.TempDir()}}
	rc, err := w2.Open(ctx, artifact.Key(body))
	if err != nil {
		t.Fatal(err)
	}
	got, err := io.ReadAll(rc)
	rc.Close()
	if err != nil || string(got) != string(body) {
		t.Errorf("read back %q, %v", got, err)
	}
}
