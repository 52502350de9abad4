#!/usr/bin/env bash
# Benchmark: `patcheval lore <msgid> --am-out DIR` against `b4 am <msgid>`
# on the same local public-inbox server (public-inbox-httpd on loopback,
# started by internal/testinbox/cmd/serve-inbox), on the 19-message powerpc
# thread (mbox/testdata/threads/ppc-dynamic-preempt-v4.mbox + the arm64
# follow-up). Both fetch the thread over HTTP every run (no caches:
# patcheval --no-cache, b4 -C) and write a git-am-ready mbox.
#
#   bench/lore.sh [RUNS]        # default 20 runs of each, interleaved
#
# Reports wall time (median, mean, min, max) and peak RSS (max) per tool as
# measured by /usr/bin/time -v, and the ratio patcheval/b4 (target <= 0.1
# of b4's wall time). Then runs the Go benchmark for resolving a generated
# 1,000-message thread (target < 200 ms). Not a timed test; needs
# public-inbox, b4, git, Go and /usr/bin/time (Debian package "time").
set -euo pipefail

runs=${1:-20}
root=$(cd "$(dirname "$0")/.." && pwd)
# The patch (1/1): public-inbox's thread for it has all 19 messages (asked
# by the cover letter's Message-ID it leaves out the orphaned arm64 reply).
msgid=20250210194600.322cfa9d-1-sshegde@linux.ibm.com

for tool in b4 public-inbox-httpd go curl; do
	command -v "$tool" >/dev/null || { echo "bench/lore.sh: $tool not installed" >&2; exit 3; }
done
[ -x /usr/bin/time ] || { echo "bench/lore.sh: /usr/bin/time missing (apt-get install time)" >&2; exit 3; }

# Keep Go's caches when HOME is replaced below.
export GOMODCACHE=$(go env GOMODCACHE) GOCACHE=$(go env GOCACHE) GOPATH=$(go env GOPATH)
work=$(mktemp -d)
server=
cleanup() {
	if [ -n "$server" ]; then kill "$server" 2>/dev/null || true; wait "$server" 2>/dev/null || true; fi
	rm -rf "$work"
}
trap cleanup EXIT

cd "$root"
go build -o "$work/patcheval" ./cmd/patcheval
go build -o "$work/serve-inbox" ./internal/testinbox/cmd/serve-inbox

echo "starting public-inbox-httpd with the powerpc thread (imports take a while)..." >&2
# Import order matters to public-inbox's threading of the orphaned arm64
# reply (its parent is missing): imported first, it joins the thread of
# the patch by subject, and the thread has all 19 messages.
"$work/serve-inbox" mbox/testdata/threads/ppc-dynamic-preempt-arm64-followup.mbox \
	mbox/testdata/threads/ppc-dynamic-preempt-v4.mbox >"$work/url" 2>"$work/serve.log" &
server=$!
for _ in $(seq 600); do
	[ -s "$work/url" ] && break
	kill -0 "$server" 2>/dev/null || { cat "$work/serve.log" >&2; exit 3; }
	sleep 1
done
url=$(head -1 "$work/url")
[ -n "$url" ] || { echo "bench/lore.sh: server did not start" >&2; cat "$work/serve.log" >&2; exit 3; }
echo "server: $url" >&2

# b4 reads its settings through git config; keep the user's config out.
export HOME="$work/home" GIT_CONFIG_NOSYSTEM=1 XDG_CACHE_HOME="$work/cache"
mkdir -p "$HOME"
export GIT_CONFIG_COUNT=4 \
	GIT_CONFIG_KEY_0=b4.midmask GIT_CONFIG_VALUE_0="$url/all/%s" \
	GIT_CONFIG_KEY_1=b4.linkmask GIT_CONFIG_VALUE_1="https://patch.msgid.link/%s" \
	GIT_CONFIG_KEY_2=user.name GIT_CONFIG_VALUE_2="Bench" \
	GIT_CONFIG_KEY_3=user.email GIT_CONFIG_VALUE_3="bench@patcheval.invalid"
export PATCHEVAL_CACHE_DIR="$work/pcache"

