package bisect

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand"
	"path/filepath"
	"slices"
	"sort"
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
		parent = testgit.Commit(t, repo, parent, fmt.Sprintf("sys: change %d", i), fmt.Sprintf("2026-11-02T%02d:%02d:00Z", 10+i/60, i%60),
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

// kcidbIssueProps are the issue and incident properties of KCIDB I/O
// v5.3 (kernelci/kcidb-io kcidb_io/schema: objects allow no other
// properties; required ones second).
var kcidbIssueProps = map[string][2][]string{
	"issues": {{"_timestamp", "id", "version", "origin", "report_url", "report_subject", "culprit", "build_valid",
		"test_status", "comment", "misc"}, {"id", "version", "origin"}},
	"incidents": {{"_timestamp", "id", "origin", "issue_id", "issue_version", "build_id", "test_id", "present",
		"comment", "misc"}, {"id", "origin", "issue_id", "issue_version"}},
}

// TestDraftCopiesTheListsAndKCIDBHasTheIssue: the reply draft goes to
// the culprit's author, copied to the lists the culprit's MAINTAINERS
// names for the files it changes (not those of files it leaves alone),
// in reply to the message its Link: names; the KCIDB data carries the
// tree URL and an issue with its incident on the culprit's failing test,
// with only the properties KCIDB v5.3 allows.
func TestDraftCopiesTheListsAndKCIDBHasTheIssue(t *testing.T) {
	repo := testgit.InitBare(t, filepath.Join(t.TempDir(), "r.git"))
	const maint = "SYSTEM CALLS\nM:\tSys Maintainer <sys@example.org>\nL:\tlinux-kernel@vger.kernel.org\nS:\tMaintained\nF:\tkernel/\n\n" +
		"MEMORY MANAGEMENT\nM:\tMm Maintainer <mm@example.org>\nL:\tlinux-mm@kvack.org\nS:\tMaintained\nF:\tmm/\n"
	good := testgit.Commit(t, repo, "", "base", "2026-11-02T09:00:00Z", map[string]string{"MAINTAINERS": maint,
		"bench/getppid": "1000\n", "kernel/sys.c": "/* 0 */\n", "mm/mmap.c": "/* 0 */\n"})
	parent := good
	var commits []string
	for i := 0; i < 8; i++ {
		v, msg := "1000", fmt.Sprintf("mm: change %d", i)
		files := map[string]string{"mm/mmap.c": fmt.Sprintf("/* %d */\n", i)}
		if i >= 5 {
			v = "1250"
		}
		if i == 5 {
			msg = "sys: slow down getppid\n\nLink: https://lore.kernel.org/r/20261102.1234-1-dev@example.org"
			files = map[string]string{"kernel/sys.c": "/* slow */\n"}
		}
		files["bench/getppid"] = v + "\n"
		parent = testgit.Commit(t, repo, parent, msg, fmt.Sprintf("2026-11-02T%02d:%02d:00Z", 10+i/60, i%60), files)
		commits = append(commits, parent)
	}
	m := &treeMeasurer{repo: repo, built: map[string]bool{}}
	res, err := Run(context.Background(), Options{Repo: repo, Good: good, Bad: parent, Measurer: m,
		Benchmark: "getppid", Metric: "ns/op", Deterministic: true})
	if err != nil {
		t.Fatal(err)
	}
	if res.Culprit == nil || res.Culprit.Hash != commits[5] || !slices.Equal(res.Culprit.Lists, []string{"linux-kernel@vger.kernel.org"}) {
		t.Fatalf("culprit %+v, want %s with the list of kernel/ only", res.Culprit, commits[5])
	}
	c := Context{Tree: "https://git.example.org/linux.git", Pipeline: "x86-getppid", Variant: "base", Arch: "x86_64"}
	d, err := Draft(res, c, mbox.Address{Name: "Tester", Email: "tester@example.org"}, time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC))
	if err != nil {
		t.Fatal(err)
	}
	var eml strings.Builder
	if err := report.WriteDraft(&eml, *d); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"To: Patch Author <author@patcheval.invalid>", "Cc: Sys Maintainer <sys@example.org>, linux-kernel@vger.kernel.org",
		"In-Reply-To: <20261102.1234-1-dev@example.org>", "a +25.0% regression of getppid ns/op"} {
		if !strings.Contains(eml.String(), want) {
			t.Errorf("draft lacks %q:\n%s", want, eml.String())
		}
	}
	if strings.Contains(eml.String(), "linux-mm") {
		t.Errorf("draft copies the list of files the culprit does not touch:\n%s", eml.String())
	}
	var kc strings.Builder
	if err := WriteKCIDB(&kc, res, c); err != nil {
		t.Fatal(err)
	}
	var raw map[string]json.RawMessage
	if err := json.Unmarshal([]byte(kc.String()), &raw); err != nil {
		t.Fatalf("%v\n%s", err, kc.String())
	}
	doc := map[string][]map[string]any{}
	for _, kind := range []string{"checkouts", "tests", "issues", "incidents"} {
		var list []map[string]any
		if err := json.Unmarshal(raw[kind], &list); err != nil {
			t.Fatalf("%s: %v", kind, err)
		}
		doc[kind] = list
	}
	for kind, props := range kcidbIssueProps {
		if len(doc[kind]) != 1 {
			t.Fatalf("%d %s, want one:\n%s", len(doc[kind]), kind, kc.String())
		}
		for k := range doc[kind][0] {
			if !slices.Contains(props[0], k) {
				t.Errorf("%s: property %q is not in KCIDB v5.3", kind, k)
			}
		}
		for _, k := range props[1] {
			if _, ok := doc[kind][0][k]; !ok {
				t.Errorf("%s: required %q missing", kind, k)
			}
		}
	}
	inc, iss, test := doc["incidents"][0], doc["issues"][0], doc["tests"][0]
	if inc["issue_id"] != iss["id"] || inc["test_id"] != test["id"] || inc["present"] != true || test["status"] != "FAIL" {
		t.Errorf("incident %v does not tie issue %v to the failing test %v", inc, iss["id"], test)
	}
	if co := doc["checkouts"][0]; co["git_repository_url"] != c.Tree || co["git_commit_hash"] != commits[5] {
		t.Errorf("checkout %v", co)
	}
}

