#!/usr/bin/env bash
# Time patcheval's git operations on a linux.git-shaped tree (bench/bigtree.sh)
# beside the git CLI doing the same, each in its own process: wall time and
# peak RSS from /usr/bin/time, the median of RUNS runs (1 for fresh
# checkouts). Each result is checked against git's.
#
#   bench/scale.sh                 # the 10^6-commit tree (made once, long)
#   bench/scale.sh -n 100000       # RUNS=3
#
# Operations (issue 18's targets in brackets):
#   start      a process that does nothing (the floor of every row)
#   resolve    a tag                       (opening: nothing grows with the objects)
#   apply      the seed backport on the newest release    [<= 1 s, <= 300 MB]
#              git: `git am` in a sparse worktree at the tag (made untimed),
#              and read-tree + apply --cached + write-tree in a scratch index
#   checkout   fresh (vs git worktree add) and incremental between two
#              adjacent tags (vs git checkout)     [proportional to the changes]
#   range      first-parent commits of a 10,000+-commit bisection range
#              (vs git rev-list --first-parent)                    [<= 2 s]
#   tags       ls-remote over smart HTTP, tags in version order
#              (vs git ls-remote | sort -V)
#   fetch      one new tag from a smart-HTTP remote (vs git fetch)
#   push       the applied backport to a new branch of a smart-HTTP remote
#              holding the tree (gittree.Push, the GitHub reporter's push,
#              vs git push)
#
# Writes $BENCH_DIR/summary.txt (the table) and results.txt (every run).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
n=1000000 tree=
while getopts n:t: opt; do
	case $opt in
	n) n=$OPTARG ;;
	t) tree=$OPTARG ;; # an existing repository instead (a real linux.git clone)
	*) echo "usage: scale.sh [-n commits | -t repository]" >&2; exit 2 ;;
	esac
done
RUNS=${RUNS:-3}
command -v go >/dev/null || PATH="$PATH:/usr/local/go/bin"
[ -x /usr/bin/time ] || { echo "scale.sh: /usr/bin/time missing (apt-get install time)" >&2; exit 3; }
if [ -n "$tree" ]; then big=$tree; else big=$("$root/bench/bigtree.sh" -n "$n"); fi
bench=${BENCH_DIR:-$(mktemp -d /tmp/patcheval-bench-scale.XXXXXX)}
mkdir -p "$bench"
op=$bench/scaleop
(cd "$root" && go build -o "$op" ./bench/scale/scaleop)
export GIT_CONFIG_GLOBAL=/dev/null GIT_CONFIG_NOSYSTEM=1
export GIT_AUTHOR_NAME="Bench Author" GIT_AUTHOR_EMAIL=author@example.org
export GIT_COMMITTER_NAME="Bench Committer" GIT_COMMITTER_EMAIL=committer@example.org
export GIT_AUTHOR_DATE=2026-01-02T03:04:05Z GIT_COMMITTER_DATE=2026-01-02T03:04:05Z
results=$bench/results.txt
: >"$results"

# A private clone (hard-linked packs) that the operations may write to.
local=$bench/local.git
rm -rf "$local"
git clone -q --bare --local "$big" "$local"
tags=$(git --git-dir="$local" -c versionsort.suffix=-rc tag -l --sort=version:refname 'v[0-9]*' | grep -v -- -debian)
releases=$(grep -E '^v[0-9]+\.[0-9]+$' <<<"$tags")
deep=$(tail -1 <<<"$releases")
prev=$(tail -2 <<<"$releases" | head -1)
nextrc=$(awk -v p="$prev" 'f && /-rc/ {print; exit} $0 == p {f = 1}' <<<"$tags")
# good: the -rc1 tag nearest below deep whose first-parent range to deep
# holds at least 10,000 commits (the target's size); on a tree too small
# for that, the farthest.
good=$(head -1 <<<"$tags")
for t in $(grep -E -- '-rc1$' <<<"$tags" | tac); do
	c=$(git --git-dir="$local" rev-list --first-parent --count "$t..$deep")
	good=$t
	[ "$c" -lt 10000 ] || break
done
rangen=$(git --git-dir="$local" rev-list --first-parent --count "$good..$deep")
echo "scale.sh: $big: deep tag $deep, adjacent $prev -> $nextrc, range $good..$deep ($rangen first-parent commits)" >&2

# timeit NAME CMD...: one run; appends "NAME wall_s rss_kb" to results.
timeit() {
	local name=$1
	shift
	/usr/bin/time -f '%e %M %U %S' -o "$bench/time.out" "$@" >"$bench/out.txt"
	echo "$name $(cat "$bench/time.out")" >>"$results"
}

