package bisect

import (
	"context"
	"fmt"
	"math/rand"
	"os"
	"strings"
	"testing"
)

// noisyMeasurer is a synthetic noisy target: commit i of the range
// measures base before the culprit and base*(1+regression) from it on,
// each boot times 1 + cv*N(0,1) (a known coefficient of variation).
type noisyMeasurer struct {
	index      map[string]int // commit -> position in the range; the good end is absent (-1)
	culprit    int
	base, reg  float64
	cv         float64
	rng        *rand.Rand
	built      map[string]bool
	boots      int
	measureCnt int
}

func (m *noisyMeasurer) Measure(ctx context.Context, commit string, boots int) (*Measurement, error) {
	i, ok := m.index[commit]
	if !ok {
		i = -1
	}
	v := m.base
	if i >= m.culprit {
		v *= 1 + m.reg
	}
	out := &Measurement{Unit: "ns", Built: !m.built[commit]}
	m.built[commit] = true
	m.measureCnt++
	for range boots {
		out.Values = append(out.Values, v*(1+m.cv*m.rng.NormFloat64()))
		m.boots++
	}
	return out, nil
}

// noiseRow is one line of the accuracy table.
type noiseRow struct {
	method                                  string
	cv                                      float64
	right, rightConfirmed, wrong, wrongConf int
	reported                                int // ambiguous / no regression found: said, not guessed
	builds, boots                           float64
}

// bisectNoisy runs n bisections of a 64-commit range with a +10%
// regression at a random position on a target of noise cv, plain
// (one boot per step, nearer end wins: what a deterministic target
// allows) or noise-aware (the sequential test), and counts the outcomes.
func bisectNoisy(t *testing.T, repo, good, bad string, commits []string, cv float64, plain bool, n int) noiseRow {
	row := noiseRow{method: "noise-aware", cv: cv}
	if plain {
		row.method = "plain"
	}
	index := map[string]int{}
	for i, c := range commits {
		index[c] = i
	}
	for k := range n {
		rng := rand.New(rand.NewSource(int64(1000*cv) + int64(k)))
		m := &noisyMeasurer{index: index, culprit: rng.Intn(len(commits)), base: 1000, reg: 0.10, cv: cv, rng: rng, built: map[string]bool{}}
		res, err := Run(context.Background(), Options{Repo: repo, Good: good, Bad: bad, Measurer: m,
			Benchmark: "getppid", Metric: "ns/op", Deterministic: plain, MinBoots: 3, MaxBoots: 40, Threshold: 1})
		row.boots += float64(m.boots) / float64(n)
		if err != nil {
			row.reported++ // e.g. the end points did not differ: said so
			t.Logf("%s cv %.0f%% #%d: %v", row.method, 100*cv, k, firstLine(err.Error()))
			continue
		}
		row.builds += float64(res.Builds) / float64(n)
		switch {
		case res.Culprit == nil:
			row.reported++
			t.Logf("%s cv %.0f%% #%d: %s, %d candidates, notes %q", row.method, 100*cv, k, res.Status, len(res.Candidates), res.Notes)
		case res.Culprit.Hash == commits[m.culprit]:
			row.right++
			if res.Confirmed {
				row.rightConfirmed++
			}
		default:
			row.wrong++
			if res.Confirmed {
				row.wrongConf++
			}
		}
	}
	return row
}

// TestNoiseAwareBisection: 20 bisections per noise level (CV 2%, 5%,
// 10% against a +10% regression in 64 commits) plain and noise-aware.
// The noise-aware bisection never names a wrong culprit, and names and
// confirms the right one in at least 18 and 16 of 20 up to CV 5%, within
// the builds' bound; beyond that it says what it could not decide. The
// plain one guesses: wrong culprits, some of them "confirmed". PATCHEVAL_BISECT_TABLE=FILE writes the
// table (Markdown).
func TestNoiseAwareBisection(t *testing.T) {
	const n = 20
	repo, good, bad, commits := history(t, values(64, 0))
	var rows []noiseRow
	for _, cv := range []float64{0.02, 0.05, 0.10} {
		for _, plain := range []bool{true, false} {
			rows = append(rows, bisectNoisy(t, repo, good, bad, commits, cv, plain, n))
		}
	}
	var b strings.Builder
	fmt.Fprintf(&b, "| noise (CV) | method | right culprit | of which confirmed | wrong culprit | wrong but confirmed | reported undecided | builds (mean) | boots (mean) |\n|---|---|---|---|---|---|---|---|---|\n")
	for _, r := range rows {
		fmt.Fprintf(&b, "| %.0f%% | %s | %d/%d | %d | %d | %d | %d | %.1f | %.1f |\n", 100*r.cv, r.method, r.right, n, r.rightConfirmed,
			r.wrong, r.wrongConf, r.reported, r.builds, r.boots)
	}
	t.Logf("64 commits, +10%% regression at a random position, %d bisections per row (bound ceil(log2 64)+2 = %d builds):\n%s", n, Bound(64), b.String())
	if f := os.Getenv("PATCHEVAL_BISECT_TABLE"); f != "" {
		os.WriteFile(f, []byte(b.String()), 0o644)
	}
	plainWrong := 0
	for _, r := range rows {
		if r.method == "plain" {
			plainWrong += r.wrong
			continue
		}
		// Never a guess: no wrong culprit at any noise level.
		if r.wrong > 0 {
			t.Errorf("noise-aware at CV %.0f%%: %d wrong culprit(s) named", 100*r.cv, r.wrong)
		}
		if r.cv <= 0.05 && (r.right < n-2 || r.rightConfirmed < n-4 || r.builds > float64(Bound(64))+0.5) {
			t.Errorf("noise-aware at CV %.0f%%: %d/%d right, %d confirmed, %.1f builds on average (bound %d)", 100*r.cv, r.right, n, r.rightConfirmed, r.builds, Bound(64))
		}
	}
	if plainWrong == 0 {
		t.Errorf("the plain bisection never named a wrong culprit: the synthetic noise does not test anything")
	}
}
