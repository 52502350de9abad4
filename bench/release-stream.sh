#!/usr/bin/env bash
# Benchmark a watch over Debian's real release stream (issue 29): the
# releases 6.12.117, 7.2.6, 7.2.9, 7.2.11, 7.2.12, 7.2.13 and 7.3.4
# imported into one release history (patcheval tree import's code),
# served over smart HTTP on loopback and tagged one at a time; after each
# tag a `watch run-now` (River jobs in-process) re-tests it: x86_64
# tinyconfig built with kcc, booted in deterministic QEMU, kill and
# getppid loops. Steps between releases are flagged and bisected as far
# as the history goes (the adjacent tag pair).
#
#   bench/release-stream.sh          # ~30-90 min on 2 cores; keep the machine quiet
#
# The kernel cache and the kcc store start empty
# ($PATCHEVAL_CACHE_DIR/bench-release-stream, removed first, unless
# PATCHEVAL_RELEASE_STREAM_RESUME=1 resumes an interrupted run); the Debian
# packages and the imported history are reused from $PATCHEVAL_CACHE_DIR.
# After the stream, v7.2.13 is built again with no caches at all as the
# reference for its re-test (target: a point release's re-test compiles
# in <= 0.25x of a cold build).
#
# Prints, from pipelines/service's BenchmarkReleaseStream: per tag the
# run-now's wall time, the build's seconds and objects compiled (and from
# kcc), the cold build, the ratio and the stream's wall time; writes
# summary.txt, watch-show.txt, history.svg and the bisection reports to
# $BENCH_DIR.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
export PATH=$PATH:/usr/local/go/bin
bench=${BENCH_DIR:-$(mktemp -d /tmp/patcheval-bench-stream.XXXXXX)}
mkdir -p "$bench"
export PATCHEVAL_RELEASE_STREAM_OUT=$bench
cd "$root"
{
	echo "commit $(git rev-parse --short HEAD), $(nproc) cores, $(date -u +%FT%TZ)"
	echo "load before: $(cut -d' ' -f1-3 /proc/loadavg)"
} | tee "$bench/machine.txt"
start=$(date +%s)
status=0
go test ./pipelines/service -run '^$' -bench '^BenchmarkReleaseStream$' -benchtime 1x -timeout 240m -v >"$bench/log.txt" 2>&1 || status=$?
grep -E '^(Benchmark|ok|FAIL|---|PASS)|release stream|re-tested in|cold build|re-test / cold|stream wall|re-test +[0-9]' "$bench/log.txt" || true
{
	echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)"
	echo "wall: $(( $(date +%s) - start )) s"
} | tee -a "$bench/machine.txt"
echo "results in $bench"
exit "$status"
