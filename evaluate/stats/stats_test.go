package stats

import (
	"encoding/json"
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/patcheval/patcheval/evaluate"
)

func near(t *testing.T, what string, got, want, relTol float64) {
	t.Helper()
	if math.IsNaN(got) || math.Abs(got-want) > relTol*math.Max(math.Abs(want), 1e-300) {
		t.Errorf("%s = %.15g, want %.15g (rel tol %g)", what, got, want, relTol)
	}
}

// Reference values: testdata/refs.py (mpmath, independent of this code).
var refs = []struct {
	name           string
	base, other    []float64
	t, df, p       float64
	ciLo, ciHi     float64
	u, up          float64
	higherIsBetter bool
	verdict        Verdict
}{
	{"kill ns/op voluntary vs voluntary+dyn", []float64{955.1, 954.6, 955.9}, []float64{1192.4, 1191.8, 1193.1},
		444.812500000017, 3.99975587427525, 1.53447677278033e-10, 24.6570786428, 25.0152071402, 0, 0.1, false, Regression},
	{"rcu sync latency (seed 003 run means)",
		[]float64{10.088, 10.064, 10.051, 10.125, 8.695, 10.157, 10.102, 8.050, 10.059, 10.077},
		[]float64{6.027, 6.032, 6.010, 6.076, 6.084, 6.034, 6.051, 6.057, 6.016, 6.036},
		-15.8051409100103, 9.01949840670588, 6.98597621260542e-8, -41.2062167523, -34.4415095599, 100, 1.08250882245e-5, false, Improvement},
	{"noise", []float64{100.2, 98.7, 101.5, 99.9, 100.8}, []float64{101.1, 99.5, 102.3, 100.4, 98.9},
		0.289624151352737, 7.56596118538672, 0.779881190920839, -1.53533722611, 1.99811994851, 11, 0.84126984127, true, Inconclusive},
	{"ties", []float64{1, 2, 2, 3}, []float64{2, 3, 3, 4},
		1.73205080756888, 6, 0.133974596215561, -17.2334856437, 227.217873565, 3, 0.285714285714, true, Inconclusive},
}

func TestCompareAgainstReference(t *testing.T) {
	for _, r := range refs {
		t.Run(r.name, func(t *testing.T) {
			c := Compare(r.base, r.other, r.higherIsBetter, 0.05)
			if !c.Tested {
				t.Fatalf("not tested: %s", c.Reason)
			}
			near(t, "t", c.WelchT, r.t, 1e-9)
			near(t, "df", c.WelchDF, r.df, 1e-9)
			near(t, "p", c.WelchP, r.p, 1e-7)
			if !c.CIBounded {
				t.Fatalf("CI unbounded")
			}
			near(t, "ci low", c.CILow, r.ciLo, 1e-7)
			near(t, "ci high", c.CIHigh, r.ciHi, 1e-7)
			near(t, "U", c.U, r.u, 1e-12)
			near(t, "U p", c.UP, r.up, 1e-6)
			if c.Verdict != r.verdict {
				t.Errorf("verdict %q (%s), want %q", c.Verdict, c.Reason, r.verdict)
			}
			if _, err := json.Marshal(c); err != nil {
				t.Errorf("json: %v", err)
			}
		})
	}
}

func TestTQuantile(t *testing.T) {
	for _, c := range []struct{ q, df, want float64 }{
		{0.975, 10, 2.22813885198627}, {0.975, 2, 4.30265272974946},
		{0.975, 4.5, 2.6589123472044}, {0.995, 3, 5.84090930973336}, {0.9, 1, 3.07768353717525},
		{0.025, 10, -2.22813885198627},
	} {
		near(t, "TQuantile", TQuantile(c.q, c.df), c.want, 1e-10)
	}
}

func TestSummarize(t *testing.T) {
	s := Summarize([]float64{3, 1, math.NaN(), 2, 10, math.Inf(1)})
	if s.N != 4 || s.Dropped != 2 || s.Min != 1 || s.Max != 10 || s.Median != 2.5 || s.Mean != 4 {
		t.Fatalf("summary %+v", s)
	}
}

