#!/usr/bin/env bash
# Benchmarks of `patcheval serve` (issue 11):
#
#   bench/serve.sh pages        # dashboard latency with 1,000 evaluations
#   bench/serve.sh wall         # serve + submit --wait vs lore --pipeline
#   bench/serve.sh              # both
#
# pages: the Go benchmark BenchmarkDashboard (pipelines/service) stores
# 1,000 evaluations, on SQLite and on a real PostgreSQL 15, and reports
# p50/p99 latency of the evaluations list, a filtered list, one
# evaluation's page, the SVG plot, the queue page and the API (target:
# p99 < 50 ms), and the inline SVG plot's size.
#
# wall: the same evaluation (the bundled v6.1 backport thread from a local
# public-inbox, ppc-preempt-dynamic, BOOTS boots per variant) on a warm
# cache and a fresh database each, through `lore --pipeline` and through
# `serve` + `submit --wait` (timed from the submit; serve is already
# listening, as a service is). ROUNDS rounds (default 3) alternate the
# order (lore first, then serve first) so that neither always runs on the
# other's warmth; the figures are the medians. Target: serve's wall time
# <= 1.05x lore's.
#
# The kernels must be built already: PATCHEVAL_CACHE_DIR names a warm
# cache (the test suite's, or a previous run's); the script refuses to
# run without it set (it would build kernels into ~/.cache, slowly). Needs
# the 6.1 tree (scripts/linux-tree.sh, in that cache), public-inbox, QEMU.
# Run it at a low priority on a shared machine: nice -n 10 bench/serve.sh wall
#
# Measured 2026-12-02 08:16-08:24 on an idle 2-core machine (nothing else
# running, nice -20; /work/cold3/.test-cache; the load below is the
# evaluation's own QEMU boots):
#   pages (BENCHTIME=300x, 1,000 stored evaluations), p50 / p99 ms, target
#   p99 < 50 (met everywhere; the slowest p99 is 17.6 ms):
#                 list      list p10  filtered  evaluation  plot     queue      api-list  api-eval
#     sqlite      4.0/8.4   4.2/8.6   4.8/8.2   4.0/8.3     1.2/3.6  8.6/13.7   1.8/4.9   2.5/5.9
#     postgres    9.5/17.5  9.4/15.4  10.4/17.6 5.6/14.0    1.2/6.2  5.3/11.7   6.5/11.3  4.4/9.6
#   Inline SVG plots: 9,438 and 9,164 bytes. Storing 1,000 evaluations:
#   32.2 s on SQLite, 22.2 s on Postgres.
#   wall (BOOTS=2, ROUNDS=3), load 2.2-2.6:
#     lore --pipeline 20.42 / 19.83 / 19.92 s, serve + submit --wait 20.13
#     / 19.12 / 21.11 s; medians 19.9 vs 20.1 s, ratio 1.011 (target
#     <= 1.05: met). CPU seconds (process + QEMUs) medians 20.4 vs 20.4,
#     ratio 1.001: the 13% CPU gap measured under load below does not
#     exist on an idle machine (it was QEMU's variance under contention).
#
# Measured 2026-12-01 on 2 cores shared with three other helpers (nice
# 10; the load is beside each figure: upper bounds, not idle figures).
#   wall (BOOTS=2, ROUNDS=3, /work/cold3/.test-cache), load 10.5-13:
#     lore --pipeline 47.7 / 55.6 / 55.1 s, serve + submit --wait 39.3 /
#     50.3 / 46.2 s; medians 55.1 vs 46.2 s, ratio 0.84 (target <= 1.05).
#     CPU seconds (process + QEMUs) 20.6 / 21.6 / 20.4 vs 21.1 / 24.8 /
#     23.4, medians 20.6 vs 23.4 (1.135). Before the fix (River polling
#     ten queues every 500 ms: ~3% of a core idle), at load 14-17: 61.6 vs
#     77.0 s (1.25), and at load 13-17 in a second run 0.51 (lore 167 s):
#     at this load single rounds swing by 2x either way. In one profiled
#     pair (load 12-15) serve's own process used 3.0 CPU-s (0.54 s of it
#     River: the SQLite notification outbox poll, 50 ms, fixed in
#     riversqlite) and lore's 3.2 (its total less its QEMUs); their QEMUs
#     17.6 and 20.4 CPU-s. Why serve's CPU median stays 13% higher is not
#     known: within QEMU's variance under load, but above it in 3 of 3.
#   pages (BENCHTIME=50x), p50 / p99 ms, target p99 < 50, load 8-12:
#                 list       list p10   filtered   evaluation  plot     queue       api-eval
#     sqlite  after   9.8/69.4   4.6/14.6   5.3/15.5   4.6/14.2    1.3/7.1  15.0/62.1   2.6/11.2
#             before  7.6/47.3   6.2/88.6   4.5/26.3   52.7/156.6  1.9/6.4  227/390     81.0/137.9
#     postgres after  18.8/43.0  23.2/63.6  22.4/228*  5.9/20.7    1.6/8.9  10.4/17.3   3.1/10.6
#             before  760/1347   34.8/62.5  9.8/30.0   6.2/18.4    1.2/7.2  5.4/35.8    2.3/12.7
#     ("before" is main before this session's dashboard changes, SQLite
#     at load 14, Postgres with the evaluation-page and queue changes but
#     not the list ones, load 13; the previous session's Postgres list was
#     476/940, page 10 30/81.) p50 is under 25 ms everywhere; p99 (the
#     second slowest of 50 requests) is not under 50 ms everywhere, and
#     swings between runs at this load: the same queue code gave SQLite
#     p99 60.6, 189.2 and 62.1 ms in three runs (*: two slow requests;
#     its p50 is 22 ms). What was slow and is
#     no longer: the evaluation page and its API read every River job to
#     filter by tag (now an index on args ->> 'evaluation_id'); the queue
#     page read 2,000 jobs (now counts by SQL and a bounded query per
#     section); the Postgres list hashed the samples table per row and
#     JIT-compiled the query on stale statistics (1,254 -> 10.6 ms in
#     EXPLAIN ANALYZE), and computed counts for the rows OFFSET skipped.
#   Inline SVG plots: 9,438 and 9,164 bytes.
set -euo pipefail
what=${1:-all}
boots=${BOOTS:-2}
rounds=${ROUNDS:-3}
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"