// TestCulpritDraftGoesToItsMaintainers: the culprit's mail goes to its
// author, Cc the maintainers of the files it changes and their lists
// (MAINTAINERS), not to the maintainers, reviewers or lists of files it
// leaves alone or the commit's own Cc trailer.
func TestCulpritDraftGoesToItsMaintainers(t *testing.T) {
	repo := testgit.InitBare(t, filepath.Join(t.TempDir(), "r.git"))
	maint := "List of maintainers\n\nMEMORY MANAGEMENT\nM:\tMia Mem <mia@example.org>\nL:\tlinux-mm@example.org\nS:\tMaintained\nF:\tmm/\n\n" +
		"SYSCALLS\nM:\tSam Sys <sam@example.org>\nR:\tRita Review <rita@example.org>\nL:\tlinux-sys@example.org\nS:\tMaintained\nF:\tkernel/sys.c\n\n" +
		"THE REST\nM:\tLinus Torvalds <torvalds@linux-foundation.org>\nL:\tlinux-kernel@vger.kernel.org\nS:\tBuried alive in reporters\nF:\t*\nF:\t*/\n"
	good := testgit.Commit(t, repo, "", "base", "2026-11-02T09:00:00Z", map[string]string{"MAINTAINERS": maint,
		"bench/getppid": "1000\n", "kernel/sys.c": "/* sys */\n", "mm/slab.c": "/* slab */\n"})
	mm := testgit.Commit(t, repo, good, "mm: tidy", "2026-11-02T10:00:00Z", map[string]string{"mm/slab.c": "/* tidy */\n"})
	bad := testgit.Commit(t, repo, mm, "sys: slow getppid\n\nCc: everyone@example.net", "2026-11-02T10:01:00Z",
		map[string]string{"kernel/sys.c": "/* slow */\n", "bench/getppid": "1250\n"})
	res, err := Run(context.Background(), Options{Repo: repo, Good: good, Bad: bad, Measurer: &treeMeasurer{repo: repo, built: map[string]bool{}},
		Benchmark: "getppid", Metric: "ns/op", Deterministic: true})
	if err != nil || res.Culprit == nil || res.Culprit.Hash != bad {
		t.Fatalf("bisect: %+v %v", res, err)
	}
	d, err := Draft(res, Context{Pipeline: "x86-getppid"}, mbox.Address{Name: "Tester", Email: "tester@example.org"}, time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC))
	if err != nil {
		t.Fatal(err)
	}
	var cc []string
	for _, a := range d.Cc {
		cc = append(cc, a.Email)
	}
	sort.Strings(cc)
	if len(d.To) != 1 || d.To[0].Email != "author@patcheval.invalid" ||
		strings.Join(cc, " ") != "linux-kernel@vger.kernel.org linux-sys@example.org sam@example.org" {
		t.Errorf("culprit draft to %v, Cc %v; want the author, Cc Sam, linux-sys and THE REST's list", d.To, cc)
	}
	if strings.Contains(d.Body, "not addressed") {
		t.Errorf("body: %s", d.Body)
	}
}
