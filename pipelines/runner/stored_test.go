package runner

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/patcheval/patcheval/build/buildtest"
	"github.com/patcheval/patcheval/evaluate/guest"
	"github.com/patcheval/patcheval/internal/testenv"
	"github.com/patcheval/patcheval/mbox"
	"github.com/patcheval/patcheval/pipelines"
	"github.com/patcheval/patcheval/pipelines/store"
	"github.com/patcheval/patcheval/series"
	"github.com/patcheval/patcheval/series/recipients"
)

// sameValue says where a and b differ ("" when they do not): every
// exported field, nil and empty told apart, times by instant and offset.
func sameValue(a, b reflect.Value, path string) string {
	if a.Type() == reflect.TypeOf(time.Time{}) {
		ta, tb := a.Interface().(time.Time), b.Interface().(time.Time)
		_, oa := ta.Zone()
		_, ob := tb.Zone()
		if !ta.Equal(tb) || oa != ob {
			return fmt.Sprintf("%s: %v, %v", path, ta, tb)
		}
		return ""
	}
	switch a.Kind() {
	case reflect.Pointer, reflect.Interface:
		if a.IsNil() || b.IsNil() {
			if a.IsNil() != b.IsNil() {
				return fmt.Sprintf("%s: nil %v, %v", path, a.IsNil(), b.IsNil())
			}
			return ""
		}
		return sameValue(a.Elem(), b.Elem(), path)
	case reflect.Slice, reflect.Map:
		if a.IsNil() != b.IsNil() || a.Len() != b.Len() {
			return fmt.Sprintf("%s: nil %v len %d, nil %v len %d", path, a.IsNil(), a.Len(), b.IsNil(), b.Len())
		}
		if a.Kind() == reflect.Map {
			for it := a.MapRange(); it.Next(); {
				if d := sameValue(it.Value(), b.MapIndex(it.Key()), fmt.Sprintf("%s[%v]", path, it.Key())); d != "" {
					return d
				}
			}
			return ""
		}
		for i := range a.Len() {
			if d := sameValue(a.Index(i), b.Index(i), fmt.Sprintf("%s[%d]", path, i)); d != "" {
				return d
			}
		}
		return ""
	case reflect.Struct:
		for i := range a.NumField() {
			if f := a.Type().Field(i); f.IsExported() {
				if d := sameValue(a.Field(i), b.Field(i), path+"."+f.Name); d != "" {
					return d
				}
			}
		}
		return ""
	}
	if !reflect.DeepEqual(a.Interface(), b.Interface()) {
		return fmt.Sprintf("%s: %v, %v", path, a.Interface(), b.Interface())
	}
	return ""
}

// TestStoredSeriesRoundTrip: every thread of the test data, resolved,
// stored and read back, is the series resolved (the messages' raw text,
// bodies and headers, the diffs and commit messages included), with the
// thread's numbers.
func TestStoredSeriesRoundTrip(t *testing.T) {
	files, _ := filepath.Glob(filepath.Join(testenv.ThreadsDir(), "*.mbox"))
	shapes, _ := filepath.Glob(filepath.Join(testenv.ModuleRoot(), "series", "testdata", "*.mbox"))
	files = append(files, shapes...)
	if len(files) < 8 {
		t.Fatalf("%d threads in the test data", len(files))
	}
	resolved := 0
	for _, f := range files {
		r, err := resolveSeries(context.Background(), inputs{Options: Options{Mbox: mustRead(t, f), ThreadSource: f}})
		if err != nil {
			t.Logf("%s: %v (not a series)", f, err)
			continue
		}
		resolved++
		if f == testenv.BackportMbox() {
			// What the test data lacks: an attachment, text below the cut.
			m := r.series.Patches[0].Msg
			m.Attachments = append(m.Attachments, mbox.Attachment{Filename: "x.bin", ContentType: "application/octet-stream", Data: []byte{0, 0xff, 'x'}})
			r.series.Patches[0].BelowCut = "v2: fixed\n"
		}
		data, err := r.marshal()
		if err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		back, err := unmarshalSeries(data)
		if err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		if d := sameValue(reflect.ValueOf(r.series), reflect.ValueOf(back.series), "series"); d != "" {
			t.Errorf("%s: the stored series differs: %s", f, d)
		}
		if d := sameValue(reflect.ValueOf(r.thread), reflect.ValueOf(back.thread), "thread"); d != "" {
			t.Errorf("%s: the stored thread numbers differ: %s", f, d)
		}
		if strings.Contains(f, "ppc-dynamic-preempt-v4") && len(back.thread) == 0 {
			t.Errorf("%s: no thread numbers stored", f)
		}
	}
	if resolved < 6 {
		t.Errorf("%d of %d threads resolved", resolved, len(files))
	}
	// What JSON cannot carry as it is is not stored (the stages resolve
	// the thread then).
	r, err := resolveSeries(context.Background(), inputs{Options: Options{Mbox: backportMbox(t)}})
	if err != nil {
		t.Fatal(err)
	}
	r.series.Patches[0].Diff += "\xff\n"
	if _, err := r.marshal(); err == nil {
		t.Error("a diff that is not UTF-8 was stored")
	}
}

