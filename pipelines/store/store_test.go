package store

import (
	"bufio"
	"bytes"
	"database/sql"
	"errors"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/patcheval/patcheval/evaluate"
	"github.com/patcheval/patcheval/internal/fail"
	"github.com/patcheval/patcheval/internal/testpg"
)

// eachDB runs f on each database the store supports: a new SQLite file
// (in directories that do not exist yet) and a new database on a real
// PostgreSQL 15 (internal/testpg).
func eachDB(t *testing.T, f func(t *testing.T, db string)) {
	t.Run("sqlite", func(t *testing.T) { f(t, filepath.Join(t.TempDir(), "state", "sub", "patcheval.db")) })
	t.Run("postgres", func(t *testing.T) { f(t, testpg.URL(t)) })
}

// openTemp opens database db (see eachDB), closed at the test's end.
func openTemp(t *testing.T, db string) (*Store, string) {
	t.Helper()
	s, err := Open(db)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s, db
}

func TestMigrateFromEmptyAndReopen(t *testing.T) {
	eachDB(t, func(t *testing.T, db string) {
		s, path := openTemp(t, db)
		v, err := s.Version()
		if err != nil {
			t.Fatal(err)
		}
		if v != SchemaVersion() || v < 1 {
			t.Fatalf("version %d, want %d", v, SchemaVersion())
		}
		if s.Dialect() == "sqlite" {
			var mode string
			if err := s.db.QueryRow(`PRAGMA journal_mode`).Scan(&mode); err != nil || mode != "wal" {
				t.Fatalf("journal_mode = %q, %v; want wal", mode, err)
			}
			var fk int
			if err := s.db.QueryRow(`PRAGMA foreign_keys`).Scan(&fk); err != nil || fk != 1 {
				t.Fatalf("foreign_keys = %d, %v", fk, err)
			}
		}
		e, _, err := s.CreateOrResumeEvaluation("k1", EvaluationMeta{Pipeline: "p"})
		if err != nil {
			t.Fatal(err)
		}
		s.Close()

		// Re-open twice: idempotent, data kept, exactly one schema_version row.
		for i := 0; i < 2; i++ {
			s2, err := Open(path)
			if err != nil {
				t.Fatal(err)
			}
			v2, _ := s2.Version()
			if v2 != SchemaVersion() {
				t.Fatalf("reopen %d: version %d", i, v2)
			}
			var rows int
			s2.db.QueryRow(`SELECT COUNT(*) FROM schema_version`).Scan(&rows)
			if rows != 1 {
				t.Fatalf("schema_version has %d rows", rows)
			}
			got, err := s2.Evaluation(e.ID)
			if err != nil || got.Key != "k1" {
				t.Fatalf("evaluation after reopen: %+v, %v", got, err)
			}
			s2.Close()
		}
	})
}

func TestRefusesNewerSchema(t *testing.T) {
	eachDB(t, func(t *testing.T, db string) {
		s, path := openTemp(t, db)
		if _, err := s.db.Exec(`UPDATE schema_version SET version = 999`); err != nil {
			t.Fatal(err)
		}
		s.Close()
		_, err := Open(path)
		if err == nil || !strings.Contains(err.Error(), "999") || !strings.Contains(err.Error(), Redact(path)) {
			t.Fatalf("Open of a newer schema: %v", err)
		}
	})
}

func TestForeignKeysEnforced(t *testing.T) {
	eachDB(t, func(t *testing.T, db string) {
		s, _ := openTemp(t, db)
		if _, err := s.BeginRun(12345, "voluntary", 0); err == nil {
			t.Fatal("BeginRun on a missing evaluation succeeded: foreign keys are off")
		}
	})
}

func TestDefaultPathFollowsStateDir(t *testing.T) {
	dir := t.TempDir()
	t.Setenv("PATCHEVAL_STATE_DIR", filepath.Join(dir, "x"))
	if got, want := DefaultPath(), filepath.Join(dir, "x", "patcheval.db"); got != want {
		t.Fatalf("DefaultPath = %q, want %q", got, want)
	}
	s, err := Open("")
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if _, err := os.Stat(filepath.Join(dir, "x", "patcheval.db")); err != nil {
		t.Fatal(err)
	}
}

func sampleSet(n int, variant string) []evaluate.Sample {
	var out []evaluate.Sample
	for i := 0; i < n; i++ {
		out = append(out, evaluate.Sample{
			Variant: variant, Benchmark: "kill", Metric: "ns/op", Unit: "ns", Value: 955 + float64(i),
			Iteration: i, Extra: map[string]float64{"iterations": 200000}, Time: time.Unix(1700000000, int64(i)).UTC(),
		})
	}
	return out
}

