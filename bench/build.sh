#!/usr/bin/env bash
# Benchmark patcheval build: two Variants (voluntary, full) x (base,
# patched) of Debian's 6.1 ppc64le tree with the pseries boot fragment over
# tinyconfig, against four naive clean builds (fresh O= directory, no
# ccache, merge_config.sh + olddefconfig + make vmlinux); then a repeated
# request (cache hit).
#
#   bench/build.sh [-j N]      # ~30 min of CPU on 2 cores; runs under nice
#
# Targets: patcheval's total at most 0.6x naive; the repeat under 5 s.
# Uses a fresh cache directory (no artifacts, empty ccache) under
# $BENCH_DIR (default: a temp dir), and the cached tree from
# scripts/linux-tree.sh. Prints a table and writes $BENCH_DIR/results.txt.
set -euo pipefail
jobs=2
[ "${1:-}" = "-j" ] && jobs=$2
root=$(cd "$(dirname "$0")/.." && pwd)
bench=${BENCH_DIR:-$(mktemp -d /tmp/patcheval-bench-build.XXXXXX)}
mkdir -p "$bench"
repo=$("$root/scripts/linux-tree.sh")
bin="$bench/patcheval"
(cd "$root" && go build -o "$bin" ./cmd/patcheval)

# The backport series as a commit on v6.1-debian, made at object level with
# fixed committer and date (the same commit buildtest.PatchedCommit makes).
ref=refs/tags/patcheval-test/v6.1-backport
if ! patched=$(git --git-dir="$repo" rev-parse -q --verify "$ref^{commit}"); then
	tmp=$(mktemp -d)
	git mailsplit -o"$tmp" "$root/build/buildtest/testdata/ppc-dynamic-preempt-v6.1-backport.mbox" >/dev/null
	export GIT_INDEX_FILE=$tmp/index
	parent=$(git --git-dir="$repo" rev-parse v6.1-debian^{commit})
	git --git-dir="$repo" read-tree "$parent"
	for m in "$tmp"/0*; do
		grep -q '^diff --git ' "$m" || continue
		info=$(git --git-dir="$repo" mailinfo "$tmp/msg" "$tmp/patch" <"$m")
		git --git-dir="$repo" apply --cached "$tmp/patch"
		tree=$(git --git-dir="$repo" write-tree)
		parent=$({ sed -n 's/^Subject: //p' <<<"$info"; echo; cat "$tmp/msg"; } |
			GIT_AUTHOR_NAME=$(sed -n 's/^Author: //p' <<<"$info") GIT_AUTHOR_EMAIL=$(sed -n 's/^Email: //p' <<<"$info") \
			GIT_AUTHOR_DATE=$(sed -n 's/^Date: //p' <<<"$info") \
			GIT_COMMITTER_NAME="patcheval test" GIT_COMMITTER_EMAIL=test@patcheval.invalid GIT_COMMITTER_DATE=2026-11-02T10:00:00Z \
			git --git-dir="$repo" commit-tree "$tree" -p "$parent")
	done
	unset GIT_INDEX_FILE
	git --git-dir="$repo" update-ref "$ref" "$parent"
	patched=$parent
	rm -rf "$tmp"
fi
echo "bench: tree $repo, base v6.1-debian, patched $patched, -j$jobs, dir $bench" >&2

now() { date +%s.%N; }
secs() { awk -v a="$1" -v b="$2" 'BEGIN{printf "%.1f", b-a}'; }
frag="$root/build/configs/ppc64le-pseries.config"
variants=(--variant voluntary:PREEMPT_VOLUNTARY=y --variant full:PREEMPT=y)

# patcheval: base then patched, both Variants concurrently within -j.
cache="$bench/cache"
t0=$(now)
nice -n 10 "$bin" build --cache-dir "$cache" --tree "$repo" --commit v6.1-debian --arch ppc64le \
	--config tinyconfig --fragment "$frag" "${variants[@]}" -j "$jobs" >"$bench/ours-base.out" 2>"$bench/ours-base.log"