// TestStoredSeriesCarriesEveryField: every field of the series' types
// that their JSON leaves out is one the stored form carries (a new one
// must be added to stored.go).
func TestStoredSeriesCarriesEveryField(t *testing.T) {
	carried := map[string]bool{"Series.Cover": true, "Patch.Msg": true, "Patch.Message": true, "Patch.Diff": true,
		"Patch.BelowCut": true, "Message.Body": true, "Message.Header": true, "Message.Raw": true, "Attachment.Data": true}
	seen := map[reflect.Type]bool{}
	var walk func(reflect.Type)
	walk = func(ty reflect.Type) {
		switch ty.Kind() {
		case reflect.Pointer, reflect.Slice, reflect.Array, reflect.Map:
			walk(ty.Elem())
			return
		case reflect.Struct:
		default:
			return
		}
		if seen[ty] || ty == reflect.TypeOf(time.Time{}) {
			return
		}
		seen[ty] = true
		for i := range ty.NumField() {
			f := ty.Field(i)
			if !f.IsExported() {
				continue
			}
			if tag := f.Tag.Get("json"); tag == "-" && !carried[ty.Name()+"."+f.Name] {
				t.Errorf("%s.%s is left out of the JSON and not carried by the stored series", ty.Name(), f.Name)
			}
			walk(f.Type)
		}
	}
	walk(reflect.TypeOf(series.Series{}))
	if !seen[reflect.TypeOf(mbox.Attachment{})] {
		t.Error("the walk did not reach mbox.Attachment")
	}
}

// countResolves counts the series resolutions (resolve, as
// CountResolutions does for other packages' tests) until the test ends.
func countResolves(t *testing.T) *int {
	n := new(int)
	orig := resolve
	resolve = func(ctx context.Context, th *mbox.Thread, o series.Options) (*series.Series, error) {
		*n++
		return orig(ctx, th, o)
	}
	t.Cleanup(func() { resolve = orig })
	return n
}

// runStages takes evaluation id's stages one at a time, each with the
// database opened afresh as a stage in its own process would, asking
// GraphOf after each as the service does, and reports into outDir.
func runStages(ctx context.Context, t *testing.T, db string, id int64, outDir string) *Outcome {
	t.Helper()
	graph := func() {
		if _, err := GraphOf(stageEnv(t, db).Store, id); err != nil {
			t.Fatalf("graph: %v", err)
		}
	}
	if err := Apply(ctx, stageEnv(t, db), id); err != nil {
		t.Fatalf("apply: %v", err)
	}
	graph()
	keys, err := Builds(ctx, stageEnv(t, db), id)
	if err != nil || len(keys) == 0 {
		t.Fatalf("builds: %v %v", keys, err)
	}
	if failed, err := Configure(ctx, stageEnv(t, db), id); err != nil || len(failed) > 0 {
		t.Fatalf("configure: %v %v", failed, err)
	}
	for _, k := range keys {
		if err := Build(ctx, stageEnv(t, db), id, k); err != nil {
			t.Fatalf("build %s: %v", k, err)
		}
		graph()
	}
	boots, err := Boots(ctx, stageEnv(t, db), id)
	if err != nil {
		t.Fatalf("boots: %v", err)
	}
	for _, b := range boots {
		if err := Boot(ctx, stageEnv(t, db), id, b); err != nil {
			t.Fatalf("boot %v: %v", b, err)
		}
		graph()
	}
	if _, err := More(ctx, stageEnv(t, db), id); err != nil {
		t.Fatalf("more: %v", err)
	}
	out, err := Report(ctx, stageEnv(t, db), id, outDir)
	if err != nil {
		t.Fatalf("report: %v", err)
	}
	graph()
	return out
}