func TestRoundTrip(t *testing.T) {
	eachDB(t, func(t *testing.T, db string) {
		s, _ := openTemp(t, db)
		meta := EvaluationMeta{Pipeline: "ppc-preempt-dynamic", SeriesMsgID: "<a@b>", SeriesTitle: "powerpc: Enable dynamic preemption",
			SeriesVersion: 4, Tree: "/trees/linux.git", Base: "v6.1-debian"}
		key := Key("pipelinehash", "<a@b>", "4", "treecommit")
		if key == Key("pipelinehas", "h<a@b>", "4", "treecommit") {
			t.Fatal("Key is not length-prefixed")
		}
		e, resumed, err := s.CreateOrResumeEvaluation(key, meta)
		if err != nil || resumed {
			t.Fatalf("create: %v resumed=%v", err, resumed)
		}
		if e.EvaluationMeta != meta || e.Status != StatusRunning || e.Created.IsZero() {
			t.Fatalf("evaluation: %+v", e)
		}
		e2, resumed, err := s.CreateOrResumeEvaluation(key, EvaluationMeta{Pipeline: "other"})
		if err != nil || !resumed || e2.ID != e.ID || e2.Pipeline != meta.Pipeline {
			t.Fatalf("resume: %+v resumed=%v %v", e2, resumed, err)
		}

		bid, err := s.RecordBuild(e.ID, Build{Variant: "voluntary", Arch: "ppc64le", Commit: "abc", ConfigHash: "h1",
			ArtifactDir: "/cache/b1", Metadata: []byte(`{"duration_s": 300}`)})
		if err != nil {
			t.Fatal(err)
		}
		bid2, err := s.RecordBuild(e.ID, Build{Variant: "voluntary", Arch: "ppc64le", Status: "failed", ErrorKind: "kernel", ErrorText: "x.c:1: error"})
		if err != nil || bid2 != bid {
			t.Fatalf("re-record build: id %d vs %d, %v", bid2, bid, err)
		}
		if _, err := s.RecordBuild(e.ID, Build{Variant: "v", Arch: "a", Metadata: []byte("{")}); err == nil {
			t.Fatal("invalid metadata JSON accepted")
		}
		builds, err := s.BuildsOf(e.ID)
		if err != nil || len(builds) != 1 || builds[0].Status != "failed" || builds[0].ErrorText != "x.c:1: error" {
			t.Fatalf("builds: %+v %v", builds, err)
		}

		env := evaluate.Environment{KernelRelease: "6.1.0", ConfigHash: "h1", Cmdline: "console=hvc0", Target: "qemu",
			QEMUArgs: []string{"-M", "pseries", "-icount", "shift=0,sleep=off"}, AgentVersion: "dev", Deterministic: true,
			BuildID: "fa36776b59bf96ada9b36526d3ba1705c7a98183", Verified: true}
		console := bytes.Repeat([]byte("Linux version 6.1.0 ... hvc0\n"), 200)
		r1, err := s.BeginRun(e.ID, "voluntary", 0)
		if err != nil {
			t.Fatal(err)
		}
		if err := s.FinishRun(r1, RunOK, env, console, sampleSet(3, "ignored")); err != nil {
			t.Fatal(err)
		}
		if err := s.FinishRun(r1, RunOK, env, nil, nil); err == nil {
			t.Fatal("finishing a run twice succeeded")
		}
		if err := s.FinishRun(r1+100, RunOK, env, nil, nil); err == nil || fail.KindOf(err) != fail.KindInput {
			t.Fatalf("finishing a missing run: %v", err)
		}
		r2, _ := s.BeginRun(e.ID, "full", 0)
		if err := s.FinishRunErr(r2, RunInfra, evaluate.Environment{Target: "qemu"}, []byte("short"), nil, fail.Infraf("qemu hung")); err != nil {
			t.Fatal(err)
		}
		r3, _ := s.BeginRun(e.ID, "full", 0) // retry of the infra failure
		if err := s.FinishRun(r3, RunFailed, env, []byte("Kernel panic - not syncing"), nil); err != nil {
			t.Fatal(err)
		}
		r4, _ := s.BeginRun(e.ID, "voluntary", 1) // left running
		if err := s.FinishRun(r4, RunRunning, env, nil, nil); err == nil {
			t.Fatal("finishing with status running accepted")
		}
		if err := s.FinishRun(r4, RunStatus("bogus"), env, nil, nil); err == nil {
			t.Fatal("bogus status accepted")
		}
		bad := sampleSet(1, "")
		bad[0].Extra["x"] = math.NaN()
		if err := s.FinishRun(r4, RunOK, env, nil, bad); err == nil {
			t.Fatal("NaN extra accepted")
		}
		// The failed FinishRun rolled back: r4 is still running and can finish.
		fin, err := s.FinishedRuns(e.ID)
		if err != nil {
			t.Fatal(err)
		}
		want := map[evaluate.BootKey]bool{{Variant: "voluntary", Boot: 0}: true, {Variant: "full", Boot: 0}: true}
		if fmt.Sprint(fin) != fmt.Sprint(want) {
			t.Fatalf("FinishedRuns = %v, want %v", fin, want)
		}

		got, err := s.Console(r1)
		if err != nil || !bytes.Equal(got, console) {
			t.Fatalf("console round trip: %d bytes, %v", len(got), err)
		}
		var format string
		s.db.QueryRow(`SELECT console_format FROM runs WHERE id = ?`, r1).Scan(&format)
		if format != "gzip" {
			t.Fatalf("large console stored as %q", format)
		}
		if got, _ := s.Console(r2); string(got) != "short" {
			t.Fatalf("short console: %q", got)
		}
		if _, err := s.Console(9999); fail.KindOf(err) != fail.KindInput {
			t.Fatalf("console of missing run: %v", err)
		}

		samples, err := s.Samples(e.ID)
		if err != nil || len(samples) != 3 {
			t.Fatalf("samples: %d %v", len(samples), err)
		}
		want0 := sampleSet(3, "voluntary")[1]
		if samples[1].Variant != "voluntary" || samples[1].Value != want0.Value || samples[1].Iteration != 1 ||
			samples[1].Extra["iterations"] != 200000 || !samples[1].Time.Equal(want0.Time) || samples[1].Unit != "ns" {
			t.Fatalf("sample: %+v", samples[1])
		}
		// Measured in a deterministic boot (the run's environment).
		if want0.Deterministic || !samples[1].Deterministic {
			t.Fatalf("sample of a deterministic boot read back with Deterministic %v", samples[1].Deterministic)
		}
		// Every sample carries the build-id of the kernel its run showed.
		if samples[1].BuildID != env.BuildID {
			t.Fatalf("sample build-id %q, want the run's %q", samples[1].BuildID, env.BuildID)
		}

		runs, err := s.RunsOf(e.ID)
		if err != nil || len(runs) != 4 {
			t.Fatalf("runs: %+v %v", runs, err)
		}
		if runs[0].Samples != 3 || runs[0].Env.QEMUArgs[3] != "shift=0,sleep=off" || !runs[0].Env.Deterministic ||
			runs[0].ConsoleBytes != len(console) || runs[0].Finished.IsZero() || runs[0].Env.BuildID != env.BuildID || !runs[0].Env.Verified {
			t.Fatalf("run 0: %+v", runs[0])
		}
		if runs[1].Status != RunInfra || runs[1].ErrorKind != "infrastructure" || runs[1].ErrorText != "qemu hung" {
			t.Fatalf("run 1: %+v", runs[1])
		}
		if runs[3].Status != RunRunning || !runs[3].Finished.IsZero() {
			t.Fatalf("run 3: %+v", runs[3])
		}

		list, err := s.ListEvaluations()
		if err != nil || len(list) != 1 {
			t.Fatalf("list: %v %v", list, err)
		}
		if l := list[0]; l.Builds != 1 || l.Runs != 4 || l.FinishedRuns != 2 || l.Samples != 3 {
			t.Fatalf("counts: %+v", l)
		}
		if err := s.SetEvaluationStatus(e.ID, StatusDone); err != nil {
			t.Fatal(err)
		}
		if err := s.SetEvaluationStatus(777, StatusDone); err == nil {
			t.Fatal("status of a missing evaluation set")
		}
		if _, err := s.Evaluation(777); fail.KindOf(err) != fail.KindInput {
			t.Fatalf("missing evaluation: %v", err)
		}
	})
}

