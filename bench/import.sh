#!/usr/bin/env bash
# Benchmark the kernel tree import (scripts/linux-tree.sh) against the way it
# was done before (tar -xJf, git add -f -A, git commit, git repack -a -d:
# the script at REF, default 6cf079c), each into its own fresh cache dir:
#
#   bench/import.sh              # IMPORT_RUNS=1 OLD_REF=6cf079c
#   bench/import.sh --only new   # skip the old way
#
# Prints wall, user+sys CPU and peak RSS (/usr/bin/time), the repository's
# size, and checks that both ways made the same tree (and the same commit
# id). Target (issue 19): under 60 s on 2 cores; about as long as `xz -dc`
# alone, which is measured too. Writes $BENCH_DIR/results.txt.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
RUNS=${IMPORT_RUNS:-1}
OLD_REF=${OLD_REF:-6cf079c}
only=
[ "${1:-}" = --only ] && only=$2
tarball=${PATCHEVAL_LINUX_TARBALL:-/usr/src/linux-source-6.1.tar.xz}
bench=${BENCH_DIR:-$(mktemp -d /tmp/patcheval-bench-import.XXXXXX)}
mkdir -p "$bench"
[ -x /usr/bin/time ] || { echo "import.sh: /usr/bin/time missing (apt-get install time)" >&2; exit 3; }
command -v go >/dev/null || PATH="$PATH:/usr/local/go/bin"
results=$bench/results.txt
: >"$results"
# The build cache warm for tar2git, as on every run after the first.
(cd "$root" && go build -o /dev/null ./scripts/tar2git)

measure() { # name cmd...: one timed run, appended to results
	local name=$1
	shift
	/usr/bin/time -f "%e %U %S %M" -o "$bench/time" "$@" >"$bench/out" 2>"$bench/err" ||
		{ cat "$bench/err" >&2; return 1; }
	read -r wall user sys rss <"$bench/time"
	printf '%-14s wall %7.1f s  cpu %6.1f s  peak RSS %4d MB\n' "$name" "$wall" \
		"$(echo "$user + $sys" | bc)" $((rss / 1024)) | tee -a "$results"
}

echo "load before: $(cut -d' ' -f1-3 /proc/loadavg)" | tee -a "$results"
measure "xz -dc" sh -c "xz -dc '$tarball' >/dev/null"
git -C "$root" show "$OLD_REF:scripts/linux-tree.sh" >"$bench/linux-tree-old.sh"
for i in $(seq "$RUNS"); do
	for way in new old; do
		[ -n "$only" ] && [ "$only" != "$way" ] && continue
		rm -rf "$bench/$way"
		script=$root/scripts/linux-tree.sh
		[ "$way" = old ] && script=$bench/linux-tree-old.sh
		PATCHEVAL_CACHE_DIR=$bench/$way measure "import/$way" bash "$script"
		repo=$bench/$way/trees/linux-6.1.git
		echo "  $(du -sm "$repo" | cut -f1) MB, commit $(git --git-dir="$repo" rev-parse v6.1-debian)," \
			"tree $(git --git-dir="$repo" rev-parse 'v6.1-debian^{tree}')" | tee -a "$results"
	done
done
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)" | tee -a "$results"
if [ -z "$only" ]; then
	a=$(git --git-dir="$bench/new/trees/linux-6.1.git" rev-parse v6.1-debian)
	b=$(git --git-dir="$bench/old/trees/linux-6.1.git" rev-parse v6.1-debian)
	[ "$a" = "$b" ] && echo "same commit both ways: $a" || { echo "DIFFERENT commits: new $a, old $b" >&2; exit 1; }
fi
