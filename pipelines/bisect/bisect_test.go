package bisect

import (
	"context"
	"fmt"
	"math/rand"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/patcheval/patcheval/evaluate/report"
	"github.com/patcheval/patcheval/internal/fail"
	"github.com/patcheval/patcheval/internal/testgit"
	"github.com/patcheval/patcheval/mbox"
)

// treeMeasurer measures a commit by reading bench/getppid from its tree
// in a real git repository ("BROKEN" = the commit does not build): the
// search, skip and confirmation logic is tested here on every culprit
// position; the kernel build and QEMU boot are the e2e test's.
type treeMeasurer struct {
	repo  string
	noise float64 // relative noise per sample (0: deterministic)
	rng   *rand.Rand
	mu    sync.Mutex
	built map[string]bool
	calls int
}

func (m *treeMeasurer) Measure(ctx context.Context, commit string, boots int) (*Measurement, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.calls++
	s, err := testgit.Blob(m.repo, commit, "bench/getppid")
	if err != nil {
		return nil, fail.Infraf("reading %s: %v", commit, err)
	}
	out := &Measurement{Unit: "ns", Built: !m.built[commit]}
	m.built[commit] = true
	if strings.TrimSpace(s) == "BROKEN" {
		return out, fail.Failedf("kernel/sys.c:1: error: expected ';' before '}' token")
	}
	v, _ := strconv.ParseFloat(strings.TrimSpace(s), 64)
	for i := 0; i < boots; i++ {
		x := v
		if m.noise > 0 {
			x *= 1 + m.noise*m.rng.NormFloat64()
		}
		out.Values = append(out.Values, x)
	}
	return out, nil
}

// history makes good + n commits; values[i] is commit i's measurement.
func history(t *testing.T, values []string) (repo, good, bad string, commits []string) {
	repo = testgit.InitBare(t, filepath.Join(t.TempDir(), "r.git"))
	good = testgit.Commit(t, repo, "", "base", "2026-11-02T09:00:00Z", map[string]string{"bench/getppid": "1000\n"})
	parent := good
	for i, v := range values {
		parent = testgit.Commit(t, repo, parent, fmt.Sprintf("sys: change %d", i), fmt.Sprintf("2026-11-02T10:%02d:00Z", i),
			map[string]string{"bench/getppid": v + "\n", "kernel/sys.c": fmt.Sprintf("/* %d */\n", i)})
		commits = append(commits, parent)
	}
	return repo, good, parent, commits
}

func values(n, culprit int, broken ...int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = "1000"
		if i >= culprit {
			out[i] = "1250"
		}
	}
	for _, b := range broken {
		out[b] = "BROKEN"
	}
	return out
}

func TestEveryCulpritPositionWithinBound(t *testing.T) {
	const n = 24
	repo, good, bad, commits := history(t, values(n, 0))
	for culprit := 0; culprit < n; culprit++ {
		// Same repository, different culprit: a measurer that maps
		// commits to values by position.
		vals := values(n, culprit)
		m := &posMeasurer{commits: commits, good: good, vals: vals, built: map[string]bool{}}
		res, err := Run(context.Background(), Options{Repo: repo, Good: good, Bad: bad, Measurer: m,
			Benchmark: "getppid", Metric: "ns/op", Deterministic: true})
		if err != nil {
			t.Fatalf("culprit %d: %v", culprit, err)
		}
		if res.Status != Found || res.Culprit == nil || res.Culprit.Hash != commits[culprit] || !res.Confirmed {
			t.Fatalf("culprit %d: %+v", culprit, res)
		}
		if res.Builds > Bound(n) || res.Bound != 7 {
			t.Fatalf("culprit %d: %d builds, bound %d", culprit, res.Builds, res.Bound)
		}
		if res.Change < 24.9 || res.Change > 25.1 {
			t.Fatalf("culprit %d: change %.2f%%", culprit, res.Change)
		}
	}
}

// posMeasurer gives commit i the value vals[i] (the good end 1000).
type posMeasurer struct {
	commits []string
	good    string
	vals    []string
	built   map[string]bool
}

func (m *posMeasurer) Measure(ctx context.Context, commit string, boots int) (*Measurement, error) {
	v := "1000"
	for i, c := range m.commits {
		if c == commit {
			v = m.vals[i]
		}
	}
	out := &Measurement{Built: !m.built[commit]}
	m.built[commit] = true
	if v == "BROKEN" {
		return out, fail.Failedf("does not build")
	}
	x, _ := strconv.ParseFloat(v, 64)
	for i := 0; i < boots; i++ {
		out.Values = append(out.Values, x)
	}
	return out, nil
}

