#!/usr/bin/env bash
# Benchmark patcheval apply and patcheval checkout on Debian's 6.1 tree
# (78k files, scripts/linux-tree.sh) against git:
#
#   apply:    patcheval apply (object level, no worktree) vs git am, both
#             "git am in an existing worktree" and "git worktree add + git
#             am" (what applying without patcheval costs on a fresh tree);
#             for the v6.1 backport series (1 patch) and a generated
#             8-patch series (hunks in 8 subsystems, a new file, a rename,
#             a delete).
#   checkout: patcheval checkout fresh vs git worktree add; incremental
#             (base -> 8-patch series tip) vs git checkout in the worktree.
#
#   bench/apply.sh                 # APPLY_RUNS=10 CHECKOUT_RUNS=3
#
# Wall time and peak RSS from /usr/bin/time (Debian package "time"); every
# apply run gets a fresh hard-linked bare clone (untimed) so that no run
# finds the objects of the previous one. Page cache warm. Prints medians,
# minima and ratios; writes $BENCH_DIR/results.txt (raw) and summary.txt.
# Targets: apply <= 0.5x git am wall with peak RSS < 200 MB; fresh
# checkout <= 1.5x git worktree add.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
APPLY_RUNS=${APPLY_RUNS:-10}
CHECKOUT_RUNS=${CHECKOUT_RUNS:-3}
bench=${BENCH_DIR:-$(mktemp -d /tmp/patcheval-bench-apply.XXXXXX)}
mkdir -p "$bench"
[ -x /usr/bin/time ] || { echo "apply.sh: /usr/bin/time missing (apt-get install time)" >&2; exit 3; }
repo=$("$root/scripts/linux-tree.sh")
bin="$bench/patcheval"
(cd "$root" && go build -o "$bin" ./cmd/patcheval)
export GIT_CONFIG_GLOBAL=/dev/null GIT_CONFIG_NOSYSTEM=1
export GIT_AUTHOR_NAME="Bench Author" GIT_AUTHOR_EMAIL=author@example.org
export GIT_COMMITTER_NAME="Bench Committer" GIT_COMMITTER_EMAIL=committer@example.org
export GIT_AUTHOR_DATE=2026-01-02T03:04:05Z GIT_COMMITTER_DATE=2026-01-02T03:04:05Z
results=$bench/results.txt
: >"$results"

backport=$root/mbox/testdata/threads/ppc-dynamic-preempt-v6.1-backport.mbox
# git am wants the patch mails only (no cover letter).
awk '/^From mboxrd@z/{n++} n>=2' "$backport" >"$bench/backport-am.mbox"

# The generated 8-patch series, made in a sparse worktree of a clone.
gen=$bench/gen.git
rm -rf "$gen" "$bench/genwt"
git clone -q --bare "$repo" "$gen"
git -C "$gen" worktree add -q --no-checkout --detach "$bench/genwt" v6.1-debian
files=(kernel/sched/core.c mm/page_alloc.c fs/ext4/inode.c include/linux/sched.h
	net/ipv4/tcp.c drivers/net/ethernet/intel/e1000/e1000_main.c
	arch/powerpc/kernel/interrupt.c scripts/checkpatch.pl)
(
	cd "$bench/genwt"
	git sparse-checkout set --no-cone "${files[@]/#//}" /Documentation/process/ >/dev/null
	git checkout -q
	for i in 0 1 2 3 4; do
		f=${files[$i]}
		for l in 1500 900 300; do sed -i "${l}a /* patcheval bench: patch $((i + 1)), line $l */" "$f"; done
		git commit -q -am "bench: patch $((i + 1)) touches $f"
	done
	sed -i '200a /* patcheval bench: patch 6 */' "${files[5]}"
	printf 'Bench\n=====\n\nA new file.\n' >Documentation/process/patcheval-bench.rst
	git add -f Documentation/process/patcheval-bench.rst
	git commit -q -am "bench: patch 6 adds a file"
	git mv Documentation/process/patcheval-bench.rst Documentation/process/patcheval-bench2.rst
	sed -i '100a /* patcheval bench: patch 7 */' "${files[6]}"
	git commit -q -am "bench: patch 7 renames it"
	git rm -q Documentation/process/patcheval-bench2.rst
	sed -i '3000a # patcheval bench: patch 8' "${files[7]}"
	git commit -q -am "bench: patch 8 deletes it"
	git format-patch -q --thread --stdout -M -8 >"$bench/gen8.mbox"
)
git -C "$gen" worktree remove --force "$bench/genwt"

