#!/usr/bin/env bash
# Benchmark patcheval build: two Variants (voluntary, full) x (base,
# patched) of Debian's 6.1 ppc64le tree with the pseries boot fragment over
# tinyconfig, against four naive clean builds (fresh O= directory, no
# ccache, merge_config.sh + olddefconfig + make vmlinux); then a repeated
# request (cache hit).
#
# Two series, in this order after the base: a one-line fix in
# kernel/sched/core.c ("typical": kbuild remakes one object), then the seed
# backport ("seed": it adds asm/preempt.h and selects
# HAVE_PREEMPT_DYNAMIC_KEY, so kbuild remakes every object and only the
# compiler cache can tell that their tokens did not change). The naive
# figure for the one-line fix is the base pair's (a clean build does not
# care which line changed).
#
#   bench/build.sh [-j N] [--only ours|naive]   # ~50 min on 2 cores; under nice
#
# --only runs one half; with the same BENCH_DIR the other half's figures
# (naive.txt / ours.txt) are reused for the ratio. Build logs carry a
# timestamp per line (phase breakdown).
#
# Targets: patcheval's total at most 0.6x naive; the repeat under 5 s.
# Uses a fresh cache directory (no artifacts, empty compiler cache) under
# $BENCH_DIR (default: a temp dir), and the cached tree from
# scripts/linux-tree.sh. Prints a table and writes $BENCH_DIR/results.txt.
set -euo pipefail
jobs=2
only=
while [ $# -gt 0 ]; do
	case $1 in
	-j) jobs=$2; shift 2 ;;
	--only) only=$2; shift 2 ;;
	*) echo "usage: bench/build.sh [-j N] [--only ours|naive]" >&2; exit 2 ;;
	esac
done
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
	git mailsplit -o"$tmp" "$root/mbox/testdata/threads/ppc-dynamic-preempt-v6.1-backport.mbox" >/dev/null
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
# The one-line fix, also a fixed commit on v6.1-debian.
fixref=refs/tags/patcheval-bench/v6.1-oneline
if ! fix=$(git --git-dir="$repo" rev-parse -q --verify "$fixref^{commit}"); then
	tmp=$(mktemp -d)
	export GIT_INDEX_FILE=$tmp/index
	git --git-dir="$repo" read-tree v6.1-debian
	blob=$(git --git-dir="$repo" show v6.1-debian:kernel/sched/core.c |
		sed 's/^const_debug unsigned int sysctl_sched_nr_migrate = SCHED_NR_MIGRATE_BREAK;$/const_debug unsigned int sysctl_sched_nr_migrate = SCHED_NR_MIGRATE_BREAK \/ 2;/' |
		git --git-dir="$repo" hash-object -w --stdin)
	git --git-dir="$repo" update-index --cacheinfo 100644,"$blob",kernel/sched/core.c
	tree=$(git --git-dir="$repo" write-tree)
	fix=$(echo "sched: halve sysctl_sched_nr_migrate (bench: a one-line fix)" |
		GIT_AUTHOR_NAME="patcheval bench" GIT_AUTHOR_EMAIL=bench@patcheval.invalid GIT_AUTHOR_DATE=2026-11-02T10:00:00Z \
		GIT_COMMITTER_NAME="patcheval bench" GIT_COMMITTER_EMAIL=bench@patcheval.invalid GIT_COMMITTER_DATE=2026-11-02T10:00:00Z \
		git --git-dir="$repo" commit-tree "$tree" -p "$(git --git-dir="$repo" rev-parse v6.1-debian^{commit})")
	unset GIT_INDEX_FILE
	[ "$(git --git-dir="$repo" diff --numstat v6.1-debian "$fix" | wc -l)" = 1 ] || { echo "bench: the one-line fix did not apply" >&2; exit 3; }
	git --git-dir="$repo" update-ref "$fixref" "$fix"
	rm -rf "$tmp"
fi
echo "bench: tree $repo, base v6.1-debian, one-line fix $fix, seed backport $patched, -j$jobs, dir $bench" >&2

now() { date +%s.%N; }
secs() { awk -v a="$1" -v b="$2" 'BEGIN{printf "%.1f", b-a}'; }
# stamp prefixes each line with seconds since the epoch (phase breakdown).
stamp() { perl -MTime::HiRes=time -ne '$|=1; printf "%.2f %s", time, $_'; }
frag="$root/build/configs/ppc64le-pseries.config"
variants=(--variant voluntary:PREEMPT_VOLUNTARY=y --variant full:PREEMPT=y)