// The crash child: records runs in a loop, printing a line after each
// commit, until it is killed.
const crashEnv = "PATCHEVAL_STORE_CRASH_CHILD"

// samplesFor is how many samples run (variant, boot) carries, so that the
// parent can check completeness without talking to the child.
func samplesFor(boot int) int { return 1 + boot%7 }

var crashVariants = []string{"voluntary", "voluntary+dyn", "full"}

func TestMain(m *testing.M) {
	if mode := os.Getenv(crashEnv); mode != "" {
		os.Exit(crashChild(mode, os.Getenv(crashEnv+"_DB")))
	}
	os.Exit(testpg.Main(m))
}

func crashChild(mode, path string) int {
	s, err := Open(path)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 3
	}
	e, _, err := s.CreateOrResumeEvaluation("crash", EvaluationMeta{Pipeline: "crash-test"})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 3
	}
	out := bufio.NewWriter(os.Stdout)
	console := bytes.Repeat([]byte("[    0.000000] Linux version 6.1.0\n"), 100)
	for boot := 0; ; boot++ {
		for _, v := range crashVariants {
			id, err := s.BeginRun(e.ID, v, boot)
			if err != nil {
				fmt.Fprintln(os.Stderr, err)
				return 3
			}
			fmt.Fprintf(out, "begun %d %s %d\n", id, v, boot)
			out.Flush()
			if mode == "hang" && boot == 3 && v == "full" {
				time.Sleep(time.Hour) // killed here: a half-started run
			}
			env := evaluate.Environment{Target: "qemu", KernelRelease: "6.1.0-" + v, Deterministic: true}
			if err := s.FinishRun(id, RunOK, env, console, sampleSet(samplesFor(boot), v)); err != nil {
				fmt.Fprintln(os.Stderr, err)
				return 3
			}
			fmt.Fprintf(out, "finished %d %s %d\n", id, v, boot)
			out.Flush()
		}
	}
}

