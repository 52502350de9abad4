#!/usr/bin/env bash
# Benchmark `patcheval lore --pipeline default` on the bundled v6.1
# backport thread (ppc64le: base vs patched, syscall set with Debian's
# perf in the guest): wall time on a cold cache (fresh PATCHEVAL_CACHE_DIR:
# kernel builds, guest userland download) and warm (the same command again
# with a fresh state database: every build and the userland are cache
# hits, only the boots run).
#
#   bench/default.sh [--boots N] [--cache DIR] [--bin PATCHEVAL] [--warm]
#   # cold ~25 min on 2 idle cores (not re-measured since the lean configs)
#
# --cache reuses a cache directory (the "cold" run is then only as cold as
# that cache). The kernel tree comes from scripts/linux-tree.sh with the
# caller's PATCHEVAL_CACHE_DIR and is passed as --tree: its import is not
# part of either figure. Prints the load average before and after each run.
# --bin runs another patcheval binary (e.g. one built from main, whose boot
# configs match a warm --cache); --warm runs only the warm run (with a
# --cache that already holds the kernels and the userland).
# Targets: warm at most 1.2x the boots' own time (the report's boot +
# benchmark stages); the userland step under 2 s when cached.
# Prints both wall times and the stage table of each run.
set -euo pipefail
boots=2
cache=
bin=
only=
while [ $# -gt 0 ]; do
	case $1 in
	--boots) boots=$2; shift 2 ;;
	--cache) cache=$2; shift 2 ;;
	--bin) bin=$2; shift 2 ;;
	--warm) only=warm; shift ;;
	*) echo "usage: bench/default.sh [--boots N] [--cache DIR] [--bin PATCHEVAL] [--warm]" >&2; exit 2 ;;
	esac
done
root=$(cd "$(dirname "$0")/.." && pwd)
export PATH=$PATH:/usr/local/go/bin
work=${BENCH_DIR:-$(mktemp -d)}
mkdir -p "$work"
if [ -z "$bin" ]; then
	bin=$work/patcheval
	(cd "$root" && go build -o "$bin" ./cmd/patcheval)
fi
tree=$(bash "$root/scripts/linux-tree.sh")
export PATCHEVAL_CACHE_DIR=${cache:-$work/cache}
# BENCH_NICE: the runs' priority relative to the script's ("nice -n 10"
# by default, for a shared machine; "" keeps the caller's, e.g. a timing
# run started at nice -20 over other work).
nice=${BENCH_NICE-nice -n 10}
mbox=$root/mbox/testdata/threads/ppc-dynamic-preempt-v6.1-backport.mbox
run() {
	local name=$1
	local start end
	echo "$name: load before $(cat /proc/loadavg)"
	start=$(date +%s.%N)
	$nice "$bin" lore -m "$mbox" --pipeline default --tree "$tree" --base v6.1-debian --boots "$boots" \
		--db "$work/$name.db" --out "$work/$name" --from "Bench <bench@example.org>" >"$work/$name.log" 2>&1
	end=$(date +%s.%N)
	printf '%-5s %8.1f s\n' "$name" "$(echo "$end - $start" | bc)"
	echo "$name: load after $(cat /proc/loadavg)"
	sed -n '/^Wall time/,/^$/p' "$work/$name/report.txt"
	# Per kernel of a fresh cache: objects compiled and kcc hits.
	[ -z "$cache" ] || return 0
	for m in "$PATCHEVAL_CACHE_DIR"/builds/*/metadata.json; do
		[ -f "$m" ] && jq -r '"build \(.build.target_arch) \(.git.commit[0:12]): \(.results.objects_compiled) objects, kcc \(.results.ccache_hits) hits / \(.results.ccache_misses) misses, \(.results.duration.total | floor) s"' "$m"
	done
}
echo "default pipeline, $boots boot(s) per variant, cache $PATCHEVAL_CACHE_DIR"
[ "$only" = warm ] || run cold
run warm
echo "logs and reports in $work"