func TestSummarizeStdDev(t *testing.T) {
	s := Summarize([]float64{3, 1, 2, 10})
	near(t, "stddev", s.StdDev, math.Sqrt(50.0/3), 1e-12)
	if e := Summarize(nil); e.N != 0 || e.Mean != 0 {
		t.Fatalf("empty: %+v", e)
	}
	one := Summarize([]float64{7})
	if one.N != 1 || one.StdDev != 0 || one.Median != 7 {
		t.Fatalf("one: %+v", one)
	}
}

func TestZeroVariance(t *testing.T) {
	// Deterministic QEMU: identical constant samples are equivalent.
	c := Compare([]float64{955, 955, 955}, []float64{955, 955, 955}, false, 0.05)
	if c.Verdict != Equivalent || !c.Exact || c.WelchP != 1 {
		t.Fatalf("identical constants: %+v", c)
	}
	// Constant but different: an exact, clear change in the metric's
	// direction.
	c = Compare([]float64{955, 955, 955}, []float64{1192, 1192, 1192}, false, 0.05)
	if c.Verdict != Regression || !c.Exact || c.WelchP != 0 || c.CILow != c.CIHigh {
		t.Fatalf("different constants: %+v", c)
	}
	near(t, "change", c.Change, 100*(1192.0/955-1), 1e-12)
	if !strings.Contains(c.Reason, "exact") {
		t.Errorf("reason %q does not say exact", c.Reason)
	}
	c = Compare([]float64{955, 955, 955}, []float64{1192, 1192, 1192}, true, 0.05)
	if c.Verdict != Improvement {
		t.Fatalf("ops/s direction: %s", c.Verdict)
	}
	// A tiny exact change below the threshold is still a change, marked
	// as below it.
	c = CompareWith([]float64{955, 955}, []float64{955.5, 955.5}, Options{Threshold: 1})
	if c.Verdict != Regression || !c.BelowThreshold || c.Label() != "regression, below ±1%" {
		t.Fatalf("below threshold: %s %s", c.Label(), c.Reason)
	}
	// One side constant, the other noisy: Welch still works (df = n-1).
	c = Compare([]float64{955, 955, 955}, []float64{1190, 1192, 1194}, false, 0.05)
	if !c.Tested || c.Exact || c.Verdict != Regression {
		t.Fatalf("one constant: %+v", c)
	}
	near(t, "df", c.WelchDF, 2, 1e-12)
	if _, err := json.Marshal(c); err != nil {
		t.Fatal(err)
	}
}

func TestSmallAndNaN(t *testing.T) {
	c := Compare([]float64{955}, []float64{1192}, false, 0.05)
	if c.Verdict != Inconclusive {
		t.Fatalf("n=1: %s", c.Verdict)
	}
	c = Compare([]float64{math.NaN(), 955.1, 954.6, 955.9}, []float64{1192.4, 1191.8, math.Inf(1), 1193.1}, false, 0.05)
	if c.Verdict != Regression || c.Base.Dropped != 1 || c.Other.Dropped != 1 || len(c.Notes) != 2 {
		t.Fatalf("NaN: %+v", c)
	}
	near(t, "t with NaN dropped", c.WelchT, 444.812500000017, 1e-9)
	c = Compare([]float64{math.NaN(), math.NaN()}, []float64{1, 2}, false, 0.05)
	if c.Verdict != Inconclusive {
		t.Fatalf("all NaN: %s", c.Verdict)
	}
	if _, err := json.Marshal(c); err != nil {
		t.Fatal(err)
	}
	c = Compare([]float64{0, 0, 0}, []float64{1, 2, 3}, false, 0.05)
	if c.Verdict != Inconclusive {
		t.Fatalf("zero base: %s", c.Verdict)
	}
}

