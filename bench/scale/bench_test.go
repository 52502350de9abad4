package scale

import (
	"os"
	"syscall"
	"testing"
	"time"

	"github.com/patcheval/patcheval/internal/gittree"
	"github.com/patcheval/patcheval/pipelines/experiments/bisect"
)

// benchTree is PATCHEVAL_SCALE_TREE (a tree made by bench/bigtree.sh or a
// linux.git clone); the benchmarks skip without it. Profile with e.g.
//
//	PATCHEVAL_SCALE_TREE=... PATCHEVAL_SCALE_GOOD=v8.3-rc1 go test ./bench/scale/ \
//	    -run - -bench Range -cpuprofile /tmp/cpu.out
func benchTree(b *testing.B) string {
	p := os.Getenv("PATCHEVAL_SCALE_TREE")
	if p == "" {
		b.Skip("PATCHEVAL_SCALE_TREE names the repository to measure (bench/bigtree.sh makes one)")
	}
	return p
}

// cpuPerOp reports the process's CPU time (user + system, GC included)
// per op beside ns/op, which on a shared machine counts the time others
// ran: defer cpuPerOp(b)() before the loop.
func cpuPerOp(b *testing.B) func() {
	cpu := func() time.Duration {
		var ru syscall.Rusage
		syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
		return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	}
	start := cpu()
	return func() { b.ReportMetric(float64(cpu()-start)/float64(b.N), "cpu-ns/op") }
}

func envOr(k, def string) string {
	if v := os.Getenv(k); v != "" {
		return v
	}
	return def
}

// BenchmarkScaleRange is the bisection range of bench/scale.sh's "range"
// operation: the first-parent commits PATCHEVAL_SCALE_GOOD..PATCHEVAL_SCALE_BAD.
func BenchmarkScaleRange(b *testing.B) {
	p := benchTree(b)
	good, bad := envOr("PATCHEVAL_SCALE_GOOD", "v8.3-rc1"), envOr("PATCHEVAL_SCALE_BAD", "v11.1")
	defer cpuPerOp(b)()
	for i := 0; i < b.N; i++ {
		_, _, cs, err := bisect.FirstParentRange(p, good, bad, 1<<30)
		if err != nil {
			b.Fatal(err)
		}
		b.ReportMetric(float64(len(cs)), "commits")
	}
}

// BenchmarkScaleResolve is bench/scale.sh's "resolve": open the
// repository and resolve a tag to its commit.
func BenchmarkScaleResolve(b *testing.B) {
	p := benchTree(b)
	tag := envOr("PATCHEVAL_SCALE_BAD", "v11.1")
	defer cpuPerOp(b)()
	for i := 0; i < b.N; i++ {
		if _, err := gittree.Resolve(p, tag); err != nil {
			b.Fatal(err)
		}
	}
}