backport=$root/mbox/testdata/threads/ppc-dynamic-preempt-v6.1-backport.mbox
awk '/^From mboxrd@z/{n++} n>=2' "$backport" >"$bench/backport-am.mbox"

# start: a process that does nothing (scaleop's runtime and package init;
# git --version) — the floor of every row below
for i in $(seq "$RUNS"); do
	timeit start.patcheval "$op" start
	timeit start.git git --version
done

# resolve
for i in $(seq "$RUNS"); do
	timeit resolve.patcheval "$op" resolve "$local" "$deep"
	p=$(cat "$bench/out.txt")
	timeit resolve.git git --git-dir="$local" rev-parse "$deep^{commit}"
	[ "$p" = "$(cat "$bench/out.txt")" ] || { echo "resolve: patcheval $p, git $(cat "$bench/out.txt")" >&2; exit 1; }
done

# apply
wt=$bench/amwt
git --git-dir="$local" worktree add -q --no-checkout --detach "$wt" "$deep"
git -C "$wt" sparse-checkout set --no-cone /arch/powerpc/ >/dev/null
git -C "$wt" checkout -q
for i in $(seq "$RUNS"); do
	timeit apply.patcheval "$op" apply "$local" "$deep" "bench/run$i" "$backport"
	ptree=$(cat "$bench/out.txt")
	git -C "$wt" reset -q --hard "$deep"
	timeit apply.git-am git -C "$wt" am -q --patch-format=mboxrd "$bench/backport-am.mbox"
	gtree=$(git -C "$wt" rev-parse HEAD^{tree})
	export GIT_INDEX_FILE=$bench/scratch-index
	timeit apply.git-apply-cached sh -c 'git --git-dir="$1" read-tree "$2" && git --git-dir="$1" apply --cached "$3" && git --git-dir="$1" write-tree' _ "$local" "$deep" "$bench/backport-am.mbox"
	unset GIT_INDEX_FILE
	[ "$ptree" = "$gtree" ] || { echo "apply: patcheval tree $ptree, git am $gtree" >&2; exit 1; }
done
git --git-dir="$local" worktree remove --force "$wt"

# checkout: fresh once, incremental RUNS times
co=$bench/co gwt=$bench/gitwt
rm -rf "$co"
timeit checkout-fresh.patcheval "$op" checkout "$local" "$prev" "$co"
timeit checkout-fresh.git git --git-dir="$local" worktree add -q --detach "$gwt" "$prev"
for i in $(seq "$RUNS"); do
	timeit checkout-incremental.patcheval "$op" checkout "$local" "$nextrc" "$co"
	cat "$bench/out.txt" >>"$results"
	"$op" checkout "$local" "$prev" "$co" >/dev/null
	timeit checkout-incremental.git git -C "$gwt" checkout -q "$nextrc"
	git -C "$gwt" checkout -q "$prev"
done
echo "checkout: $(git --git-dir="$local" diff --name-only "$prev" "$nextrc" | wc -l) files differ between $prev and $nextrc" >>"$results"
git --git-dir="$local" worktree remove --force "$gwt"
rm -rf "$co"

# range
for i in $(seq "$RUNS"); do
	timeit range.patcheval "$op" range "$local" "$good" "$deep"
	read -r pn pfirst plast <"$bench/out.txt"
	timeit range.git git --git-dir="$local" rev-list --first-parent --reverse "$good..$deep"
	[ "$pn" = "$(wc -l <"$bench/out.txt")" ] && [ "$pfirst" = "$(head -1 "$bench/out.txt")" ] && [ "$plast" = "$(tail -1 "$bench/out.txt")" ] ||
		{ echo "range: patcheval $pn $pfirst..$plast, git $(wc -l <"$bench/out.txt")" >&2; exit 1; }
done