// TestCICoverage simulates normal data with a known ratio of means and
// checks that the 95% Fieller interval covers the truth about 95% of the
// time, and that Welch's test keeps its false-positive rate at alpha.
func TestCICoverage(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	const trials = 4000
	gen := func(n int, mu, sd float64) []float64 {
		x := make([]float64, n)
		for i := range x {
			x[i] = mu + sd*rng.NormFloat64()
		}
		return x
	}
	for _, tc := range []struct {
		nb, no         int
		mb, mo, sb, so float64
	}{
		{5, 5, 1000, 1250, 20, 20}, // a 25% regression, equal spread
		{3, 8, 100, 103, 1, 4},     // unequal n and variance
		{10, 10, 50, 50, 5, 5},     // no change
	} {
		truth := 100 * (tc.mo/tc.mb - 1)
		cover, falsePos := 0, 0
		for i := 0; i < trials; i++ {
			c := Compare(gen(tc.nb, tc.mb, tc.sb), gen(tc.no, tc.mo, tc.so), false, 0.05)
			if c.CIBounded && c.CILow <= truth && truth <= c.CIHigh {
				cover++
			}
			if tc.mb == tc.mo && c.WelchP < 0.05 {
				falsePos++
			}
		}
		rate := float64(cover) / trials
		// Binomial sd at 4000 trials is 0.0034; allow about 3 sd.
		if rate < 0.94 || rate > 0.962 {
			t.Errorf("%+v: coverage %.4f, want about 0.95", tc, rate)
		}
		if tc.mb == tc.mo {
			if fp := float64(falsePos) / trials; fp < 0.038 || fp > 0.062 {
				t.Errorf("false positive rate %.4f, want about 0.05", fp)
			}
		}
	}
}

func TestRule(t *testing.T) {
	r := Rule(Options{Alpha: 0.05})
	for _, want := range []string{"p < 0.05", "95% confidence interval", "worse", "constant", "inconclusive"} {
		if !strings.Contains(r, want) {
			t.Errorf("rule %q lacks %q", r, want)
		}
	}
	if c := Compare([]float64{1, 2}, []float64{1, 2}, true, 0.01); !strings.Contains(c.Rule, "99% confidence") {
		t.Errorf("rule at alpha 0.01: %q", c.Rule)
	}
}

func TestConvert(t *testing.T) {
	ns, err := Convert([]float64{105014, 73317}, "ops/s", "ns/op")
	if err != nil {
		t.Fatal(err)
	}
	near(t, "ns/op", ns[0], 9522.54, 1e-5)
	near(t, "ns/op", ns[1], 13639.3, 1e-5)
	us, _ := Convert([]float64{9190}, "ns/op", "us/op")
	near(t, "us/op", us[0], 9.19, 1e-12)
	ops, _ := Convert([]float64{1.16}, "us/op", "kops/s")
	near(t, "kops/s", ops[0], 862.0689655, 1e-8)
	near(t, "roundtrip", OpsPerSec(NsPerOp(863000)), 863000, 1e-12)
	if _, err := Convert([]float64{1}, "furlongs", "ns/op"); err == nil || !strings.Contains(err.Error(), "furlongs") {
		t.Fatalf("want error naming the unit, got %v", err)
	}
	for m, want := range map[string]bool{"ops/s": true, "ns/op": false, "latency_us": false, "bogo-ops/sec": true, "kill ns/op": false, "throughput": true} {
		got, known := HigherIsBetter(m)
		if !known || got != want {
			t.Errorf("HigherIsBetter(%q) = %v,%v", m, got, known)
		}
	}
	if _, known := HigherIsBetter("widgets"); known {
		t.Errorf("widgets known")
	}
}