if [ "$what" = pages ] || [ "$what" = all ]; then
	go test ./pipelines/service/ -run '^$' -bench Dashboard -benchtime "${BENCHTIME:-300x}" -timeout 60m -v 2>&1 |
		grep -E 'Benchmark|stored|inline SVG|ok|FAIL'
fi
[ "$what" = wall ] || [ "$what" = all ] || exit 0
[ -n "${PATCHEVAL_CACHE_DIR:-}" ] || { echo "serve.sh wall: set PATCHEVAL_CACHE_DIR to a warm cache (kernels built)" >&2; exit 2; }

work=$(mktemp -d)
pids=()
cleanup() {
	for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; wait "$p" 2>/dev/null || true; done
	rm -rf "$work"
}
trap cleanup EXIT
msgid=20261102093000.4121-0-tester@example.org
tree=$(bash scripts/linux-tree.sh)
go build -o "$work/patcheval" ./cmd/patcheval
go build -o "$work/serve-inbox" ./internal/testinbox/cmd/serve-inbox
"$work/serve-inbox" mbox/testdata/threads/ppc-dynamic-preempt-v6.1-backport.mbox >"$work/url" 2>"$work/inbox.log" &
pids+=($!)
for _ in $(seq 600); do [ -s "$work/url" ] && break; sleep 1; done
url=$(head -1 "$work/url")
[ -n "$url" ] || { cat "$work/inbox.log" >&2; exit 3; }
from="Bench <bench@patcheval.invalid>"

