#!/usr/bin/env bash
# Benchmarks of `patcheval serve` (issue 11):
#
#   bench/serve.sh pages        # dashboard latency with 1,000 evaluations
#   bench/serve.sh wall         # serve + submit --wait vs lore --pipeline
#   bench/serve.sh              # both
#
# pages: the Go benchmark BenchmarkDashboard (pipelines/service) stores
# 1,000 evaluations and reports p50/p99 latency of the evaluations list,
# a filtered list, one evaluation's page, the SVG plot and the API
# (target: p99 < 50 ms), and the inline SVG plot's size.
#
# wall: the same evaluation (the bundled v6.1 backport thread from a local
# public-inbox, ppc-preempt-dynamic, BOOTS boots per variant) on a warm
# cache (kernels built, PATCHEVAL_CACHE_DIR) and a fresh database each, once
# through `lore --pipeline` and once through `serve` + `submit --wait`.
# Target: serve's wall time <= 1.05x lore's. Needs the 6.1 tree
# (scripts/linux-tree.sh, cached), public-inbox, QEMU; the first run builds
# the kernels (slow), so run it twice or after the test suite.
set -euo pipefail
what=${1:-all}
boots=${BOOTS:-2}
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"

if [ "$what" = pages ] || [ "$what" = all ]; then
	go test ./pipelines/service/ -run '^$' -bench Dashboard -benchtime "${BENCHTIME:-300x}" -v 2>&1 |
		grep -E 'Benchmark|stored|inline SVG|ok|FAIL'
fi
[ "$what" = wall ] || [ "$what" = all ] || exit 0

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

t0=$(date +%s.%N)
"$work/patcheval" lore "$msgid" --lore "$url" --no-cache --pipeline ppc-preempt-dynamic --tree "$tree" \
	--boots "$boots" --db "$work/lore.db" --out "$work/lore-out" --from "$from" >"$work/lore.out" 2>"$work/lore.err"
t1=$(date +%s.%N)

port=$((20000 + RANDOM % 20000))
"$work/patcheval" serve --listen "127.0.0.1:$port" --database "$work/serve.db" --lore "$url" \
	--allow-tree "$tree" --from "$from" >"$work/serve.out" 2>"$work/serve.err" &
pids+=($!)
for _ in $(seq 100); do grep -q listening "$work/serve.out" 2>/dev/null && break; sleep 0.2; done
t2=$(date +%s.%N)
"$work/patcheval" submit "$msgid" --server "http://127.0.0.1:$port" --pipeline ppc-preempt-dynamic \
	--tree "$tree" --boots "$boots" --wait >"$work/submit.out" 2>"$work/submit.err"
t3=$(date +%s.%N)

lore=$(echo "$t1 - $t0" | bc)
serve=$(echo "$t3 - $t2" | bc)
printf 'lore --pipeline:        %6.1f s\n' "$lore"
printf 'serve + submit --wait:  %6.1f s\n' "$serve"
printf 'ratio:                  %6.3f (target <= 1.05)\n' "$(echo "$serve / $lore" | bc -l)"
