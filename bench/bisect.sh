#!/usr/bin/env bash
# Benchmark the re-test watch and the automatic bisection (issue 12) on
# the synthetic history the end-to-end test serves over smart HTTP:
# Debian's 6.1 tree + 25 commits, v6.2-rc1 on the first, v6.2-rc2 on the
# last, one commit between that does not build and one that puts a loop
# into getppid() (x86_64 tinyconfig, deterministic QEMU).
#
#   bench/bisect.sh [--clean]      # ~15-40 min on 2 busy cores; under nice
#
# Prints, from pipelines/service's BenchmarkRetestBisect (one iteration;
# the watch runs through its River jobs, as watch run-now runs it):
#   builds / bound       kernels compiled by the bisection vs ceil(log2(N)) + 2
#   step-build-s         mean incremental build of a bisection step
#                        (same O= and kcc as the variant builds)
#   first-tick-s         the watch's first tick: a fresh O= directory with a
#                        warm kcc store, two boots
#   bisect-s             the bisection's wall time
#   tag-to-culprit-s     v6.2-rc2 appears -> its re-test, the event, the
#                        bisection and the culprit's report are done
#   clean-build-s        (--clean) the culprit built from scratch: fresh
#                        cache, no compiler cache; step/clean is the ratio
#
# Targets: builds <= bound (7 for 24 commits); a step build at most a
# quarter of a clean build. Each run leaves one O= directory of the
# benchmark's recipe in $PATCHEVAL_CACHE_DIR/builds/work (a nonce makes the
# recipe new); remove old ones when disk matters.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
clean=0
while [ $# -gt 0 ]; do
	case $1 in
	--clean) clean=1; shift ;;
	*) echo "usage: bench/bisect.sh [--clean]" >&2; exit 2 ;;
	esac
done
export PATH=$PATH:/usr/local/go/bin
export PATCHEVAL_BENCH_CLEAN=$clean
log=${BENCH_LOG:-$(mktemp /tmp/patcheval-bench-bisect.XXXXXX.log)}
cd "$root"
start=$(date +%s)
nice -n 10 go test ./pipelines/service/ -run '^$' -bench '^BenchmarkRetestBisect$' -benchtime 1x -timeout 150m -v 2>&1 | tee "$log" |
	grep -E '^(Benchmark|    bench_test|ok|FAIL|--- )' || true
echo "wall: $(( $(date +%s) - start )) s; full log: $log"
grep -q '^ok' "$log"
