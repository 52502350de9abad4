package service

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"reflect"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/patcheval/patcheval/build/buildtest"
	"github.com/patcheval/patcheval/evaluate"
	"github.com/patcheval/patcheval/evaluate/report"
	"github.com/patcheval/patcheval/internal/progress"
	"github.com/patcheval/patcheval/internal/testenv"
	"github.com/patcheval/patcheval/internal/testinbox"
	"github.com/patcheval/patcheval/internal/testpg"
	"github.com/patcheval/patcheval/mbox"
	"github.com/patcheval/patcheval/pipelines"
	"github.com/patcheval/patcheval/pipelines/runner"
	"github.com/patcheval/patcheval/pipelines/store"
	"github.com/patcheval/patcheval/series"
)

// serveEnv, when set, makes the test binary a serve process (the kill -9
// test needs a process to kill): database, lore, allowed tree, cache and
// (optional) state directory (PATCHEVAL_STATE_DIR: where a serve on
// Postgres writes its reports).
const serveEnv = "PATCHEVAL_SERVICE_TEST_SERVE"

var testFrom = mbox.Address{Name: "Kernel Tester", Email: "tester@example.org"}

func TestMain(m *testing.M) {
	if v := os.Getenv(serveEnv); v != "" {
		os.Exit(serveMain(v))
	}
	if v := os.Getenv(farmWorkerEnv); v != "" {
		os.Exit(farmWorkerMain(v))
	}
	cleanup := testenv.PrivateDirs()
	code := testpg.Main(m)
	cleanup()
	os.Exit(code)
}

// serveMain runs a Service like `patcheval serve` does (SIGTERM ends it
// gracefully) and prints its address.
func serveMain(spec string) int {
	var cfg struct {
		DB, Lore, Tree, Cache, State string
		// Watch, when set, enables the watches with the test's evaluator
		// and measurer (watchjobs_test.go), logging to Watch.Log.
		Watch *testWatchSpec
		// Series, when set, measures the bisections inside a series with
		// the test's measurer (seriesjobs_test.go).
		Series *testSeriesSpec
	}
	if err := json.Unmarshal([]byte(spec), &cfg); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	if cfg.State != "" {
		os.Setenv("PATCHEVAL_STATE_DIR", cfg.State)
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	sc := Config{Database: cfg.DB, Lore: cfg.Lore, AllowTrees: []string{cfg.Tree}, CacheDir: cfg.Cache,
		From: testFrom, Log: os.Stderr, Grace: 5 * time.Second}
	if cfg.Series != nil {
		sc.Series = cfg.Series.measurers()
	}
	s, err := New(ctx, sc)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 3
	}
	defer s.Close()
	if cfg.Watch != nil {
		s.Watch(cfg.Watch.config(s))
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 3
	}
	fmt.Printf("listening http://%s as %s\n", ln.Addr(), s.WorkerID())
	if err := s.Run(ctx, ln); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 3
	}
	return 0
}

type serveProc struct {
	cmd    *exec.Cmd
	base   string
	worker string // its River client (WorkerID)
	done   chan error
}

func startServe(t *testing.T, spec string) *serveProc {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), serveEnv+"="+spec)
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p := &serveProc{cmd: cmd, done: make(chan error, 1)}
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil || !strings.HasPrefix(line, "listening ") {
		cmd.Process.Kill()
		t.Fatalf("serve did not start: %q %v", line, err)
	}
	f := strings.Fields(line)
	if len(f) != 4 || f[2] != "as" {
		cmd.Process.Kill()
		t.Fatalf("serve said %q, want listening URL as WORKER", line)
	}
	p.base, p.worker = f[1], f[3]
	go func() { p.done <- cmd.Wait() }()
	t.Cleanup(func() {
		if cmd.ProcessState == nil {
			cmd.Process.Kill()
			<-p.done
		}
	})
	return p
}

