#!/usr/bin/env bash
# stress-ng --kill bogo-ops/s per variant of the seed pipeline
# (ppc-preempt-dynamic: voluntary, voluntary+dyn, voluntary+dyn@full,
# full), next to the agent's kill loop (ns/op) and getppid loop, in the
# same boots: the shipped pipeline plus one benchmark,
#   [[benchmark]] name = "stress-ng", args = ["--kill", "1", "-t", T]
# (the seeds ran `stress-ng --kill 1 -t 23`). Deterministic QEMU, so -t
# counts virtual (instruction) seconds: one second is about 10^9 guest
# instructions, several real seconds under TCG.
#
#   bench/seed-stressng.sh [-t SECONDS] [--boots N] [--bin PATCHEVAL]
#
# Defaults: -t 5 (23 to match the seeds, about 4x longer), 2 boots per
# variant (deterministic boots repeat within 0.1% for kill). The kernels
# come from $PATCHEVAL_CACHE_DIR (three ppc64le builds when it is cold).
# --bin runs another patcheval binary (e.g. one built from main, whose boot
# configs match a warm cache). Prints one line per variant and benchmark
# (mean over boots), the load average before and after, and where the
# report is.
set -euo pipefail
secs=5
boots=2
bin=
while [ $# -gt 0 ]; do
	case $1 in
	-t) secs=$2; shift 2 ;;
	--boots) boots=$2; shift 2 ;;
	--bin) bin=$2; shift 2 ;;
	*) echo "usage: bench/seed-stressng.sh [-t SECONDS] [--boots N] [--bin PATCHEVAL]" >&2; exit 2 ;;
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
pipe=$work/ppc-preempt-dynamic-stressng.toml
# The shipped fragment names resolve from any file; nothing else in the
# seed pipeline is relative to its directory.
{
	# The boot timeout is wall time: the shipped 10 minutes did not hold
	# a -t 5 boot at load 15 (kill and getppid done, stress-ng not).
	sed -e 's/^name = "ppc-preempt-dynamic"/name = "ppc-preempt-dynamic-stressng"/' \
		-e 's/^timeout = "10m"/timeout = "60m"/' "$root/pipelines/ppc-preempt-dynamic.toml"
	printf '\n[[benchmark]]\nname = "stress-ng"\nargs = ["--kill", "1", "-t", "%s"]\n' "$secs"
} >"$pipe"
mbox=$root/mbox/testdata/threads/ppc-dynamic-preempt-v6.1-backport.mbox
echo "seed pipeline + stress-ng --kill 1 -t $secs, $boots boot(s) per variant, cache ${PATCHEVAL_CACHE_DIR:-default}"
echo "load before: $(cat /proc/loadavg)"
start=$(date +%s.%N)
nice -n 10 "$bin" lore -m "$mbox" --pipeline "$pipe" --tree "$tree" --boots "$boots" \
	--db "$work/seed.db" --out "$work/out" --from "Bench <bench@example.org>" >"$work/seed.log" 2>&1 || {
	echo "patcheval failed (exit $?); see $work/seed.log" >&2
	tail -20 "$work/seed.log" >&2
	exit 1
}
end=$(date +%s.%N)
echo "load after:  $(cat /proc/loadavg)"
printf 'wall %.1f s\n' "$(echo "$end - $start" | bc)"
jq -r '.benchmarks[] | . as $b | .rows[] |
	[.variant, $b.name, ($b.source // ""), $b.metric, (.mean | tostring), ($b.unit // ""), (.n | tostring), ((if .mean != 0 then 100 * .stddev / .mean else 0 end) | tostring)] | @tsv' \
	"$work/out/report.json" |
	awk -F'\t' 'BEGIN { printf "%-20s %-36s %-12s %-28s %14s %-11s %3s %8s\n", "variant", "benchmark", "source", "metric", "mean", "unit", "n", "cv%" }
		{ printf "%-20s %-36s %-12s %-28s %14.2f %-11s %3s %8.3f\n", $1, $2, $3, $4, $5, $6, $7, $8 }'
grep -m1 'perf events the guest counts' "$work/out/report.txt" | sed 's/.*perf events/perf events/' || true
echo "report: $work/out/report.txt"