// runCrashChild starts the child and SIGKILLs it once stop says so;
// it returns the runs the child reported finished and begun.
func runCrashChild(t *testing.T, mode, path string, stop func(line string, finished int) bool) (finished, begun map[evaluate.BootKey]int64) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), crashEnv+"="+mode, crashEnv+"_DB="+path)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	finished, begun = map[evaluate.BootKey]int64{}, map[evaluate.BootKey]int64{}
	sc := bufio.NewScanner(stdout)
	killed := false
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) != 4 {
			t.Fatalf("child said %q", sc.Text())
		}
		id, _ := strconv.ParseInt(f[1], 10, 64)
		boot, _ := strconv.Atoi(f[3])
		k := evaluate.BootKey{Variant: f[2], Boot: boot}
		if f[0] == "finished" {
			finished[k] = id
		} else {
			begun[k] = id
		}
		// After the kill, what the child wrote before it died is read
		// to the end, so that every run it reported counts.
		if !killed && stop(sc.Text(), len(finished)) {
			if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
				t.Fatal(err)
			}
			killed = true
		}
	}
	err = cmd.Wait()
	if !killed {
		t.Fatalf("child ended before it was killed: %v\n%s", err, stderr.String())
	}
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
		t.Fatalf("child did not die of SIGKILL: %v\n%s", err, stderr.String())
	}
	return finished, begun
}

// checkAfterCrash reopens the database and checks that every run the child
// reported finished is there with all its samples, and that no run is
// finished without all of them.
func checkAfterCrash(t *testing.T, path string, finished map[evaluate.BootKey]int64) (*Store, *Evaluation, map[evaluate.BootKey]bool) {
	t.Helper()
	s, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	e, resumed, err := s.CreateOrResumeEvaluation("crash", EvaluationMeta{Pipeline: "crash-test"})
	if err != nil || !resumed {
		t.Fatalf("resume after crash: %v resumed=%v", err, resumed)
	}
	fin, err := s.FinishedRuns(e.ID)
	if err != nil {
		t.Fatal(err)
	}
	for k := range finished {
		if !fin[k] {
			t.Errorf("run %v was reported finished before the kill but is not in the resume set", k)
		}
	}
	// At most one run may have committed without the child getting to
	// print it (every line it printed was read, also after the kill).
	if extra := len(fin) - len(finished); extra > 1 {
		t.Errorf("resume set has %d runs, the child reported %d finished", len(fin), len(finished))
	}
	runs, err := s.RunsOf(e.ID)
	if err != nil {
		t.Fatal(err)
	}
	perKey := map[evaluate.BootKey]int{}
	for _, r := range runs {
		k := evaluate.BootKey{Variant: r.Variant, Boot: r.Boot}
		switch r.Status {
		case RunOK:
			if r.Samples != samplesFor(r.Boot) {
				t.Errorf("finished run %v has %d samples, want %d", k, r.Samples, samplesFor(r.Boot))
			}
			if r.Env.KernelRelease != "6.1.0-"+r.Variant || r.ConsoleBytes == 0 {
				t.Errorf("finished run %v lost its environment or console: %+v", k, r)
			}
			perKey[k]++
		case RunRunning:
			if r.Samples != 0 {
				t.Errorf("half-started run %v has %d samples", k, r.Samples)
			}
			if fin[k] {
				t.Errorf("half-started run %v counted as finished", k)
			}
		default:
			t.Errorf("run %v has status %q", k, r.Status)
		}
	}
	for k, n := range perKey {
		if n != 1 {
			t.Errorf("run %v finished %d times", k, n)
		}
	}
	samples, err := s.Samples(e.ID)
	if err != nil {
		t.Fatal(err)
	}
	wantSamples := 0
	for k := range fin {
		wantSamples += samplesFor(k.Boot)
	}
	if len(samples) != wantSamples {
		t.Errorf("Samples: %d, want %d from %d finished runs", len(samples), wantSamples, len(fin))
	}
	return s, e, fin
}

