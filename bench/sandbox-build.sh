#!/usr/bin/env bash
# Whole-build cost of the sandbox: the same small kernel (Debian's 6.1
# tree, x86_64 tinyconfig, no compiler cache, a fresh O= each time) built
# sandboxed (bubblewrap, internal/sandbox) and with PATCHEVAL_SANDBOX=off,
# in one run, alternating: sandboxed, off, sandboxed, off (ROUNDS pairs).
#
#   bench/sandbox-build.sh [-j N] [-r ROUNDS] [-t TARGET]...   # under nice 10
#
# -t builds only those make targets (kbuild directories such as
# kernel/sched/, after kbuild's prepare: host tools, objtool) instead of
# the whole kernel: on a loaded shared machine a whole tinyconfig build
# takes over an hour. patcheval then ends with "make succeeded but
# bzImage is missing": expected, the make is what is timed.
#
# One cache directory under $BENCH_DIR (default: a temp dir) holds the
# checked-out source for all builds (a --config-only build makes it first,
# untimed); before each timed build the workspace (O=, home) and the
# artifacts are removed, so every build compiles every object. The figure
# is the wall time of `patcheval build` (make under nice 10), with the
# load average before and after each build: the machine is shared, so
# read a pair only beside its load. Prints a table and writes
# $BENCH_DIR/results.txt.
set -euo pipefail
jobs=2
rounds=2
targets=()
while [ $# -gt 0 ]; do
	case $1 in
	-j) jobs=$2; shift 2 ;;
	-r) rounds=$2; shift 2 ;;
	-t) targets+=(--target "$2"); shift 2 ;;
	*) echo "usage: bench/sandbox-build.sh [-j N] [-r ROUNDS] [-t TARGET]..." >&2; exit 2 ;;
	esac
done
root=$(cd "$(dirname "$0")/.." && pwd)
command -v go >/dev/null || PATH="$PATH:/usr/local/go/bin"
bench=${BENCH_DIR:-$(mktemp -d /tmp/patcheval-bench-sandbox.XXXXXX)}
mkdir -p "$bench"
repo=$("$root/scripts/linux-tree.sh")
bin="$bench/patcheval"
(cd "$root" && go build -o "$bin" ./cmd/patcheval)
cache="$bench/cache"
mkdir -p "$cache"
args=(build --tree "$repo" --commit v6.1-debian --arch x86_64 --config tinyconfig
	--compiler-cache none --no-cache --nice 10 -j "$jobs" --cache-dir "$cache")
"$bin" "${args[@]}" --config-only >"$bench/prepare.log" 2>&1

out="$bench/results.txt"
{
	echo "# bench/sandbox-build.sh -j $jobs -r $rounds ${targets[*]:-}, $(date -u '+%Y-%m-%d %H:%M UTC'), commit $(git -C "$root" rev-parse --short HEAD)"
	echo "# machine: $(nproc) CPUs, $(uname -r); tree $(basename "$repo") v6.1-debian, x86_64 tinyconfig, no compiler cache"
	printf '%-10s %8s %8s %-16s %-16s %s\n' mode wall-s objects load-before load-after result
} >"$out"
for i in $(seq "$rounds"); do
	for mode in sandbox off; do
		rm -rf "$cache/builds/work" "$cache/builds/index"
		find "$cache/builds" -mindepth 1 -maxdepth 1 -name '[0-9a-f]*' -exec rm -rf {} +
		before=$(cut -d' ' -f1-3 /proc/loadavg | tr ' ' /)
		log="$bench/build-$mode-$i.log"
		start=$(date +%s.%N)
		rc=0
		if [ $mode = off ]; then
			PATCHEVAL_SANDBOX=off "$bin" "${args[@]}" "${targets[@]}" >"$log" 2>&1 || rc=$?
		else
			"$bin" "${args[@]}" "${targets[@]}" >"$log" 2>&1 || rc=$?
		fi
		result=ok
		if [ $rc != 0 ]; then
			result="exit $rc"
			if [ ${#targets[@]} -gt 0 ] && grep -q 'is missing (targets' "$log"; then
				result="make ok (no image: targets)"
			fi
		fi
		end=$(date +%s.%N)
		after=$(cut -d' ' -f1-3 /proc/loadavg | tr ' ' /)
		objs=$(find "$cache/builds/work" -name '*.o' 2>/dev/null | wc -l)
		printf '%-10s %8.1f %8s %-16s %-16s %s\n' "$mode" "$(echo "$end - $start" | bc)" "$objs" "$before" "$after" "$result" | tee -a "$out"
	done
done
cat "$out"