// TestServeEndToEnd runs the bundled backport thread from a real
// public-inbox through `serve` for real: submitted over the API, it runs
// as River jobs (apply, three ppc64le kernels from the shared cache,
// deterministic QEMU boots). The serve process is killed with SIGKILL
// during a boot and started again on the same database: the evaluation
// completes, no finished boot is redone, and no sample row is lost or
// duplicated. A real browser then reads the dashboard, and `lore
// --pipeline`'s in-process path on the same inputs finds the same
// evaluation and writes the same report.
//
// It runs on SQLite and on a real PostgreSQL 15 (`serve --database
// postgres://...`), where the restarted serve finds the killed one's boot
// job by its presence lock (orphans.go). Both reuse the same kernel
// builds; the Postgres run boots once per variant and skips the browser
// (the pages are the same code) to keep its cost to the apply and a few
// boots.
func TestServeEndToEnd(t *testing.T) {
	repo := buildtest.Repo(t)
	cache := buildtest.Options(t).CacheDir
	inbox := testinbox.Start(t, backport)
	t.Run("sqlite", func(t *testing.T) {
		dir := t.TempDir()
		serveEndToEnd(t, e2e{repo: repo, cache: cache, lore: inbox.URL, db: filepath.Join(dir, "patcheval.db"), dir: dir, boots: 2, browser: true})
	})
	t.Run("postgres", func(t *testing.T) {
		dir := t.TempDir()
		serveEndToEnd(t, e2e{repo: repo, cache: cache, lore: inbox.URL, db: testpg.URL(t), dir: dir, state: dir, boots: 1})
	})
}

// e2e is one end-to-end run: the tree, the kernel cache, the
// public-inbox, the database, the directory the reports land in (beside
// a SQLite file; the state directory on Postgres), boots per variant, and
// whether a browser reads the dashboard.
type e2e struct {
	repo, cache, lore, db, dir, state string
	boots                             int
	browser                           bool
}