// TestCrashSafetySIGKILL kills a writing process (SIGKILL) on each
// database: every run it reported finished is there with all of its
// samples; a half-started run is never counted.
func TestCrashSafetySIGKILL(t *testing.T) {
	eachDB(t, func(t *testing.T, db string) { testCrashSafety(t, db) })
}

// fresh is a new database of db's kind: a file beside it, or another
// database on the same Postgres.
func fresh(t *testing.T, db, name string) string {
	if IsPostgres(db) {
		return testpg.URL(t)
	}
	return filepath.Join(t.TempDir(), name)
}

func testCrashSafety(t *testing.T, db string) {
	t.Run("kill-anywhere", func(t *testing.T) {
		// Killed at an arbitrary point of a fast loop, often inside a
		// FinishRun transaction. Repeat a few times at different points.
		for i, n := range []int{5, 17, 40} {
			path := fresh(t, db, fmt.Sprintf("crash%d.db", i))
			finished, _ := runCrashChild(t, "loop", path, func(_ string, fin int) bool { return fin >= n })
			checkAfterCrash(t, path, finished)
		}
	})
	t.Run("half-started", func(t *testing.T) {
		path := fresh(t, db, "hang.db")
		finished, begun := runCrashChild(t, "hang", path, func(line string, _ int) bool {
			return strings.HasPrefix(line, "begun") && strings.HasSuffix(line, " full 3")
		})
		s, e, fin := checkAfterCrash(t, path, finished)
		half := evaluate.BootKey{Variant: "full", Boot: 3}
		if fin[half] {
			t.Fatal("the half-started run full#3 is in the resume set")
		}
		if len(fin) != len(finished) || len(fin) != 3*3+2 {
			t.Fatalf("resume set %v, child finished %v", fin, finished)
		}
		// Resume: redo only what is not finished; the redo of full#3 gets a
		// new run id and the stale "running" row stays out of the results.
		id, err := s.BeginRun(e.ID, half.Variant, half.Boot)
		if err != nil || id == begun[half] {
			t.Fatalf("rerun id %d (stale %d): %v", id, begun[half], err)
		}
		if err := s.FinishRun(id, RunOK, evaluate.Environment{Target: "qemu"}, nil, sampleSet(2, "")); err != nil {
			t.Fatal(err)
		}
		fin2, _ := s.FinishedRuns(e.ID)
		if !fin2[half] || len(fin2) != len(fin)+1 {
			t.Fatalf("after redo: %v", fin2)
		}
	})
}

func TestConcurrentReaderWhileWriting(t *testing.T) {
	eachDB(t, func(t *testing.T, db string) {
		_, path := openTemp(t, db)
		w, err := Open(path)
		if err != nil {
			t.Fatal(err)
		}
		defer w.Close()
		r, err := Open(path)
		if err != nil {
			t.Fatal(err)
		}
		defer r.Close()
		e, _, _ := w.CreateOrResumeEvaluation("c", EvaluationMeta{Pipeline: "p"})
		done := make(chan error)
		go func() {
			for i := 0; i < 50; i++ {
				id, err := w.BeginRun(e.ID, "v", i)
				if err == nil {
					err = w.FinishRun(id, RunOK, evaluate.Environment{}, nil, sampleSet(3, ""))
				}
				if err != nil {
					done <- err
					return
				}
			}
			done <- nil
		}()
		for i := 0; i < 50; i++ {
			if _, err := r.Samples(e.ID); err != nil && !errors.Is(err, sql.ErrNoRows) {
				t.Fatal(err)
			}
		}
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		if got, _ := r.Samples(e.ID); len(got) != 150 {
			t.Fatalf("reader sees %d samples", len(got))
		}
	})
}