// TestDecomposeSeed reproduces the seed thread's split: voluntary 105,014,
// lazy 86,878, full+PREEMPT_RCU 73,317 kill bogo-ops/s was "roughly 55/45".
func TestDecomposeSeed(t *testing.T) {
	means := map[string]float64{"voluntary": 105014, "lazy": 86878, "full": 73317}
	d, err := Decompose([]string{"voluntary", "lazy", "full"}, means)
	if err != nil {
		t.Fatal(err)
	}
	near(t, "total", d.Total, -30.1836, 1e-4)
	near(t, "step1 change", d.Steps[0].Change, -17.2701, 1e-4)
	near(t, "step2 change", d.Steps[1].Change, -15.6098, 1e-4)
	// ln(86878/105014)/ln(73317/105014) = 0.52769...
	near(t, "share1", d.Steps[0].Share, 52.7689, 1e-4)
	near(t, "share2", d.Steps[1].Share, 47.2311, 1e-4)
	near(t, "linear share1", d.Steps[0].LinearShare, 57.2168, 1e-4)
	if math.Abs(d.Steps[0].Share-55) > 3 || math.Abs(d.Steps[1].Share-45) > 3 {
		t.Errorf("not roughly 55/45: %+v", d.Steps)
	}
	// Scale-free: the same split in ns/op.
	ns := map[string]float64{}
	for k, v := range means {
		ns[k] = NsPerOp(v)
	}
	d2, _ := Decompose([]string{"voluntary", "lazy", "full"}, ns)
	near(t, "ns/op share", d2.Steps[0].Share, d.Steps[0].Share, 1e-9)

	if _, err := Decompose([]string{"voluntary", "nope"}, means); err == nil || !strings.Contains(err.Error(), "nope") {
		t.Errorf("missing variant: %v", err)
	}
	if _, err := Decompose([]string{"voluntary"}, means); err == nil {
		t.Errorf("short chain accepted")
	}
	d3, _ := Decompose([]string{"a", "b", "c"}, map[string]float64{"a": 5, "b": 6, "c": 5})
	if d3.Defined || d3.Reason == "" {
		t.Errorf("zero total: %+v", d3)
	}
	if _, err := json.Marshal(d3); err != nil {
		t.Fatal(err)
	}
}

func TestDecomposeSamplesCI(t *testing.T) {
	s := map[string][]float64{
		"voluntary": {955.1, 954.6, 955.9},
		"dyn":       {1192.4, 1191.8, 1193.1},
		"full":      {1205.3, 1204.2, 1205.9},
	}
	d, err := DecomposeSamples([]string{"voluntary", "dyn", "full"}, s, 0.95)
	if err != nil {
		t.Fatal(err)
	}
	st := d.Steps[0]
	if !st.ShareCI || st.ShareLow > st.Share || st.ShareHigh < st.Share || st.ShareHigh-st.ShareLow > 2 {
		t.Fatalf("share CI %+v", st)
	}
	// voluntary -> dyn is most of the way to full: ln(1192/955)/ln(1205/955) ~ 95%.
	if st.Share < 93 || st.Share > 97 {
		t.Fatalf("share %.2f", st.Share)
	}
	// Constant samples: the CI collapses onto the point.
	c := map[string][]float64{"a": {955, 955, 955}, "b": {1192, 1192, 1192}, "c": {1205, 1205, 1205}}
	d, _ = DecomposeSamples([]string{"a", "b", "c"}, c, 0.95)
	if d.Steps[0].ShareLow != d.Steps[0].Share || d.Steps[0].ShareHigh != d.Steps[0].Share {
		t.Fatalf("constant CI %+v", d.Steps[0])
	}
}