func serveEndToEnd(t *testing.T, c e2e) {
	repo, cache, db, dir, boots := c.repo, c.cache, c.db, c.dir, c.boots
	specJSON, _ := json.Marshal(map[string]string{"DB": db, "Lore": c.lore, "Tree": repo, "Cache": cache, "State": c.state})
	spec := string(specJSON)
	const msgid = "20261102093000.4121-0-tester@example.org"

	srv := startServe(t, spec)
	req := SubmitRequest{MsgID: "<" + msgid + ">", Pipeline: "ppc-preempt-dynamic", Tree: repo, Boots: boots}
	code, e, raw := call(t, "POST", srv.base+"/api/v1/evaluations", "", req)
	if code != 201 {
		t.Fatalf("submit: %d %s (%+v)", code, raw, e)
	}
	var sub SubmitResponse
	if err := json.Unmarshal(raw, &sub); err != nil {
		t.Fatal(err)
	}
	id := sub.Evaluation.ID
	t.Logf("evaluation %d: %s", id, sub.URL)
	// A duplicate while it is queued or running returns it, queues nothing.
	code, _, raw = call(t, "POST", srv.base+"/api/v1/evaluations", "", req)
	var dup SubmitResponse
	json.Unmarshal(raw, &dup)
	if code != 200 || dup.Created || dup.Evaluation == nil || dup.Evaluation.ID != id {
		t.Errorf("duplicate submit: %d %s, want 200 with evaluation %d", code, raw, id)
	}

	// Another process's view of the database, like `patcheval runs`.
	st, err := store.Open(db)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()

	// Wait until a boot runs after at least one finished, then kill -9.
	deadline := time.Now().Add(60 * time.Minute)
	var running *store.Run
	var finishedBefore []store.Run
	for running == nil {
		if time.Now().After(deadline) {
			t.Fatalf("no boot started within the deadline")
		}
		ev, err := st.Evaluation(id)
		if err != nil {
			t.Fatal(err)
		}
		if ev.Status == "failed" || ev.Status == "done" {
			t.Fatalf("evaluation %s before a boot could be interrupted", ev.Status)
		}
		runs, err := st.RunsOf(id)
		if err != nil {
			t.Fatal(err)
		}
		finishedBefore = finishedBefore[:0]
		var cand *store.Run
		for i, r := range runs {
			if r.Status.Finished() {
				finishedBefore = append(finishedBefore, r)
			} else if r.Status == store.RunRunning && time.Since(r.Started) > 300*time.Millisecond {
				// A deterministic boot of these kernels takes 2-3 s in all
				// (QEMU start, boot, benchmarks): kill well inside it.
				cand = &runs[i]
			}
		}
		if cand != nil && len(finishedBefore) > 0 {
			running = cand
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if err := srv.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	<-srv.done
	samplesBefore := map[int64]int{}
	for _, r := range finishedBefore {
		samplesBefore[r.ID] = r.Samples
	}
	t.Logf("killed serve during boot %s#%d (run %d); %d boot(s) finished before", running.Variant, running.Boot, running.ID, len(finishedBefore))

	srv2 := startServe(t, spec)
	for {
		if time.Now().After(deadline) {
			t.Fatalf("evaluation did not finish after the restart")
		}
		ev, err := st.Evaluation(id)
		if err != nil {
			t.Fatal(err)
		}
		if ev.Status == "done" {
			break
		}
		if ev.Status == "failed" || ev.Status == StatusCancelled {
			_, _, raw := call(t, "GET", srv2.base+fmt.Sprintf("/api/v1/evaluations/%d", id), "", nil)
			t.Fatalf("evaluation %s after the restart:\n%s", ev.Status, raw)
		}
		time.Sleep(2 * time.Second)
	}

	// Rows: finished boots kept as they were, none redone, none twice,
	// the killed boot never counted, every planned boot finished.
	runs, err := st.RunsOf(id)
	if err != nil {
		t.Fatal(err)
	}
	finished := map[evaluate.BootKey]int64{}
	total := 0
	for _, r := range runs {
		k := evaluate.BootKey{Variant: r.Variant, Boot: r.Boot}
		if !r.Status.Finished() {
			if r.Samples != 0 {
				t.Errorf("unfinished run %d (%s, %s) has %d sample rows", r.ID, k, r.Status, r.Samples)
			}
			continue
		}
		if prev, dup := finished[k]; dup {
			t.Errorf("boot %s finished twice: runs %d and %d", k, prev, r.ID)
		}
		finished[k] = r.ID
		total += r.Samples
	}
	for _, r := range finishedBefore {
		k := evaluate.BootKey{Variant: r.Variant, Boot: r.Boot}
		if finished[k] != r.ID {
			t.Errorf("boot %s finished before the kill as run %d was redone as run %d", k, r.ID, finished[k])
		}
	}
	for _, r := range runs {
		if n, ok := samplesBefore[r.ID]; ok && r.Samples != n {
			t.Errorf("run %d had %d samples before the kill, %d after", r.ID, n, r.Samples)
		}
		if r.ID == running.ID && r.Status.Finished() {
			t.Errorf("the boot killed with serve (run %d) counts as finished", r.ID)
		}
		// The dashboard must not show the dead serve's boot running.
		if r.ID == running.ID && (r.Status != store.RunInfra || !strings.Contains(r.ErrorText, "interrupted")) {
			t.Errorf("the boot killed with serve (run %d) is %s %q, want infra, interrupted", r.ID, r.Status, r.ErrorText)
		}
		if r.Status == store.RunRunning {
			t.Errorf("run %d (%s#%d) is still running after the evaluation is done", r.ID, r.Variant, r.Boot)
		}
	}
	planned, err := runner.Boots(context.Background(), runner.Env{Store: st}, id)
	if err != nil {
		t.Fatal(err)
	}
	for _, b := range planned {
		if _, ok := finished[evaluate.BootKey{Variant: b.Variant, Boot: b.Boot}]; !ok {
			t.Errorf("planned boot %s#%d never finished", b.Variant, b.Boot)
		}
	}
	samples, err := st.Samples(id)
	if err != nil {
		t.Fatal(err)
	}
	if len(samples) != total {
		t.Errorf("%d sample rows for finished runs, Samples returns %d", total, len(samples))
	}
	t.Logf("%d runs (%d finished), %d samples", len(runs), len(finished), len(samples))

	// Jobs: every job of the evaluation completed; the killed boot's job
	// was rescued and retried.
	_, _, raw = call(t, "GET", srv2.base+fmt.Sprintf("/api/v1/jobs?evaluation=%d", id), "", nil)
	var jobs struct {
		Jobs []struct {
			Kind    string `json:"kind"`
			State   string `json:"state"`
			Attempt int    `json:"attempt"`
		} `json:"jobs"`
	}
	json.Unmarshal(raw, &jobs)
	kinds := map[string]int{}
	retried := 0
	for _, j := range jobs.Jobs {
		if j.State != "completed" {
			t.Errorf("job %s is %s after the evaluation finished", j.Kind, j.State)
		}
		kinds[j.Kind]++
		if j.Attempt > 1 {
			retried++
		}
	}
	t.Logf("jobs: %v (%d retried)", kinds, retried)
	if kinds["apply"] != 1 || kinds["build"] != 3 || kinds["boot"] < len(planned) || kinds["report"] != 1 {
		t.Errorf("jobs %v: want 1 apply, 3 builds, a boot job per planned boot, 1 report", kinds)
	}
	if retried == 0 {
		t.Errorf("no job was retried after the kill")
	}

	// The dashboard in a real browser.
	if c.browser {
		shots := os.Getenv("PATCHEVAL_SCREENSHOTS")
		if shots == "" {
			shots = t.TempDir()
		}
		visitDashboard(t, srv2.base, id, shots)
	}

	// lore --pipeline's path on the same inputs: the same evaluation,
	// nothing booted again, the same report.
	thread, err := mbox.Fetch(context.Background(), mbox.Source{Kind: mbox.SourceLore, MsgID: msgid}, mbox.FetchOptions{Lore: c.lore, NoCache: true})
	if err != nil {
		t.Fatal(err)
	}
	s, err := series.Resolve(thread, series.Options{})
	if err != nil {
		t.Fatal(err)
	}
	p, err := pipelines.Builtin("ppc-preempt-dynamic")
	if err != nil {
		t.Fatal(err)
	}
	out := t.TempDir()
	res, err := runner.Run(context.Background(), runner.Env{Store: st, CacheDir: cache, Progress: progress.New(os.Stderr)}, p, runner.Options{
		Mbox: runner.ThreadMbox(thread), Version: s.Version, ThreadSource: thread.Source, AM: series.AMOptions{LinkMask: series.DefaultLinkMask},
		Tree: repo, Boots: boots, From: testFrom, Lore: c.lore, OutDir: out})
	if err != nil {
		t.Fatalf("lore --pipeline path: %v", err)
	}
	if !res.Resumed || res.EvaluationID != id {
		t.Errorf("lore --pipeline path: evaluation %d resumed=%v, want the service's %d", res.EvaluationID, res.Resumed, id)
	}
	after, _ := st.RunsOf(id)
	if len(after) != len(runs) {
		t.Errorf("lore --pipeline booted again: %d runs, had %d", len(after), len(runs))
	}
	compareReports(t, filepath.Join(dir, "evaluations", fmt.Sprint(id)), out)

	// SIGTERM: a graceful stop, exit 0.
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

// reportNames are the reports runner.Report writes: the service's and
// lore --pipeline's must say the same in every one.
var reportNames = []string{"report.json", "report.txt", "report.md", "kcidb.json", "reply.eml", "reply.json"}

// compareReports requires the reports in directories a (the service's)
// and b (lore --pipeline's) to say the same thing: report.json field by
// field but for when it was generated and how long the stages took, the
// others as text with only what must differ normalised (normalizeReport).
func compareReports(t *testing.T, a, b string) {
	t.Helper()
	load := func(p string) *report.Report {
		data, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		var r report.Report
		if err := json.Unmarshal(data, &r); err != nil {
			t.Fatal(err)
		}
		r.Generated, r.Timings = time.Time{}, nil
		return &r
	}
	ra, rb := load(filepath.Join(a, "report.json")), load(filepath.Join(b, "report.json"))
	if !reflect.DeepEqual(ra, rb) {
		ja, _ := json.MarshalIndent(ra, "", " ")
		jb, _ := json.MarshalIndent(rb, "", " ")
		t.Errorf("the service's report.json differs from lore --pipeline's:\nservice:\n%s\nlore --pipeline:\n%s", firstDiff(string(ja), string(jb)), firstDiff(string(jb), string(ja)))
	}
	for _, name := range reportNames[1:] {
		da, err := os.ReadFile(filepath.Join(a, name))
		if err != nil {
			t.Errorf("the service wrote no %s: %v", name, err)
			continue
		}
		db, err := os.ReadFile(filepath.Join(b, name))
		if err != nil {
			t.Errorf("lore --pipeline wrote no %s: %v", name, err)
			continue
		}
		na, nb := normalizeReport(string(da)), normalizeReport(string(db))
		if na != nb {
			k := 0
			for k < min(len(na), len(nb)) && na[k] == nb[k] {
				k++
			}
			around := func(s string) string { return s[max(0, k-160):min(len(s), k+160)] }
			t.Errorf("the service's %s differs from lore --pipeline's (normalised, at byte %d):\nservice:\n%s\nlore --pipeline:\n%s", name, k, around(na), around(nb))
		}
	}
}

// What must differ between two reports of the same evaluation written at
// different times: when (RFC 3339 times, the draft's Date: and the
// Message-Id made from it) and how long the stages took (Go durations:
// the stage timings); and, since a duration's length moves where the
// text reports wrap their lines, the line breaks (every run of white
// space becomes one space).
var (
	rfc3339Time  = regexp.MustCompile(`\d{4}-\d\d-\d\d[T ]\d\d:\d\d:\d\d(\.\d+)?(Z|[+-]\d\d:?\d\d)?`)
	mailDate     = regexp.MustCompile(`(?m)^Date: .*$`)
	draftMsgID   = regexp.MustCompile(`\d{14}\.[0-9a-f]+@`)
	goDuration   = regexp.MustCompile(`\b(\d+h)?(\d+m)?\d+(\.\d+)?(ns|µs|ms|s|m|h)\b`)
	whiteSpace   = regexp.MustCompile(`\s+`)
	jsonSpaceEsc = regexp.MustCompile(`(\\n|\\t)+`)
)

func normalizeReport(s string) string {
	s = rfc3339Time.ReplaceAllString(s, "<time>")
	s = mailDate.ReplaceAllString(s, "Date: <date>")
	s = draftMsgID.ReplaceAllString(s, "<msgid>@")
	s = jsonSpaceEsc.ReplaceAllString(s, " ") // reply.json's body
	s = goDuration.ReplaceAllString(s, "<duration>")
	return whiteSpace.ReplaceAllString(s, " ")
}

func firstDiff(a, b string) string {
	la, lb := strings.Split(a, "\n"), strings.Split(b, "\n")
	for i := range la {
		if i >= len(lb) || la[i] != lb[i] {
			lo, hi := max(0, i-3), min(len(la), i+4)
			return strings.Join(la[lo:hi], "\n")
		}
	}
	return "(prefix)"
}

// TestNormalizeReport: the end-to-end comparison forgives when a report
// was written and how long its stages took (and the rewrapping that
// follows), and nothing the report says about the kernels.
func TestNormalizeReport(t *testing.T) {
	a := "Date: Tue, 01 Dec 2026 21:36:16 +0000\nMessage-Id: <20261201213616.9e832fcec4045881@patcheval.invalid>\n" +
		"kill ns/op: voluntary -> full +25.5% (95% CI +25.3% .. +25.6%)\n" +
		"Wall time: fetch 62ms, apply 14ms (branch patcheval/x), build 238ms (3 kernel(s),\n  3 cached), boot 13.8s; total 1m19.4s\n" +
		`"start_time": "2026-12-01T21:36:15.233219+00:00", "body": "a\n  b"`
	b := "Date: Tue, 01 Dec 2026 21:36:53 +0000\nMessage-Id: <20261201213653.d704b7d6ce676050@patcheval.invalid>\n" +
		"kill ns/op: voluntary -> full +25.5% (95% CI +25.3% .. +25.6%)\n" +
		"Wall time: fetch 22ms, apply 53ms (branch patcheval/x), build 53ms (3 kernel(s), 3\n  cached), boot 24.5s; total 34.3s\n" +
		`"start_time": "2026-12-01T21:36:50.352479+00:00", "body": "a b"`
	if na, nb := normalizeReport(a), normalizeReport(b); na != nb {
		t.Errorf("reports differing only in times and wrapping:\n%s\n%s", na, nb)
	}
	for _, changed := range []string{
		strings.Replace(b, "+25.3%", "+25.2%", 1),
		strings.Replace(b, "3 kernel(s)", "2 kernel(s)", 1),
		strings.Replace(b, "voluntary -> full", "voluntary -> voluntary+dyn", 1),
		strings.Replace(b, "patcheval.invalid", "example.org", 1),
	} {
		if normalizeReport(a) == normalizeReport(changed) {
			t.Errorf("a changed report normalises to the same text:\n%s", changed)
		}
	}
}