if [ "$only" != naive ]; then
	# patcheval: base then patched, both Variants concurrently within -j.
	cache="$bench/cache"
	rm -rf "$cache"
	common=(--cache-dir "$cache" --tree "$repo" --arch ppc64le --config tinyconfig --fragment "$frag" "${variants[@]}" -j "$jobs")
	t0=$(now)
	nice -n 10 "$bin" build "${common[@]}" --commit v6.1-debian >"$bench/ours-base.out" 2> >(stamp >"$bench/ours-base.log")
	t1=$(now)
	nice -n 10 "$bin" build "${common[@]}" --commit "$fix" >"$bench/ours-fix.out" 2> >(stamp >"$bench/ours-fix.log")
	t2=$(now)
	nice -n 10 "$bin" build "${common[@]}" --commit "$patched" >"$bench/ours-patched.out" 2> >(stamp >"$bench/ours-patched.log")
	t3=$(now)
	"$bin" build "${common[@]}" --commit "$patched" >"$bench/ours-repeat.out" 2>"$bench/ours-repeat.log"
	t4=$(now)
	grep -q cached "$bench/ours-repeat.log" || { echo "bench: repeat was not a cache hit" >&2; cat "$bench/ours-repeat.log" >&2; }
	printf 'ours_base=%s\nours_fix=%s\nours_patched=%s\nrepeat=%s\n' "$(secs "$t0" "$t1")" "$(secs "$t1" "$t2")" \
		"$(secs "$t2" "$t3")" "$(awk -v a="$t3" -v b="$t4" 'BEGIN{printf "%.3f", b-a}')" >"$bench/ours.txt"
	echo "bench: patcheval done: $(tr '\n' ' ' <"$bench/ours.txt")" >&2
fi

if [ "$only" != ours ]; then
	# Naive: sources extracted once per commit (not timed), then four clean
	# builds: fresh O=, tinyconfig, merge_config.sh, olddefconfig, make vmlinux.
	: >"$bench/naive.txt"
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
			} 2>&1 | stamp >"$bench/naive-$v-$(echo "$commit" | cut -c1-8).log"
			e=$(now)
			echo "naive_$(echo "$commit" | cut -c1-8)_$v=$(secs "$s" "$e")" >>"$bench/naive.txt"
			echo "bench: naive $commit $v: $(secs "$s" "$e") s" >&2
		done
	done
	rm -rf "$bench/naive-src" "$bench/naive-out"
fi

[ -f "$bench/ours.txt" ] && [ -f "$bench/naive.txt" ] || exit 0
. "$bench/ours.txt"
naive_total=$(awk -F= '{t+=$2} END{printf "%.1f", t}' "$bench/naive.txt")
naive_base=$(awk -F= '/^naive_v6.1-deb_/ {t+=$2} END{printf "%.1f", t}' "$bench/naive.txt")
ours_total=$(awk -v a="$ours_base" -v b="$ours_patched" 'BEGIN{printf "%.1f", a+b}')
ratio=$(awk -v a="$ours_total" -v b="$naive_total" 'BEGIN{printf "%.2f", a/b}')
fix_total=$(awk -v a="$ours_base" -v b="$ours_fix" 'BEGIN{printf "%.1f", a+b}')
fix_naive=$(awk -v a="$naive_base" 'BEGIN{printf "%.1f", 2*a}')
fix_ratio=$(awk -v a="$fix_total" -v b="$fix_naive" 'BEGIN{printf "%.2f", a/b}')
kcc() { sed -n 's/.*] \([^ ]*\): built vmlinux in \([^ ]*\) (\([0-9]*\) objects, \([0-9]*\) compiled, \([0-9]*\) from kcc.*/\1 \2: \3 made, \4 compiled, \5 from kcc/p' "$1" | paste -sd';' -; }
{
	echo "patcheval build benchmark ($(date -u +%FT%TZ), $(nproc) CPUs, -j$jobs, load $(cut -d' ' -f1-3 /proc/loadavg))"
	sed 's/^naive_/  naive clean build /; s/=/: /; s/$/ s/' "$bench/naive.txt"
	echo "  naive total (4 clean builds):                  ${naive_total} s"
	echo "  patcheval base (2 variants, cold):             ${ours_base} s   [$(kcc "$bench/ours-base.log")]"
	echo "  seed backport (2 variants, incremental):       ${ours_patched} s   [$(kcc "$bench/ours-patched.log")]"
	echo "  seed: patcheval base + backport:               ${ours_total} s = ${ratio} x naive (target <= 0.6)"
	echo "  one-line fix (2 variants, incremental):        ${ours_fix} s   [$(kcc "$bench/ours-fix.log")]"
	echo "  typical: patcheval base + fix:                 ${fix_total} s = ${fix_ratio} x naive ${fix_naive} s (target <= 0.6)"
	echo "  repeated request (cache hit):                  ${repeat} s (target < 5)"
} | tee "$bench/results.txt"