func TestBrokenCommitIsSkippedAndTheAnswerStillRight(t *testing.T) {
	// 24 commits, the first midpoint (index 11) does not build (fixed in
	// 12), the culprit is 15.
	repo, good, bad, commits := history(t, values(24, 15, 11))
	m := &treeMeasurer{repo: repo, built: map[string]bool{}}
	res, err := Run(context.Background(), Options{Repo: repo, Good: good, Bad: bad, Measurer: m,
		Benchmark: "getppid", Metric: "ns/op", Deterministic: true, Logf: t.Logf})
	if err != nil {
		t.Fatal(err)
	}
	if res.Culprit == nil || res.Culprit.Hash != commits[15] || !res.Confirmed || res.Skipped != 1 {
		t.Fatalf("result %+v", res)
	}
	if res.Culprit.Subject != "sys: change 15" || res.Parent.Hash != commits[14] {
		t.Fatalf("culprit %+v parent %+v", res.Culprit, res.Parent)
	}
	var skips []string
	for _, s := range res.Steps {
		if s.Verdict == Skip {
			skips = append(skips, s.Commit.Subject)
		}
	}
	if len(skips) != 1 || skips[0] != "sys: change 11" {
		t.Fatalf("skipped %v", skips)
	}
	if res.Builds > Bound(24) {
		t.Fatalf("%d builds > ceil(log2(24))+2 = %d", res.Builds, Bound(24))
	}
}

func TestSkipsAroundTheCulpritLeaveCandidates(t *testing.T) {
	// The culprit's parent does not build: culprit and parent cannot be
	// told apart, the result says which two.
	repo, good, bad, commits := history(t, values(8, 5, 4))
	m := &treeMeasurer{repo: repo, built: map[string]bool{}}
	res, err := Run(context.Background(), Options{Repo: repo, Good: good, Bad: bad, Measurer: m,
		Benchmark: "getppid", Metric: "ns/op", Deterministic: true})
	if err != nil {
		t.Fatal(err)
	}
	if res.Status != Ambiguous || res.Culprit != nil || len(res.Candidates) != 2 ||
		res.Candidates[0].Hash != commits[4] || res.Candidates[1].Hash != commits[5] {
		t.Fatalf("result %+v", res)
	}
}

func TestNoisyMeasurementsBootMoreUntilClear(t *testing.T) {
	repo, good, bad, commits := history(t, values(16, 9))
	m := &treeMeasurer{repo: repo, built: map[string]bool{}, noise: 0.03, rng: rand.New(rand.NewSource(1))}
	res, err := Run(context.Background(), Options{Repo: repo, Good: good, Bad: bad, Measurer: m,
		Benchmark: "getppid", Metric: "ns/op", MinBoots: 3, MaxBoots: 10, Logf: t.Logf})
	if err != nil {
		t.Fatal(err)
	}
	if res.Culprit == nil || res.Culprit.Hash != commits[9] || !res.Confirmed {
		t.Fatalf("result %+v", res)
	}
	if res.CILow <= 0 || res.CIHigh <= res.CILow {
		t.Fatalf("change %.1f%% CI [%.1f, %.1f]", res.Change, res.CILow, res.CIHigh)
	}
}

func TestBadRangesAreInputErrors(t *testing.T) {
	repo, good, bad, commits := history(t, values(6, 99)) // no regression
	m := &treeMeasurer{repo: repo, built: map[string]bool{}}
	for name, o := range map[string]Options{
		"no regression":  {Good: good, Bad: bad},
		"reversed":       {Good: bad, Bad: good},
		"same":           {Good: bad, Bad: bad},
		"unknown ref":    {Good: "v9.9", Bad: bad},
		"improvement ok": {Good: good, Bad: commits[2], HigherIsBetter: true},
	} {
		o.Repo, o.Measurer, o.Benchmark, o.Metric, o.Deterministic = repo, m, "getppid", "ns/op", true
		_, err := Run(context.Background(), o)
		if err == nil || fail.KindOf(err) != fail.KindInput {
			t.Errorf("%s: %v, want a bad-input error", name, err)
		}
	}
}

