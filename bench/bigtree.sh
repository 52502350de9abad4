#!/usr/bin/env bash
# Make (once) a repository with the shape of a maintainer's linux.git on top
# of the imported 6.1 tree, and print its path:
#
#   bench/bigtree.sh                  # 10^6 commits
#   bench/bigtree.sh -n 100000        # the opt-in test's size
#   bench/bigtree.sh -n 10000 -r 20   # -r releases (8 tags each), -s stable tags per release
#
# scripts/bigtree generates the history (see its doc comment: commits
# touching one or two files of the real tree, topic branches merged into a
# first-parent mainline, "Linux X.Y-rcN" commits with annotated tags, stable
# branches with vX.Y.Z tags), `git fast-import` writes it, the refs are
# packed, and the generated objects are repacked with kernel.org's
# settings (--depth=50 --window=250). The backport series of the seed
# thread touches files the generator never edits, so it applies on every
# generated tag.
#
# The repack (BIGTREE_REPACK):
#   keep-base            git repack -a -d --window=250 --depth=50
#                        --keep-pack=<the 6.1 import's pack>: the base pack
#                        is kept as it is (hard-linked, never re-deltified)
#                        and the generated objects go into one new pack.
#                        Without -f their deltas are fast-import's (each
#                        blob and tree against the previous version at its
#                        path, chains up to 50 deep) and only the objects
#                        fast-import stored whole are searched (window 250).
#                        The full -f repack spends its time re-deltifying
#                        the 78k base files: it did not finish in 90 minutes
#                        at 10^4 commits on the shared 2-core machine.
#   keep-base-f (default) the same with -f: the generated objects get
#                        git's own delta search (window 250; recent versions
#                        whole, older ones deltas, as in kernel.org's packs),
#                        the base still untouched. 150 s at 10^4 commits,
#                        19 minutes (634 CPU-s) at 10^5 on the shared machine.
#   full                 git repack -adf --window=250 --depth=50 over
#                        everything, as kernel.org does (CPU-hours at 10^6:
#                        an idle machine's job).
#
# Cached in $PATCHEVAL_SCALE_DIR (default $CACHE/scale) under a name made of
# the parameters and the generator's source hash: re-running prints the
# path at once. bigtree.json beside the repository records how long each
# step took, its peak RSS, and the size (commits, objects, pack bytes).
# The generation is cached on its own as <name>.fastimport.git (refs
# packed, not repacked; its name leaves out the repack mode): a run
# stopped during the repack, or another BIGTREE_REPACK mode, starts from
# it. A run stopped during the generation starts it again.
# Run it niced on a shared machine: nice -n 19 bench/bigtree.sh.
#
# Cost, measured at 10^5 commits (linear in commits): generator 28 CPU-s,
# fast-import 184 CPU-s, keep-base-f repack 634 CPU-s; at 10^6 about 2,000
# CPU-s for the generation (~40 min on an idle 2-core machine, ~465
# commits/s) and ~6,300 CPU-s for keep-base-f (~300 for keep-base), ~5 GB
# of packs. Under three helpers' kernel builds at nice 19 it went at ~17
# commits/s (fast-import got ~3% of a core): ~16 hours.
# Measured at 10^6 (session 10, a faster 2-core machine, beside a test run):
# generation 1,229 s wall (66 + 1,097 CPU-s), keep-base repack 344 s
# (7.4 GB peak RSS); 7.3M objects, 4.49 GB of packs (bench/scale-results.md).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
n=1000000 releases=100 stable=12 seed=1
window=${BIGTREE_WINDOW:-250} depth=${BIGTREE_DEPTH:-50} mode=${BIGTREE_REPACK:-keep-base-f}
case $mode in keep-base | keep-base-f | full) ;; *) echo "bigtree.sh: BIGTREE_REPACK=$mode: want keep-base, keep-base-f or full" >&2; exit 2 ;; esac
while getopts n:r:s:S: opt; do
	case $opt in
	n) n=$OPTARG ;;
	r) releases=$OPTARG ;;
	s) stable=$OPTARG ;;
	S) seed=$OPTARG ;;
	*) echo "usage: bigtree.sh [-n commits] [-r releases] [-s stable-per-release] [-S seed]" >&2; exit 2 ;;
	esac
done
cache=${PATCHEVAL_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/patcheval}
scale=${PATCHEVAL_SCALE_DIR:-$cache/scale}
base=$("$root/scripts/linux-tree.sh")
command -v go >/dev/null || PATH="$PATH:/usr/local/go/bin"
[ -x /usr/bin/time ] || { echo "bigtree.sh: /usr/bin/time missing (apt-get install time)" >&2; exit 3; }

backport=$root/mbox/testdata/threads/ppc-dynamic-preempt-v6.1-backport.mbox
exclude=$(sed -n 's|^diff --git a/\([^ ]*\) b/.*|\1|p' "$backport" | sort -u | paste -sd, -)
gensum=$(sha256sum <"$root/scripts/bigtree/main.go" | cut -c1-10)
basesum=$(git --git-dir="$base" rev-parse --short=10 v6.1-debian)
name="linux-shape-n$n-r$releases-s$stable-S$seed-w$window-d$depth-$mode-$basesum-$gensum"
repo=$scale/$name.git
if [ -f "$repo/bigtree.json" ]; then
	echo "$repo"
	exit 0
fi
mkdir -p "$scale"
exec 9>"$scale/.$name.lock"
flock 9
if [ -f "$repo/bigtree.json" ]; then
	echo "$repo"
	exit 0
fi

