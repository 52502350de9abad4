#!/usr/bin/env bash
# Benchmark `patcheval lore --pipeline default` on the bundled v6.1
# backport thread (ppc64le: base vs patched, syscall set with Debian's
# perf in the guest): wall time on a cold cache (fresh PATCHEVAL_CACHE_DIR:
# kernel builds, guest userland download) and warm (the same command again
# with a fresh state database: every build and the userland are cache
# hits, only the boots run).
#
#   bench/default.sh [--boots N] [--cache DIR]   # cold ~25 min on 2 cores
#
# --cache reuses a cache directory (the "cold" run is then only as cold as
# that cache). Targets: warm at most 1.2x the boots' own time (the report's
# boot + benchmark stages); the userland step under 2 s when cached.
# Prints both wall times and the stage table of each run.
set -euo pipefail
boots=2
cache=
while [ $# -gt 0 ]; do
	case $1 in
	--boots) boots=$2; shift 2 ;;
	--cache) cache=$2; shift 2 ;;
	*) echo "usage: bench/default.sh [--boots N] [--cache DIR]" >&2; exit 2 ;;
	esac
done
root=$(cd "$(dirname "$0")/.." && pwd)
export PATH=$PATH:/usr/local/go/bin
work=${BENCH_DIR:-$(mktemp -d)}
mkdir -p "$work"
bin=$work/patcheval
(cd "$root" && go build -o "$bin" ./cmd/patcheval)
tree=$(bash "$root/scripts/linux-tree.sh")
export PATCHEVAL_CACHE_DIR=${cache:-$work/cache}
mbox=$root/series/testdata/ppc-dynamic-preempt-v6.1-backport.mbox
run() {
	local name=$1
	local start end
	start=$(date +%s.%N)
	nice -n 10 "$bin" lore -m "$mbox" --pipeline default --tree "$tree" --base v6.1-debian --boots "$boots" \
		--db "$work/$name.db" --out "$work/$name" --from "Bench <bench@example.org>" >"$work/$name.log" 2>&1
	end=$(date +%s.%N)
	printf '%-5s %8.1f s\n' "$name" "$(echo "$end - $start" | bc)"
	sed -n '/^Wall time/,/^$/p' "$work/$name/report.txt" | head -3
}
echo "default pipeline, $boots boot(s) per variant, cache $PATCHEVAL_CACHE_DIR"
run cold
run warm
echo "logs and reports in $work"
