package service

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"testing"
	"time"

	"github.com/patcheval/patcheval/internal/testpg"
)

// BenchmarkDashboard measures the dashboard's pages with 1,000 stored
// evaluations (3 variants, 3 boots, 2 benchmarks of 5 iterations each:
// 90 samples; the applied series, stage timings, 15 completed River jobs;
// report.json and reply.eml on disk), on SQLite and on a real PostgreSQL
// 15: the evaluations list (first, a middle page, filtered) and one
// evaluation's page (verdicts, two SVG plots, builds, boots with console
// tails, jobs, draft), the plot alone, the queue page and the API. It
// reports p50 and p99 latency over the benchmark's requests (target: p99
// < 50 ms) and the size of the inline SVG plot. bench/serve.sh runs it.
func BenchmarkDashboard(b *testing.B) {
	b.Run("sqlite", func(b *testing.B) { benchDashboard(b, filepath.Join(b.TempDir(), "patcheval.db")) })
	b.Run("postgres", func(b *testing.B) { benchDashboard(b, testpg.URL(b)) })
}

func benchDashboard(b *testing.B, database string) {
	s, err := New(b.Context(), Config{Database: database, Log: io.Discard})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	n := 1000
	if v, err := strconv.Atoi(os.Getenv("PATCHEVAL_BENCH_EVALUATIONS")); err == nil && v > 0 {
		n = v // a quick look; the target is for 1,000
	}
	start := time.Now()
	ids := recordEvaluations(b, s, n, 3)
	b.Logf("stored %d evaluations in %s", len(ids), time.Since(start).Round(time.Millisecond))
	srv := httptest.NewServer(s.Handler())
	defer srv.Close()
	mid := ids[len(ids)/2]
	for _, page := range []struct{ name, path string }{
		{"list", "/"},
		{"list-page-10", "/?page=10"},
		{"list-filtered", "/?status=done&pipeline=ppc-preempt-dynamic&series=fixture+5"},
		{"evaluation", fmt.Sprintf("/evaluations/%d", mid)},
		{"plot-svg", fmt.Sprintf("/evaluations/%d/plots/0.svg", mid)},
		{"queue", "/queue"},
		{"api-list", "/api/v1/evaluations?limit=50"},
		{"api-evaluation", fmt.Sprintf("/api/v1/evaluations/%d", mid)},
	} {
		b.Run(page.name, func(b *testing.B) {
			var lat []time.Duration
			size := 0
			for b.Loop() {
				t0 := time.Now()
				resp, err := http.Get(srv.URL + page.path)
				if err != nil {
					b.Fatal(err)
				}
				n, _ := io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				lat = append(lat, time.Since(t0))
				if resp.StatusCode != 200 {
					b.Fatalf("GET %s: %d", page.path, resp.StatusCode)
				}
				size = int(n)
			}
			sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
			pct := func(p float64) float64 { return float64(lat[int(p*float64(len(lat)-1))].Microseconds()) / 1000 }
			b.ReportMetric(pct(0.50), "p50-ms")
			b.ReportMetric(pct(0.99), "p99-ms")
			b.ReportMetric(float64(size), "bytes")
		})
	}
	// The inline SVG plot's size on the evaluation page.
	resp, err := http.Get(srv.URL + fmt.Sprintf("/evaluations/%d", mid))
	if err != nil {
		b.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	for i, m := range regexp.MustCompile(`(?s)<svg .*?</svg>`).FindAll(body, -1) {
		b.Logf("inline SVG plot %d: %d bytes", i, len(m))
	}
}