now() { date +%s.%N; }
secs() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.1f", b - a }'; }
# /usr/bin/time -f '%U %S %M' output: CPU seconds (user + system), peak RSS.
cpu() { tail -1 "$1" | awk '{ printf "%.1f", $1 + $2 }'; }
rss() { tail -1 "$1" | awk '{ print $3 }'; }
# newrepo DIR FROM: a bare repository at DIR holding FROM's packs as hard
# links (no copy; a copy where links cannot be made).
newrepo() {
	git init -q --bare "$1"
	git --git-dir="$1" config gc.auto 0
	for f in "$2"/objects/pack/pack-*.{pack,idx}; do
		ln "$f" "$1/objects/pack/" 2>/dev/null || cp "$f" "$1/objects/pack/"
	done
}

# One scratch directory for both stages, removed however the script ends.
tmp=$(mktemp -d "$scale/make.XXXXXX")
trap 'rm -rf "$tmp"' EXIT

# Stage 1, cached on its own (the repack modes share it, and a run stopped
# during the repack resumes there): fast-import's repository, refs packed.
# Its HEAD is left as git init made it: stage 2 sets the final one.
finame="linux-shape-n$n-r$releases-s$stable-S$seed-$basesum-$gensum"
stage1=$scale/$finame.fastimport.git
if [ ! -f "$stage1/fastimport.json" ]; then
	(cd "$root" && go build -o "$tmp/bigtree" ./scripts/bigtree)
	new=$tmp/fastimport.git
	# The base objects: the imported tree's packs.
	newrepo "$new" "$base"
	git --git-dir="$new" update-ref refs/tags/v6.1-debian "$(git --git-dir="$base" rev-parse v6.1-debian)"
	echo "bigtree.sh: generating $n commits into $stage1" >&2
	t0=$(now)
	# The generator and fast-import run side by side (one core each);
	# /usr/bin/time reports each one's CPU time and peak RSS (wall time on a
	# shared machine says little: the CPU seconds are what extrapolates).
	/usr/bin/time -f '%U %S %M' -o "$tmp/gen.rss" "$tmp/bigtree" -repo "$base" -base v6.1-debian \
		-commits "$n" -releases "$releases" -stable "$stable" -seed "$seed" -exclude "$exclude" |
		/usr/bin/time -f '%U %S %M' -o "$tmp/fi.rss" git --git-dir="$new" fast-import --done --quiet --active-branches=16
	t1=$(now)
	for r in $(git --git-dir="$new" for-each-ref --format='%(refname)' refs/heads/gen/); do
		git --git-dir="$new" update-ref -d "$r"
	done
	git --git-dir="$new" pack-refs --all
	cat >"$new/fastimport.json" <<EOF
  "fast_import_seconds": $(secs "$t0" "$t1"),
  "generator_cpu_seconds": $(cpu "$tmp/gen.rss"), "generator_peak_rss_kb": $(rss "$tmp/gen.rss"),
  "fast_import_cpu_seconds": $(cpu "$tmp/fi.rss"), "fast_import_peak_rss_kb": $(rss "$tmp/fi.rss"),
  "fast_import_made": "$(date -u +%Y-%m-%dT%H:%M:%SZ)",
EOF
	rm -rf "$stage1"
	mv "$new" "$stage1"
fi

# Stage 2: the repack, in a copy whose packs are hard links to stage 1's
# (repack -d removes the links, not stage 1's files).
new=$tmp/repo.git
newrepo "$new" "$stage1"
cp "$stage1/packed-refs" "$new/packed-refs"
git --git-dir="$new" symbolic-ref HEAD refs/heads/master
echo "bigtree.sh: repacking $stage1 ($mode, window $window, depth $depth)" >&2
t1=$(now)
if [ "$mode" = full ]; then
	repack=(-adf)
else
	repack=(-ad)
	[ "$mode" = keep-base ] || repack=(-adf)
	for f in "$base"/objects/pack/pack-*.pack; do repack+=("--keep-pack=$(basename "$f")"); done
fi
/usr/bin/time -f '%U %S %M' -o "$tmp/repack.rss" git --git-dir="$new" repack "${repack[@]}" -q --depth="$depth" --window="$window"
t2=$(now)
git --git-dir="$new" prune-packed
commits=$(git --git-dir="$new" rev-list --all --count)
merges=$(git --git-dir="$new" rev-list --all --merges --count)
firstparent=$(git --git-dir="$new" rev-list --first-parent --count master)
tags=$(git --git-dir="$new" tag -l | wc -l)
objects=$(git --git-dir="$new" count-objects -v | sed -n 's/^in-pack: //p')
packbytes=$(stat -c %s "$new"/objects/pack/*.pack | awk '{s += $1} END {print s}')
idxbytes=$(stat -c %s "$new"/objects/pack/*.idx | awk '{s += $1} END {print s}')
cat >"$new/bigtree.json" <<EOF
{
  "commits_requested": $n, "releases": $releases, "stable_per_release": $stable, "seed": $seed,
  "window": $window, "depth": $depth, "repack": "$mode", "base": "$basesum", "generator": "$gensum",
  "commits": $commits, "merges": $merges, "first_parent_commits": $firstparent, "tags": $tags,
  "objects": $objects, "pack_bytes": $packbytes, "idx_bytes": $idxbytes,
$(cat "$stage1/fastimport.json")
  "repack_seconds": $(secs "$t1" "$t2"),
  "repack_cpu_seconds": $(cpu "$tmp/repack.rss"), "repack_peak_rss_kb": $(rss "$tmp/repack.rss"),
  "made": "$(date -u +%Y-%m-%dT%H:%M:%SZ)", "host_cpus": $(nproc)
}
EOF
cat "$new/bigtree.json" >&2
rm -rf "$repo"
mv "$new" "$repo"
echo "$repo"