// setThread replaces evaluation id's stored thread with mbox (its inputs
// as they are).
func setThread(t *testing.T, st *store.Store, id int64, mbox []byte) {
	t.Helper()
	in, _, err := st.Inputs(id)
	if err != nil {
		t.Fatal(err)
	}
	if err := st.Tx(context.Background(), func(tx *store.Tx) error { return st.SetInputsTx(tx, id, in, mbox) }); err != nil {
		t.Fatal(err)
	}
}

// forgetSeries makes evaluation id one stored before the resolved
// series: its thread only.
func forgetSeries(t *testing.T, st *store.Store, id int64) {
	t.Helper()
	if err := st.Tx(context.Background(), func(tx *store.Tx) error { return st.SetResolvedSeriesTx(tx, id, nil) }); err != nil {
		t.Fatal(err)
	}
}

// TestSeriesResolvedOnce: an evaluation's series is resolved once, when
// it is submitted; every later stage (apply, configure, build, plan,
// boot, more, report, the graph, the reproducer's Load) reads the stored
// series: with the stored thread destroyed after Submit they all still
// work, and the report and the reply draft are those of the series
// resolved from the thread (an evaluation stored before the resolved
// series, whose stages resolve the thread again as they did: that one
// works too, from apply on). The kernels are the suite's (cached).
func TestSeriesResolvedOnce(t *testing.T) {
	repo := buildtest.Repo(t)
	p := builtin(t, "ppc-preempt-dynamic")
	var loops []pipelines.Benchmark // as TestStagesEqualRun: the loops only
	for _, b := range p.Benchmarks {
		if !guest.IsTool(b.Name) {
			loops = append(loops, b)
		}
	}
	p.Benchmarks = loops
	thread := backportMbox(t)
	// A bot's addressing (the list takes every result) reads the
	// patches' raw mail and the tree's MAINTAINERS; PerPatch has GraphOf
	// read the series.
	o := Options{Mbox: thread, Tree: repo, Boots: 1, Now: time.Date(2026, 11, 3, 10, 0, 0, 0, time.UTC), PerPatch: true,
		From:       mbox.Address{Name: "Kernel Tester", Email: "tester@example.org"},
		Recipients: &recipients.Policy{List: "linuxppc-dev@lists.ozlabs.org", Rules: []recipients.Rule{{Match: "linuxppc-dev@*", Mode: recipients.Every}}}}
	ctx, cancel := context.WithTimeout(context.Background(), 45*time.Minute)
	defer cancel()
	resolves := countResolves(t)

	db := filepath.Join(t.TempDir(), "patcheval.db")
	id, _, err := Submit(ctx, stageEnv(t, db), p, o)
	if err != nil {
		t.Fatal(err)
	}
	if *resolves != 1 {
		t.Fatalf("Submit resolved the series %d times, want once", *resolves)
	}
	setThread(t, stageEnv(t, db).Store, id, []byte("From nobody\nSubject: not the thread\n\nnothing\n"))
	stored := runStages(ctx, t, db, id, t.TempDir())
	in, err := Load(stageEnv(t, db).Store, id)
	if err != nil || in.Series == nil || len(in.Series.Patches) != 1 || in.Series.Cover == nil {
		t.Fatalf("load: %v %+v", err, in)
	}
	if *resolves != 1 {
		t.Errorf("the series was resolved %d times in the evaluation, want once (when it was submitted)", *resolves)
	}
	if stored.Mail == nil || stored.Report.Series.Patches != 1 {
		t.Fatalf("no reply draft or no series in the report: %+v", stored)
	}

	// The same evaluation's report from the thread, as an evaluation
	// stored before the resolved series makes it: the same report, reply
	// and addressing.
	st := stageEnv(t, db).Store
	setThread(t, st, id, thread)
	forgetSeries(t, st, id)
	before := *resolves
	resolved, err := Report(ctx, stageEnv(t, db), id, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if *resolves == before {
		t.Error("the report of an evaluation without a stored series did not resolve its thread")
	}
	if a, b := comparable(t, stored.Report), comparable(t, resolved.Report); a != b {
		t.Errorf("the report from the stored series differs from the one from the thread:\n%s\nvs\n%s", a, b)
	}
	for _, f := range []string{"reply.eml", "kcidb.json"} {
		a, errA := os.ReadFile(filepath.Join(filepath.Dir(stored.Draft), f))
		b, errB := os.ReadFile(filepath.Join(filepath.Dir(resolved.Draft), f))
		if errA != nil || errB != nil || draftText(a) != draftText(b) {
			t.Errorf("%s differs (%v, %v):\n%s\nvs\n%s", f, errA, errB, a, b)
		}
	}
	if a, b := jsonOf(t, stored.Addressing), jsonOf(t, resolved.Addressing); a != b {
		t.Errorf("addressing %s, from the thread %s", a, b)
	}
	again, err := Load(st, id)
	if err == nil && again.Series != nil {
		// Resolved again with the version Submit chose: "v4 requested"
		// (the stored series says why Submit chose it).
		again.Series.Reason = in.Series.Reason
	}
	if err != nil || sameValue(reflect.ValueOf(in.Series), reflect.ValueOf(again.Series), "series") != "" {
		t.Errorf("Load from the thread: %v; differs: %s", err, sameValue(reflect.ValueOf(in.Series), reflect.ValueOf(again.Series), "series"))
	}

	// An evaluation stored before the resolved series, from apply on.
	old := filepath.Join(t.TempDir(), "patcheval.db")
	oid, _, err := Submit(ctx, stageEnv(t, old), p, o)
	if err != nil {
		t.Fatal(err)
	}
	forgetSeries(t, stageEnv(t, old).Store, oid)
	before = *resolves
	oldOut := runStages(ctx, t, old, oid, t.TempDir())
	t.Logf("resolutions: %d in the evaluation with its series stored, %d in the one without", 1, *resolves-before+1)
	if *resolves-before < 2 {
		t.Errorf("the stages of an evaluation without a stored series resolved its thread %d times", *resolves-before)
	}
	if a, b := jsonOf(t, stored.Report.Series), jsonOf(t, oldOut.Report.Series); a != b {
		t.Errorf("series in the report %s, without a stored series %s", a, b)
	}
	if oldOut.Mail == nil || oldOut.Mail.Subject != stored.Mail.Subject || jsonOf(t, oldOut.Addressing) != jsonOf(t, stored.Addressing) {
		t.Errorf("reply without a stored series %+v, with %+v", oldOut.Mail, stored.Mail)
	}
}

var (
	draftID    = regexp.MustCompile(`\d{14}\.[0-9a-f]{16}@`)
	spaces     = regexp.MustCompile(`\s+`)
	reportTook = regexp.MustCompile(`report[0-9.]+[mµn]?s;total[0-9.hms]+`)
)

// draftText is a reply draft (or any output) without what differs
// between two reports of the same evaluation: the draft's random
// Message-ID and the report stage's own duration (and the line breaks
// its length moves).
func draftText(b []byte) string {
	s := draftID.ReplaceAllString(string(b), "ID@")
	s = spaces.ReplaceAllString(s, "")
	return reportTook.ReplaceAllString(s, "report;total")
}

func jsonOf(t *testing.T, v any) string {
	t.Helper()
	data, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}