func TestNeedMore(t *testing.T) {
	o := AdaptiveOptions{MinN: 3, MaxN: 10}
	more, why := NeedMore([]float64{955, 956}, []float64{1192, 1193}, o)
	if !more || !strings.Contains(why, "minimum") {
		t.Fatalf("%v %q", more, why)
	}
	more, why = NeedMore([]float64{955.1, 954.6, 955.9}, []float64{1192.4, 1191.8, 1193.1}, o)
	if more || !strings.Contains(why, "clear at n=3: regression") {
		t.Fatalf("%v %q", more, why)
	}
	more, why = NeedMore([]float64{955, 955, 955}, []float64{955, 955, 955}, o)
	if more || !strings.Contains(why, "clear") {
		t.Fatalf("constant: %v %q", more, why)
	}
	noisyB := []float64{100.2, 98.7, 101.5, 99.9, 100.8}
	noisyO := []float64{101.1, 99.5, 102.3, 100.4, 98.9}
	more, why = NeedMore(noisyB, noisyO, o)
	if !more || !strings.Contains(why, "unclear at n=5 of 10") {
		t.Fatalf("%v %q", more, why)
	}
	more, why = NeedMore(noisyB, noisyO, AdaptiveOptions{MinN: 3, MaxN: 5})
	if more || !strings.Contains(why, "budget spent") || !strings.Contains(why, "still inconclusive") ||
		!strings.Contains(why, "more boots per variant would resolve ±1% at this noise") {
		t.Fatalf("%v %q", more, why)
	}
	// Not significant is not enough to stop: a CI reaching past ±T
	// goes on, a tight one inside ±T stops as equivalent.
	tightB := []float64{1000.1, 999.9, 1000.0, 1000.2, 999.8}
	tightO := []float64{1000.0, 1000.2, 999.9, 1000.1, 999.8}
	more, why = NeedMore(tightB, tightO, o)
	if more || !strings.Contains(why, "clear at n=5: equivalent") || !strings.Contains(why, "±1%") {
		t.Fatalf("tight: %v %q", more, why)
	}
	// Equivalence: a tight CI within ±5% stops sampling.
	more, why = NeedMore(noisyB, noisyO, AdaptiveOptions{MinN: 3, MaxN: 10, Threshold: 5})
	if more || !strings.Contains(why, "equivalent") {
		t.Fatalf("%v %q", more, why)
	}
	// Looks per boot: 15..50 samples in steps of 5 is 8 looks, not 36.
	if a := AdaptiveAlpha(AdaptiveOptions{MinN: 15, MaxN: 50, Step: 5}); math.Abs(a-0.05/8) > 1e-12 {
		t.Fatalf("alpha with Step 5: %g, want %g", a, 0.05/8)
	}
}

// TestNeedMoreErrorRate runs the whole sequential procedure on null data:
// the Bonferroni-corrected looks keep false regressions/improvements rare.
func TestNeedMoreErrorRate(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	const trials = 1500
	fp := 0
	o := AdaptiveOptions{MinN: 3, MaxN: 8}
	for i := 0; i < trials; i++ {
		var b, x []float64
		for {
			b = append(b, 100+rng.NormFloat64())
			x = append(x, 100+rng.NormFloat64())
			if more, _ := NeedMore(b, x, o); !more {
				break
			}
		}
		c := CompareWith(b, x, Options{Alpha: AdaptiveAlpha(o)})
		if c.Verdict == Regression || c.Verdict == Improvement {
			fp++
		}
	}
	if rate := float64(fp) / trials; rate > 0.05 {
		t.Errorf("sequential false positive rate %.3f > 0.05", rate)
	}
}

func TestSets(t *testing.T) {
	var ss []evaluate.Sample
	for i, v := range []float64{955.1, 954.6, 955.9} {
		ss = append(ss, evaluate.Sample{Variant: "voluntary", Benchmark: "kill", Metric: "ns/op", Value: v, Boot: i})
		ss = append(ss, evaluate.Sample{Variant: "dyn", Benchmark: "kill", Metric: "ns/op", Value: v + 237, Boot: i})
		ss = append(ss, evaluate.Sample{Variant: "voluntary", Benchmark: "getppid", Metric: "ns/op", Value: 448, Boot: i})
	}
	sets := Sets(ss)
	if len(sets) != 3 || sets[0].Variant != "voluntary" || sets[1].Variant != "dyn" || sets[2].Benchmark != "getppid" {
		t.Fatalf("sets %+v", sets)
	}
	if f := Find(sets, "kill", "ns/op", "dyn"); f == nil || f.Summary.N != 3 {
		t.Fatalf("find %+v", f)
	}
	if Find(sets, "kill", "ns/op", "full") != nil {
		t.Fatal("found a missing set")
	}
}