func TestReportNamesCulpritInEveryFormat(t *testing.T) {
	repo, good, bad, commits := history(t, values(24, 15, 11))
	m := &treeMeasurer{repo: repo, built: map[string]bool{}}
	res, err := Run(context.Background(), Options{Repo: repo, Good: good, Bad: bad, Measurer: m,
		Benchmark: "getppid", Metric: "ns/op", Deterministic: true})
	if err != nil {
		t.Fatal(err)
	}
	c := Context{Tree: "http://127.0.0.1/linux.git", Pipeline: "x86-getppid", Variant: "base", Arch: "x86_64"}
	var txt, md, js, kc strings.Builder
	for _, f := range []func() error{
		func() error { return WriteText(&txt, res, c) }, func() error { return WriteMarkdown(&md, res, c) },
		func() error { return WriteJSON(&js, res, c) }, func() error { return WriteKCIDB(&kc, res, c) },
	} {
		if err := f(); err != nil {
			t.Fatal(err)
		}
	}
	t.Logf("\n%s", txt.String())
	for name, s := range map[string]string{"text": txt.String(), "markdown": md.String(), "json": js.String(), "kcidb": kc.String()} {
		if !strings.Contains(s, commits[15][:12]) || !strings.Contains(s, "+25.0%") && name != "json" && name != "kcidb" {
			t.Errorf("%s report does not name the culprit and the change:\n%s", name, s)
		}
	}
	for _, want := range []string{"a +25.0% regression of getppid ns/op", "sys: change 15", "builds used: 7 (ceil(log2(24)) + 2 = 7)",
		"skip", "does not build", "confirmed: the parent measured good"} {
		if !strings.Contains(txt.String(), want) {
			t.Errorf("text report lacks %q", want)
		}
	}
	if !strings.Contains(kc.String(), `"issue_id"`) || !strings.Contains(kc.String(), `"code": true`) {
		t.Errorf("kcidb: no issue/incident:\n%s", kc.String())
	}
	d, err := Draft(res, c, mbox.Address{Name: "Tester", Email: "tester@example.org"}, time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC))
	if err != nil {
		t.Fatal(err)
	}
	var eml strings.Builder
	if err := report.WriteDraft(&eml, *d); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(eml.String(), "To: Patch Author <author@patcheval.invalid>") || !strings.Contains(eml.String(), "Hi Patch,") {
		t.Fatalf("draft:\n%s", eml.String())
	}
}

// TestResumeReplaysRecordsAndMeasuresEachStepOnce bisects one measurement
// at a time, as the service's jobs do: every Resume replays the records so
// far and asks for the next one. The steps, the culprit and the counts are
// those of an uninterrupted Run (also with a skipped commit and noisy
// values that need more boots), and no measurement is asked for twice.
func TestResumeReplaysRecordsAndMeasuresEachStepOnce(t *testing.T) {
	for _, tc := range []struct {
		name  string
		vals  []string
		noise float64
	}{{"deterministic with a skip", values(24, 15, 11), 0}, {"noisy", values(16, 9), 0.03}} {
		t.Run(tc.name, func(t *testing.T) {
			repo, good, bad, _ := history(t, tc.vals)
			o := Options{Repo: repo, Good: good, Bad: bad, Benchmark: "getppid", Metric: "ns/op",
				Deterministic: tc.noise == 0, MinBoots: 3, MaxBoots: 10}
			direct := o
			direct.Measurer = &treeMeasurer{repo: repo, built: map[string]bool{}, noise: tc.noise, rng: rand.New(rand.NewSource(1))}
			want, err := Run(context.Background(), direct)
			if err != nil {
				t.Fatal(err)
			}
			m := &treeMeasurer{repo: repo, built: map[string]bool{}, noise: tc.noise, rng: rand.New(rand.NewSource(1))}
			started := time.Now()
			var recs []Record
			asked := map[Need]bool{}
			var got *Result
			for i := 0; ; i++ {
				res, need, err := Resume(context.Background(), o, recs, started)
				if err != nil {
					t.Fatalf("resume %d: %v", i, err)
				}
				if need == nil {
					got = res
					break
				}
				if asked[*need] {
					t.Fatalf("measurement %+v asked for twice", *need)
				}
				asked[*need] = true
				rec, err := Measure(context.Background(), m, *need)
				if err != nil {
					t.Fatal(err)
				}
				recs = append(recs, rec)
			}
			if got.Status != want.Status || got.Culprit == nil || got.Culprit.Hash != want.Culprit.Hash || got.Confirmed != want.Confirmed ||
				got.Builds != want.Builds || got.Boots != want.Boots || got.Skipped != want.Skipped || len(got.Steps) != len(want.Steps) {
				t.Fatalf("resumed %+v\nwant %+v", got, want)
			}
			if m.calls != direct.Measurer.(*treeMeasurer).calls || len(recs) != m.calls {
				t.Fatalf("%d measurements resumed, %d direct, %d records", m.calls, direct.Measurer.(*treeMeasurer).calls, len(recs))
			}
			// A record that does not fit the search (the options changed)
			// is an error, not a silent re-measurement.
			recs[1].Commit = recs[0].Commit
			if _, _, err := Resume(context.Background(), o, recs, started); fail.KindOf(err) != fail.KindInput {
				t.Fatalf("diverging records: %v, want a bad-input error", err)
			}
		})
	}
}