# cpu PID: the CPU seconds of process PID and its reaped children so far
# (utime, stime, cutime, cstime of /proc/PID/stat).
cpu() { awk -v hz="$(getconf CLK_TCK)" '{printf "%.2f\n", ($14 + $15 + $16 + $17) / hz}' "/proc/$1/stat"; }

lore_run() { # $1: round
	local t0 t1
	t0=$(date +%s.%N)
	/usr/bin/time -f "%U + %S" -o "$work/lore-$1.cpu" "$work/patcheval" lore "$msgid" --lore "$url" --no-cache --pipeline ppc-preempt-dynamic --tree "$tree" \
		--boots "$boots" --db "$work/lore-$1.db" --out "$work/lore-$1" --from "$from" >"$work/lore-$1.out" 2>"$work/lore-$1.err" ||
		{ tail -20 "$work/lore-$1.err" >&2; exit 3; }
	t1=$(date +%s.%N)
	echo "$t1 - $t0" | bc >>"$work/lore.times"
	bc <"$work/lore-$1.cpu" >>"$work/lore.cpus"
}

serve_run() { # $1: round
	local port t2 t3 c2 c3 pid
	port=$((20000 + RANDOM % 20000))
	"$work/patcheval" serve --listen "127.0.0.1:$port" --db "$work/serve-$1.db" --lore "$url" \
		--allow-tree "$tree" --from "$from" >"$work/serve-$1.out" 2>"$work/serve-$1.err" &
	pid=$!
	pids+=("$pid")
	for _ in $(seq 300); do grep -q listening "$work/serve-$1.out" "$work/serve-$1.err" 2>/dev/null && break; sleep 0.2; done
	c2=$(cpu "$pid")
	t2=$(date +%s.%N)
	"$work/patcheval" submit "$msgid" --server "http://127.0.0.1:$port" --pipeline ppc-preempt-dynamic \
		--tree "$tree" --boots "$boots" --wait >"$work/submit-$1.out" 2>"$work/submit-$1.err" ||
		{ tail -20 "$work/submit-$1.err" "$work/serve-$1.err" >&2; exit 3; }
	t3=$(date +%s.%N)
	c3=$(cpu "$pid")
	kill -TERM "$pid"
	wait "$pid" || true
	echo "$t3 - $t2" | bc >>"$work/serve.times"
	echo "$c3 - $c2" | bc >>"$work/serve.cpus"
}

median() { sort -n "$1" | awk '{a[NR]=$1} END {if (NR%2) print a[(NR+1)/2]; else print (a[NR/2]+a[NR/2+1])/2}'; }

for r in $(seq "$rounds"); do
	if [ $((r % 2)) = 1 ]; then lore_run "$r"; serve_run "$r"; else serve_run "$r"; lore_run "$r"; fi
	echo "round $r: lore --pipeline $(tail -1 "$work/lore.times") s ($(tail -1 "$work/lore.cpus") CPU-s), serve + submit --wait $(tail -1 "$work/serve.times") s ($(tail -1 "$work/serve.cpus") CPU-s), load $(cut -d' ' -f1-3 /proc/loadavg)" >&2
done
lore=$(median "$work/lore.times")
serve=$(median "$work/serve.times")
printf 'lore --pipeline:        %6.1f s (median of %d)\n' "$lore" "$rounds"
printf 'serve + submit --wait:  %6.1f s (median of %d)\n' "$serve" "$rounds"
printf 'ratio:                  %6.3f (target <= 1.05)\n' "$(echo "$serve / $lore" | bc -l)"
# CPU seconds (the process and its QEMUs) depend far less than wall time
# on what else runs on the machine (QEMU's still vary by ~15% under load).
printf 'CPU-s lore / serve:     %6.1f / %.1f (medians), ratio %.3f\n' "$(median "$work/lore.cpus")" "$(median "$work/serve.cpus")" \
	"$(echo "$(median "$work/serve.cpus") / $(median "$work/lore.cpus")" | bc -l)"
echo "load average at the end: $(cut -d' ' -f1-3 /proc/loadavg)"
