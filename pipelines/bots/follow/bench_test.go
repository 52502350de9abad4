package follow

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"testing"
	"time"

	"github.com/patcheval/patcheval/internal/testinbox"
	"github.com/patcheval/patcheval/pipelines/store"
)

// corpus generates about n messages: series of 1 to 6 patches with a
// cover letter, and replies to their patches, in the ratio of a busy
// list (three quarters series mail, one quarter review).
func (g *gen) corpus(round, n int) (msgs [][]byte, series int) {
	files := []string{"arch/powerpc/kernel/time.c", "kernel/sched/core.c", "mm/slab.c", "drivers/net/tun.c"}
	for i := 0; len(msgs) < n; i++ {
		id := fmt.Sprintf("r%ds%d", round, i)
		np := 1 + i%6
		s := g.series(id, fmt.Sprintf("Dev %d <dev%d@example.org>", i%37, i%37), fmt.Sprintf("subsys%d: change %d of round %d", i%11, i, round),
			1, np, files[i%len(files):], "")
		msgs = append(msgs, s...)
		series++
		for r := 0; r < (np+1)/2 && len(msgs) < n; r++ {
			msgs = append(msgs, g.reply(fmt.Sprintf("%s-re%d", id, r), "Rev <rev@example.org>", "[PATCH]", fmt.Sprintf("%s-v1-%d@example.org", id, 1+r%np), id+"-v1-0@example.org"))
		}
	}
	return msgs, series
}

// BenchmarkFollowerThroughput imports BENCH_FOLLOW_MESSAGES (default
// 1000) generated messages into a real public-inbox per round
// (BENCH_FOLLOW_ROUNDS, default 2), then times one follower poll from the
// end of the import to every complete series queued, and reads the Go
// heap after each round (target: under 10 s per round, heap flat across
// rounds). bench/follow.sh runs it.
func BenchmarkFollowerThroughput(b *testing.B) {
	n, rounds := envInt("BENCH_FOLLOW_MESSAGES", 1000), envInt("BENCH_FOLLOW_ROUNDS", 2)
	dir := b.TempDir()
	srv := testinbox.StartWith(b, testinbox.Options{Bulk: true, NoAll: true})
	st, err := store.Open(filepath.Join(dir, "db"))
	if err != nil {
		b.Fatal(err)
	}
	defer st.Close()
	q := &queue{st: st}
	l := List{Name: "bench", URL: srv.URL + "/" + srv.Inbox, Pipeline: "selinux-tax", Base: "tree",
		IncompleteAfter: time.Hour, Since: time.Now().Add(-24 * time.Hour)}
	f := &Follower{Store: st, Lists: []List{l}, Submit: q, Dir: filepath.Join(dir, "mirrors")}
	ctx := context.Background()
	if err := f.Poll(ctx); err != nil {
		b.Fatal(err)
	}
	g := &gen{t0: time.Now().Add(-time.Hour)}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		for r := 1; r <= rounds; r++ {
			b.StopTimer()
			msgs, want := g.corpus(r+i*rounds, n)
			// In chunks: each public-inbox command is capped (testinbox's
			// toolTimeout), and a loaded machine takes minutes for 1,000.
			t0 := time.Now()
			for c := 0; c < len(msgs); c += 200 {
				srv.Add(b, writeMbox(b, dir, fmt.Sprintf("round%d-%d.mbox", r, c), msgs[c:min(c+200, len(msgs))]...))
			}
			imp := time.Since(t0)
			before := q.n
			b.StartTimer()
			t1 := time.Now()
			if err := f.Poll(ctx); err != nil {
				b.Fatal(err)
			}
			took := time.Since(t1)
			b.StopTimer()
			if got := q.n - before; got != want {
				b.Fatalf("round %d: %d series queued, want %d", r, got, want)
			}
			runtime.GC()
			var ms runtime.MemStats
			runtime.ReadMemStats(&ms)
			b.Logf("round %d: %d messages, %d series; import %.1fs; last import to all queued %.2fs (target < 10 s); heap in use %.1f MB, sys %.1f MB",
				r, len(msgs), want, imp.Seconds(), took.Seconds(), float64(ms.HeapInuse)/(1<<20), float64(ms.Sys)/(1<<20))
			b.ReportMetric(took.Seconds(), fmt.Sprintf("s-round%d", r))
			b.ReportMetric(float64(ms.HeapInuse)/(1<<20), fmt.Sprintf("heapMB-round%d", r))
			b.StartTimer()
		}
	}
}

func envInt(k string, def int) int {
	if v, err := strconv.Atoi(os.Getenv(k)); err == nil && v > 0 {
		return v
	}
	return def
}
