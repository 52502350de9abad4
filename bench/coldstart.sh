#!/usr/bin/env bash
# The first run as a new user meets it: scripts/main-job with a fresh cache
# directory (kernel tree, kernel builds, kcc store and guest agents all
# empty), stage by stage, then the same run again with that cache warm.
#
#   bench/coldstart.sh                 # cold, then warm
#   bench/coldstart.sh --warm-only     # warm run on BENCH_DIR's cache
#
# Stages: the tree import (scripts/linux-tree.sh, timed alone first), then
# from the main job's report.json: fetch, apply, build (and each kernel's
# own build time, objects compiled, kcc hits/misses), boot, benchmark,
# report; plus the whole main job's wall time. Records `uptime` before and
# after: on a shared machine the figures mean little without the load.
# Target (issue 19): cold under 12 minutes on 2 cores, import under 60 s.
# Writes $BENCH_DIR/results.txt; BENCH_DIR defaults to a new /tmp dir.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
bench=${BENCH_DIR:-$(mktemp -d /tmp/patcheval-bench-coldstart.XXXXXX)}
mkdir -p "$bench"
export PATCHEVAL_CACHE_DIR=$bench/cache
# A new user has no evaluation store either: with the caller's, a "cold"
# run would resume a finished evaluation (or trip over an old schema).
export PATCHEVAL_STATE_DIR=$bench/state
command -v go >/dev/null || PATH="$PATH:/usr/local/go/bin"
results=$bench/results.txt
modes="cold warm"
[ "${1:-}" = --warm-only ] && modes=warm

now() { date +%s.%N; }
secs() { echo "$2 - $1" | bc; }
say() { echo "$*" | tee -a "$results"; }

# report NAME OUTDIR: the stages and kernels of one main-job run.
report() {
	python3 - "$1" "$2/report.json" <<'EOF' | tee -a "$results"
import json, os, sys
name, path = sys.argv[1], sys.argv[2]
r = json.load(open(path))
for t in r.get("timings", []):
    print(f"{name:5} stage {t['stage']:10} {t['duration_ns'] / 1e9:8.1f} s")
seen = set()
for v in r.get("variants", []):
    img = v.get("kernel", {}).get("image", "")
    meta = os.path.join(os.path.dirname(img), "metadata.json") if img else ""
    if not meta or meta in seen or not os.path.exists(meta):
        continue
    seen.add(meta)
    m = json.load(open(meta))["results"]
    print(f"{name:5} kernel {v['name']:20} {v.get('build_seconds', 0):8.1f} s  "
          f"{m.get('objects_compiled', 0)} objects, kcc {m.get('ccache_hits', 0)} hits "
          f"{m.get('ccache_misses', 0)} misses")
EOF
}

for mode in $modes; do
	if [ "$mode" = cold ]; then
		rm -rf "$PATCHEVAL_CACHE_DIR" "$PATCHEVAL_STATE_DIR"
		mkdir -p "$PATCHEVAL_CACHE_DIR"
	fi
	say "$mode: load before: $(uptime)"
	t0=$(now)
	"$root/scripts/linux-tree.sh" >/dev/null
	t1=$(now)
	say "$mode  stage import     $(printf '%8.1f' "$(secs "$t0" "$t1")") s"
	out=$bench/$mode-out
	rm -rf "$out"
	(cd "$root" && scripts/main-job --out "$out") >"$bench/$mode.log" 2>&1 ||
		{ tail -20 "$bench/$mode.log" >&2; exit 1; }
	t2=$(now)
	report "$mode" "$out"
	say "$mode  main job total   $(printf '%8.1f' "$(secs "$t0" "$t2")") s (import included)"
	say "$mode: load after: $(uptime)"
done
