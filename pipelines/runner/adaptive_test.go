package runner

import (
	"math/rand"
	"path/filepath"
	"strings"
	"testing"

	"github.com/patcheval/patcheval/evaluate"
	"github.com/patcheval/patcheval/pipelines"
)

// adaptivePipeline has three variants on a noisy target (hardware-like):
// a -> b differs clearly, a -> c is the question.
func adaptivePipeline(t *testing.T) *pipelines.Pipeline {
	t.Helper()
	p, err := pipelines.Load(filepath.Join("testdata", "adaptive.toml"))
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// simulate runs adaptiveState.next (what More does) against a fake target whose variants
// measure mean[v] with noise sd (relative), iterations samples per boot.
func simulate(t *testing.T, mean map[string]float64, sd float64, seed int64) (boots map[string]int, a *adaptiveState) {
	t.Helper()
	p := adaptivePipeline(t)
	rng := rand.New(rand.NewSource(seed))
	var samples []evaluate.Sample
	boots = map[string]int{}
	bootOnce := func(v string, b int) {
		for it := 0; it < p.Repeats.Iterations; it++ {
			samples = append(samples, evaluate.Sample{Variant: v, Benchmark: "kill", Metric: "ns/op",
				Value: mean[v] * (1 + sd*rng.NormFloat64()), Boot: b, Iteration: it})
		}
		boots[v]++
	}
	for _, rp := range p.Runs() {
		bootOnce(rp.Variant, rp.Boot)
	}
	a = &adaptiveState{min: p.Repeats.Boots, max: p.Repeats.MaxBoots}
	for {
		round, need := a.next(p, samples)
		if len(need) == 0 {
			return boots, a
		}
		for _, rp := range p.RunsBetween(round, round+1) {
			if need[rp.Variant] {
				if rp.Boot != round {
					t.Fatalf("round %d planned boot %d", round, rp.Boot)
				}
				bootOnce(rp.Variant, rp.Boot)
			}
		}
	}
}

func TestAdaptiveSamplingStopsWhenClear(t *testing.T) {
	// a -> b is +20% with 1% noise: clear at the planned 3 boots. a -> c
	// is +3% under 4% noise: unclear at first, clear after a few more.
	boots, a := simulate(t, map[string]float64{"a": 1000, "b": 1200, "c": 1030}, 0.04, 1)
	if boots["b"] != 3 {
		t.Errorf("b got %d boots; its comparison was clear at 3", boots["b"])
	}
	if boots["c"] <= 3 || boots["c"] >= 12 || boots["a"] != boots["c"] {
		t.Errorf("a/c boots %d/%d: want more than the planned 3, fewer than the budget 12, and equal", boots["a"], boots["c"])
	}
	why := strings.Join(a.why, "\n")
	if !strings.Contains(why, "kill ns/op a -> c: clear at n=") || !strings.Contains(why, "kill ns/op a -> b: clear at n=6") {
		t.Errorf("reasons:\n%s", why)
	}
}

func TestAdaptiveSamplingSpendsTheBudget(t *testing.T) {
	// No difference at 5% noise: never clear (24 samples at 5% noise
	// cannot put the CI inside the ±1% equivalence margin of a
	// non-deterministic target), so a and c get every boot of the budget,
	// except in the rare run where a look finds a false difference; the
	// per-look alpha keeps those near or under 5% overall.
	const runs = 200
	falseClear := 0
	for seed := int64(0); seed < runs; seed++ {
		boots, a := simulate(t, map[string]float64{"a": 1000, "b": 2000, "c": 1000}, 0.05, seed)
		if boots["b"] != 3 {
			t.Fatalf("seed %d: b got %d boots; its comparison is clear at 3", seed, boots["b"])
		}
		why := strings.Join(a.why, "\n")
		if strings.Contains(why, "a -> c: clear") {
			falseClear++
			continue
		}
		if boots["a"] != 12 || boots["c"] != 12 || !strings.Contains(why, "a -> c: budget spent: n=24 of 24") ||
			!strings.Contains(why, "more boots per variant would resolve ±1% at this noise") {
			t.Fatalf("seed %d: boots %v, reasons:\n%s", seed, boots, why)
		}
	}
	if falseClear > runs/10 {
		t.Errorf("%d of %d null runs stopped on a false difference", falseClear, runs)
	}
	t.Logf("%d of %d null runs stopped on a false difference", falseClear, runs)
	a := &adaptiveState{min: 3, max: 12}
	if got, want := a.alpha(), 0.05/10; got != want {
		t.Errorf("alpha %g, want %g (10 looks from 3 to 12 boots)", got, want)
	}
}

func TestAdaptivePlanningKnobs(t *testing.T) {
	p := adaptivePipeline(t)
	if p.Repeats.MaxBoots != 12 || len(p.Runs()) != 9 {
		t.Fatalf("max_boots %d, planned runs %d", p.Repeats.MaxBoots, len(p.Runs()))
	}
	if r := p.RunsBetween(7, 8); len(r) != 3 || r[0].Boot != 7 || r[0].Plan.Iterations != 2 {
		t.Fatalf("extra round: %+v", r)
	}
	if plannedBoots(&evaluation{p: p, in: inputs{Options: Options{Boots: 5}}}) != 5 || plannedBoots(&evaluation{p: p}) != 3 {
		t.Fatal("effective boots")
	}
}