# remote: ls-remote and fetch of a new tag over smart HTTP
srvroot=$bench/srv
rm -rf "$srvroot"
mkdir -p "$srvroot"
git clone -q --bare --local "$big" "$srvroot/linux.git"
remote=$srvroot/linux.git
export GIT_INDEX_FILE=$bench/remote-index
git --git-dir="$remote" read-tree master
blob=$(echo "VERSION = 99" | git --git-dir="$remote" hash-object -w --stdin)
git --git-dir="$remote" update-index --cacheinfo "100644,$blob,Makefile"
newc=$(echo "Linux 99.0-rc1" | git --git-dir="$remote" commit-tree "$(git --git-dir="$remote" write-tree)" -p master)
unset GIT_INDEX_FILE
git --git-dir="$remote" update-ref refs/heads/master "$newc"
git --git-dir="$remote" tag -a -m "Linux 99.0-rc1" v99.0-rc1 "$newc"
"$op" serve "$srvroot" >"$bench/url" &
srv=$!
trap 'kill $srv 2>/dev/null || true' EXIT
for _ in $(seq 50); do [ -s "$bench/url" ] && break; sleep 0.1; done
url=$(cat "$bench/url")/linux.git
for i in $(seq "$RUNS"); do
	timeit tags.patcheval "$op" tags "$url"
	ptags=$(cat "$bench/out.txt")
	timeit tags.git sh -c 'git ls-remote --tags "$1" | sed -n "s|.*refs/tags/\(v[0-9][^^]*\)$|\1|p" | grep -v -- -debian | sort -V' _ "$url"
	gtags=$(git --git-dir="$remote" -c versionsort.suffix=-rc tag -l --sort=version:refname 'v[0-9]*' | grep -v -- -debian | paste -sd' ')
	[ "$ptags" = "$gtags" ] || { echo "tags: patcheval's order differs from git tag --sort=version:refname" >&2; exit 1; }
done
for i in $(seq "$RUNS"); do
	for who in patcheval git; do
		f=$bench/fetch.git
		rm -rf "$f"
		git clone -q --bare --local "$big" "$f"
		if [ $who = patcheval ]; then
			timeit fetch.patcheval "$op" fetch "$f" "$url" v99.0-rc1
		else
			timeit fetch.git git --git-dir="$f" fetch -q --no-tags "$url" refs/tags/v99.0-rc1:refs/tags/v99.0-rc1
		fi
		[ "$(git --git-dir="$f" rev-parse v99.0-rc1^{commit})" = "$newc" ] || { echo "fetch ($who): v99.0-rc1 not fetched" >&2; exit 1; }
	done
done
rm -rf "$f"
git --git-dir="$remote" config http.receivepack true
pushed=$(git --git-dir="$local" rev-parse bench/run1)
for i in $(seq "$RUNS"); do
	timeit push.patcheval "$op" push "$local" "$url" bench/run1 refs/heads/patcheval/push
	echo "push: $(cat "$bench/out.txt") (commits, objects sent, commits walked)" >>"$results"
	timeit push.git git --git-dir="$local" push -q "$url" bench/run1:refs/heads/patcheval/git
	for b in push git; do
		[ "$(git --git-dir="$remote" rev-parse "refs/heads/patcheval/$b")" = "$pushed" ] || { echo "push: $b did not set the remote branch" >&2; exit 1; }
		git --git-dir="$remote" update-ref -d "refs/heads/patcheval/$b"
	done
done

# median NAME: "wall_s peak_MB cpu_s" over NAME's runs: the median wall
# time with that run's peak RSS, and the median CPU time; nothing when
# NAME has no runs.
median() {
	local w c
	w=$(awk -v o="$1" '$1 == o {print $2, $3}' "$results" | sort -n | awk '{a[NR]=$1; b[NR]=$2} END {if (NR) {m=int((NR+1)/2); print a[m], b[m]/1024}}')
	[ -n "$w" ] || return 0
	c=$(awk -v o="$1" '$1 == o {print $4 + $5}' "$results" | sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}')
	echo "$w $c"
}

{
	echo "tree: $big"
	if [ -f "$big/bigtree.json" ]; then sed -n 's/^  //p' "$big/bigtree.json" | tr -d '\n'; fi
	echo
	echo "deep tag $deep; incremental $prev -> $nextrc; range $good..$deep = $rangen first-parent commits; $RUNS runs, medians"
	# Wall time is what a user waits for but says little on a loaded
	# machine; CPU seconds (user + system) hold up better under load.
	printf '%-24s %12s %12s %12s %12s %12s %12s %8s %8s\n' operation patcheval_s patcheval_cpu patcheval_MB git_s git_cpu git_MB time_x cpu_x
	for o in start resolve apply checkout-fresh checkout-incremental range tags fetch push; do
		read -r ps pr pc <<<"$(median "$o.patcheval")"
		for g in git git-am git-apply-cached; do
			gm=$(median "$o.$g")
			[ -n "$gm" ] || continue
			read -r gs gr gc <<<"$gm"
			printf '%-24s %12.2f %12.2f %12.0f %12.2f %12.2f %12.0f %8.2f %8.2f\n' "$o (vs $g)" "$ps" "$pc" "$pr" "$gs" "$gc" "$gr" \
				"$(awk -v a="$ps" -v b="$gs" 'BEGIN {print (b > 0 ? a / b : 0)}')" "$(awk -v a="$pc" -v b="$gc" 'BEGIN {print (b > 0 ? a / b : 0)}')"
		done
	done
} | tee "$bench/summary.txt"
