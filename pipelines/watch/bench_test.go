package watch

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/patcheval/patcheval/build"
	"github.com/patcheval/patcheval/build/buildtest"
	"github.com/patcheval/patcheval/internal/xdg"
)

// BenchmarkRetestBisect runs the watch flow of the end-to-end test with a
// fresh build recipe (the test pipeline plus a fragment holding only a
// comment with a nonce: the same kernels, but no cached artifact and a
// new O= directory, with kcc's store warm), so every figure includes real
// builds: the first tick's build, the re-test of the new tag, and the
// bisection's incremental step builds. With PATCHEVAL_BENCH_CLEAN=1 it
// also builds the culprit from scratch (fresh cache, no compiler cache)
// for the incremental-vs-clean ratio. bench/bisect.sh runs it.
func BenchmarkRetestBisect(b *testing.B) {
	buildtest.SkipIfSlow(b)
	for i := 0; i < b.N; i++ {
		dir := b.TempDir()
		nonce := filepath.Join(dir, "bench-nonce.config")
		if err := os.WriteFile(nonce, []byte(fmt.Sprintf("# bench run %d: changes the recipe, not the kernel\n", time.Now().UnixNano())), 0o644); err != nil {
			b.Fatal(err)
		}
		src, err := os.ReadFile("testdata/retest-x86-getppid.toml")
		if err != nil {
			b.Fatal(err)
		}
		toml := strings.Replace(string(src), `fragments = ["qemu-boot"]`, fmt.Sprintf(`fragments = ["qemu-boot", %q]`, nonce), 1)
		pipeline := filepath.Join(dir, "bench.toml")
		if err := os.WriteFile(pipeline, []byte(toml), 0o644); err != nil {
			b.Fatal(err)
		}
		f := runWatchFlow(b, pipeline)
		r := f.result
		if r.Culprit == nil || r.Culprit.Hash != f.synth[culpritCommit-1] {
			b.Fatalf("bisection found %+v, want %s", r.Culprit, f.synth[culpritCommit-1])
		}
		var steps []float64
		for _, s := range r.Steps {
			if s.Built && s.Error == "" && len(s.Values) > 0 {
				steps = append(steps, s.BuildSeconds)
			}
		}
		b.ReportMetric(float64(r.Builds), "builds")
		b.ReportMetric(float64(r.Bound), "bound")
		b.ReportMetric(float64(r.Commits), "commits")
		b.ReportMetric(mean(steps), "step-build-s")
		b.ReportMetric(maxOf(steps), "max-step-build-s")
		b.ReportMetric(f.first.Seconds(), "first-tick-s")
		b.ReportMetric(f.bisect.Seconds(), "bisect-s")
		b.ReportMetric(f.toCulprit.Seconds(), "tag-to-culprit-s")
		b.Logf("bisection report:\n%s", f.report)
		if os.Getenv("PATCHEVAL_BENCH_CLEAN") == "1" {
			req := build.Request{Repo: filepath.Join(xdg.CacheDir(), "trees", "retest-e2e", "served", "linux.git"), Commit: r.Culprit.Hash,
				Arch: "x86_64", BaseConfig: "tinyconfig", Fragments: []string{buildtest.BootFragment(b, "x86_64"), nonce}, Variant: "clean"}
			var d time.Duration
			buildtest.Serialize(b, func() {
				start := time.Now()
				_, err = build.Build(context.Background(), req, build.Options{CacheDir: b.TempDir(), CompilerCache: "none", Jobs: 2, Nice: 10, NoNetwork: true})
				d = time.Since(start)
			})
			if err != nil {
				b.Fatal(err)
			}
			b.ReportMetric(d.Seconds(), "clean-build-s")
			if m := mean(steps); m > 0 {
				b.ReportMetric(m/d.Seconds(), "step/clean")
			}
		}
	}
}

func mean(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := 0.0
	for _, x := range xs {
		s += x
	}
	return s / float64(len(xs))
}

func maxOf(xs []float64) float64 {
	m := 0.0
	for _, x := range xs {
		m = max(m, x)
	}
	return m
}
