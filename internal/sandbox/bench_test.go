package sandbox

import (
	"context"
	"os"
	"os/exec"
	"testing"
)

// BenchmarkStart is the fixed cost the sandbox adds to each command (a
// build runs about four makes): bwrap, prlimit and setpriv around
// /bin/true, against /bin/true alone (BenchmarkStartDirect).
func BenchmarkStart(b *testing.B) {
	if err := Check(); err != nil {
		b.Fatal(err)
	}
	dir := b.TempDir()
	Prepare(dir)
	for i := 0; i < b.N; i++ {
		cmd, err := Spec{Writable: []string{dir}, ReadOnly: []string{"/etc/hostname"}, Dir: dir}.Command(context.Background(), []string{"true"})
		if err != nil {
			b.Fatal(err)
		}
		cmd.Env = []string{"PATH=/usr/bin:/bin"}
		if out, err := cmd.CombinedOutput(); err != nil {
			b.Fatalf("%v: %s", err, out)
		}
	}
}

func BenchmarkStartDirect(b *testing.B) {
	for i := 0; i < b.N; i++ {
		if err := exec.Command("true").Run(); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkWalk is what Prepare (before each make) and one DiskWatch
// check cost on a real O= directory: PATCHEVAL_BENCH_OUT names one (a
// kernel build's), e.g. $PATCHEVAL_CACHE_DIR/builds/work/<ws>/out.
func BenchmarkPrepareWalk(b *testing.B) {
	dir := benchOut(b)
	for i := 0; i < b.N; i++ {
		if err := Prepare(dir); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkDiskUsage(b *testing.B) {
	dir := benchOut(b)
	var n int64
	for i := 0; i < b.N; i++ {
		n = DiskUsage(dir)
	}
	b.ReportMetric(float64(n>>20), "MiB")
}

func benchOut(b *testing.B) string {
	dir := os.Getenv("PATCHEVAL_BENCH_OUT")
	if dir == "" {
		b.Skip("PATCHEVAL_BENCH_OUT (a kernel O= directory) not set")
	}
	return dir
}