t1=$(now)
nice -n 10 "$bin" build --cache-dir "$cache" --tree "$repo" --commit "$patched" --arch ppc64le \
	--config tinyconfig --fragment "$frag" "${variants[@]}" -j "$jobs" >"$bench/ours-patched.out" 2>"$bench/ours-patched.log"
t2=$(now)
"$bin" build --cache-dir "$cache" --tree "$repo" --commit "$patched" --arch ppc64le \
	--config tinyconfig --fragment "$frag" "${variants[@]}" -j "$jobs" >"$bench/ours-repeat.out" 2>"$bench/ours-repeat.log"
t3=$(now)
ours_base=$(secs "$t0" "$t1"); ours_patched=$(secs "$t1" "$t2"); repeat=$(secs "$t2" "$t3")
grep -q cached "$bench/ours-repeat.out" || { echo "bench: repeat was not a cache hit" >&2; cat "$bench/ours-repeat.out" >&2; }

# Naive: sources extracted once per commit (not timed), then four clean
# builds: fresh O=, tinyconfig, merge_config.sh, olddefconfig, make vmlinux.
naive_total=0
declare -A naive
for commit in v6.1-debian "$patched"; do
	src="$bench/naive-src"
	rm -rf "$src" && mkdir -p "$src"
	git --git-dir="$repo" archive "$commit" | tar -x -C "$src"
	for v in voluntary full; do
		sym=PREEMPT_VOLUNTARY
		[ $v = full ] && sym=PREEMPT
		o="$bench/naive-out"
		rm -rf "$o" && mkdir -p "$o"
		printf 'CONFIG_%s=y\n' "$sym" >"$bench/variant.config"
		mk=(make -C "$src" O="$o" ARCH=powerpc CROSS_COMPILE=powerpc64le-linux-gnu-)
		s=$(now)
		{
			nice -n 10 "${mk[@]}" tinyconfig
			(cd "$src" && nice -n 10 env ARCH=powerpc CROSS_COMPILE=powerpc64le-linux-gnu- \
				scripts/kconfig/merge_config.sh -m -O "$o" "$o/.config" "$frag" "$bench/variant.config")
			nice -n 10 "${mk[@]}" olddefconfig
			CCACHE_DISABLE=1 nice -n 10 "${mk[@]}" -j"$jobs" vmlinux
		} >"$bench/naive-$v-$(echo "$commit" | cut -c1-8).log" 2>&1
		e=$(now)
		naive[$commit/$v]=$(secs "$s" "$e")
		naive_total=$(awk -v a="$naive_total" -v b="${naive[$commit/$v]}" 'BEGIN{printf "%.1f", a+b}')
		echo "bench: naive $commit $v: ${naive[$commit/$v]} s" >&2
	done
done
rm -rf "$bench/naive-src" "$bench/naive-out"

ours_total=$(awk -v a="$ours_base" -v b="$ours_patched" 'BEGIN{printf "%.1f", a+b}')
ratio=$(awk -v a="$ours_total" -v b="$naive_total" 'BEGIN{printf "%.2f", a/b}')
{
	echo "patcheval build benchmark ($(date -u +%FT%TZ), $(nproc) CPUs, -j$jobs, load $(cut -d' ' -f1-3 /proc/loadavg))"
	echo "  patcheval base (2 variants, fresh checkout):   ${ours_base} s"
	echo "  patcheval patched (2 variants, incremental):   ${ours_patched} s"
	echo "  patcheval total:                               ${ours_total} s"
	for k in "${!naive[@]}"; do echo "  naive clean build $k: ${naive[$k]} s"; done
	echo "  naive total (4 clean builds):                  ${naive_total} s"
	echo "  ratio patcheval/naive:                         ${ratio} (target <= 0.6)"
	echo "  repeated request (cache hit):                  ${repeat} s (target < 5)"
} | tee "$bench/results.txt"