# measure LABEL CMD...: time one run, append "LABEL wall_s rss_kb".
measure() {
	local label=$1
	shift
	/usr/bin/time -f '%e %M' -o "$bench/time.out" "$@" >/dev/null 2>"$bench/cmd.err" ||
		{ echo "apply.sh: $label failed:" >&2; cat "$bench/cmd.err" "$bench/time.out" >&2; exit 1; }
	echo "$label $(tail -n1 "$bench/time.out")" >>"$results"
}

apply_series() { # NAME PATCHEVAL_MBOX AM_MBOX
	local name=$1 pmbox=$2 ambox=$3
	for i in $(seq "$APPLY_RUNS"); do
		r=$bench/run.git
		rm -rf "$r" "$bench/wt"
		git clone -q --bare "$repo" "$r"
		measure "apply/$name/patcheval" "$bin" apply --tree "$r" -m "$pmbox" --branch bench
		measure "apply/$name/git-worktree-add" git -C "$r" worktree add -q --detach "$bench/wt" v6.1-debian
		measure "apply/$name/git-am" git -C "$bench/wt" am -q "$ambox"
		[ "$(git -C "$r" rev-parse bench^{tree})" = "$(git -C "$bench/wt" rev-parse HEAD^{tree})" ] ||
			{ echo "apply.sh: $name: patcheval and git am trees differ" >&2; exit 1; }
		git -C "$r" worktree remove --force "$bench/wt"
	done
}
echo "apply.sh: apply runs ($APPLY_RUNS each)" >&2
apply_series backport "$backport" "$bench/backport-am.mbox"
apply_series gen8 "$bench/gen8.mbox" "$bench/gen8.mbox"

echo "apply.sh: checkout runs ($CHECKOUT_RUNS)" >&2
co=$bench/co.git
rm -rf "$co"
git clone -q --bare "$repo" "$co"
"$bin" apply --tree "$co" -m "$bench/gen8.mbox" --branch bench >/dev/null
for i in $(seq "$CHECKOUT_RUNS"); do
	rm -rf "$bench/co" "$bench/wt"
	measure checkout/fresh/patcheval "$bin" checkout --tree "$co" v6.1-debian "$bench/co"
	measure checkout/incremental/patcheval "$bin" checkout --tree "$co" bench "$bench/co"
	measure checkout/fresh/git-worktree-add git -C "$co" worktree add -q --detach "$bench/wt" v6.1-debian
	measure checkout/incremental/git-checkout git -C "$bench/wt" checkout -q --detach bench
	git -C "$co" worktree remove --force "$bench/wt"
	rm -rf "$bench/co"
done

# Summary: median and min wall, max RSS per label; ratios.
awk '
{ n[$1]++; w[$1, n[$1]] = $2; if ($3 > rss[$1]) rss[$1] = $3 }
END {
	for (l in n) {
		m = n[l]
		for (i = 1; i <= m; i++) a[i] = w[l, i]
		for (i = 1; i <= m; i++) for (j = i + 1; j <= m; j++) if (a[j] < a[i]) { t = a[i]; a[i] = a[j]; a[j] = t }
		med[l] = (m % 2) ? a[(m + 1) / 2] : (a[m / 2] + a[m / 2 + 1]) / 2
		printf "%-40s runs %2d  median %7.3f s  min %7.3f s  peak RSS %6.1f MB\n", l, m, med[l], a[1], rss[l] / 1024
	}
	print ""
	split("backport gen8", ss, " ")
	for (k = 1; k <= 2; k++) {
		s = ss[k]
		p = med["apply/" s "/patcheval"]; am = med["apply/" s "/git-am"]; wa = med["apply/" s "/git-worktree-add"]
		if (am == 0) continue
		printf "apply %-8s patcheval/git-am %.3f   patcheval/(worktree add + am) %.4f\n", s, p / am, p / (am + wa)
	}
	if (med["checkout/fresh/git-worktree-add"] > 0) {
		printf "checkout fresh       patcheval/git-worktree-add %.3f\n", med["checkout/fresh/patcheval"] / med["checkout/fresh/git-worktree-add"]
		printf "checkout incremental patcheval/git-checkout     %.3f\n", med["checkout/incremental/patcheval"] / med["checkout/incremental/git-checkout"]
	}
}' "$results" | sort | tee "$bench/summary.txt"
echo "apply.sh: raw figures in $results" >&2