# One checked run of each: both must find the 19 messages and write 1 patch.
"$work/patcheval" lore --lore "$url" --no-cache --am-out "$work/p" "$msgid" >"$work/p.out" 2>&1 ||
	{ echo "patcheval lore failed:" >&2; cat "$work/p.out" >&2; exit 1; }
mkdir -p "$work/b"
b4 am -C -l -o "$work/b" "$msgid" >"$work/b.out" 2>&1 || { echo "b4 am failed:" >&2; cat "$work/b.out" >&2; exit 1; }
# The server's thread has 19 messages; b4 keeps 18 of them (its "strict
# thread" drops the orphan, whose References name only a missing message),
# patcheval keeps all 19 and lists the orphan.
n=$(curl -s "$url/all/${msgid/@/%40}/t.mbox.gz" | gunzip | grep -c '^From mboxrd@z')
[ "$n" = 19 ] || { echo "the server's thread has $n messages, want 19" >&2; exit 1; }
grep -qE "Analyzing 1[89] messages" "$work/b.out" || { echo "b4 did not see the thread:" >&2; cat "$work/b.out" >&2; exit 1; }
grep -q "Orphans" "$work/p.out" || { echo "patcheval did not see the 19th (orphan) message:" >&2; cat "$work/p.out" >&2; exit 1; }
[ "$(grep -c '^From mboxrd@z' "$work"/p/*.mbx)" = 1 ] || { echo "patcheval did not write 1 patch" >&2; exit 1; }

measure() { # name cmd... -> appends "wall_seconds rss_kb" to $work/$name
	local name=$1; shift
	/usr/bin/time -v -o "$work/time.$name" "$@" >/dev/null 2>&1 || { echo "$name failed: $*" >&2; cat "$work/time.$name" >&2; exit 1; }
	awk -F': ' '
		/Elapsed \(wall clock\)/ { n = split($2, a, ":"); s = 0; for (i = 1; i <= n; i++) s = s * 60 + a[i] }
		/Maximum resident set size/ { r = $2 }
		END { print s, r }' "$work/time.$name" >>"$work/res.$name"
}

echo "running $runs runs of each, interleaved..." >&2
for i in $(seq "$runs"); do
	rm -rf "$work/p" "$work/b"
	mkdir -p "$work/b"
	measure patcheval "$work/patcheval" lore --lore "$url" --no-cache --am-out "$work/p" "$msgid"
	measure b4 b4 am -C -l -o "$work/b" "$msgid"
done

stats() { # file -> "median mean min max maxrss"
	sort -n "$1" | awk '{ w[NR] = $1; s += $1; if ($2 > r) r = $2 }
		END { m = (NR % 2) ? w[(NR + 1) / 2] : (w[NR / 2] + w[NR / 2 + 1]) / 2;
		      printf "%.3f %.3f %.3f %.3f %d\n", m, s / NR, w[1], w[NR], r }'
}
read -r pm pa pmin pmax prss < <(stats "$work/res.patcheval")
read -r bm ba bmin bmax brss < <(stats "$work/res.b4")

echo
echo "patcheval lore --am-out vs b4 am, 19-message thread, $runs runs each, $(nproc) CPUs, load $(cut -d' ' -f1-3 /proc/loadavg)"
printf "%-10s %10s %10s %10s %10s %14s\n" tool "median s" "mean s" "min s" "max s" "peak RSS KiB"
printf "%-10s %10s %10s %10s %10s %14s\n" patcheval "$pm" "$pa" "$pmin" "$pmax" "$prss"
printf "%-10s %10s %10s %10s %10s %14s\n" b4 "$bm" "$ba" "$bmin" "$bmax" "$brss"
awk -v p="$pm" -v b="$bm" -v pr="$prss" -v br="$brss" 'BEGIN {
	r = (b > 0) ? p / b : 0
	printf "wall time ratio patcheval/b4 (median): %.3f (target <= 0.100: %s)\n", r, (r <= 0.1) ? "met" : "NOT met"
	printf "peak RSS ratio patcheval/b4: %.2f\n", (br > 0) ? pr / br : 0 }'

echo
echo "Resolve of a generated 1,000-message thread (target < 200 ms):"
go test ./series -run '^$' -bench 'BenchmarkResolve1000' -benchtime 20x -benchmem | grep -E '^Benchmark'
