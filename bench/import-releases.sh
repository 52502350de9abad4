#!/usr/bin/env bash
# Benchmark `patcheval tree import` (internal/linuxtree): Debian releases
# imported one after another, oldest first, into a fresh release-history
# repository. The packages come from the shared cache (downloaded there
# once, outside the timing: `patcheval tree import` of the same versions,
# or this script's warm-up), so what is timed is the import itself: the
# .deb's data archive read, the inner tarball decompressed, tar2git,
# git fast-import, the chain relinked. Beside each release, from the same
# run, the floor: `xz -dc` of the same inner tarball alone.
#
#   bench/import-releases.sh                     # 6.1 6.12 7.2.13 7.3.4
#   bench/import-releases.sh 7.2.13 7.3.4
#
# Target (issue 28): <= 60 s per release on 2 cores. Prints wall, CPU and
# peak RSS per release, the load before and after, the repository size
# and the commit ids (the same set gives the same ids on every machine).
# Writes $BENCH_DIR/results.txt.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
versions=("$@")
[ ${#versions[@]} -gt 0 ] || versions=(6.1 6.12 7.2.13 7.3.4)
cache=${PATCHEVAL_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/patcheval}
export PATCHEVAL_CACHE_DIR=$cache
bench=${BENCH_DIR:-$(mktemp -d /tmp/patcheval-bench-releases.XXXXXX)}
mkdir -p "$bench"
[ -x /usr/bin/time ] || { echo "import-releases.sh: /usr/bin/time missing (apt-get install time)" >&2; exit 3; }
command -v go >/dev/null || PATH="$PATH:/usr/local/go/bin"
(cd "$root" && go build -o "$bench/patcheval" ./cmd/patcheval)
results=$bench/results.txt
: >"$results"
echo "commit $(git -C "$root" rev-parse --short HEAD), $(nproc) cores, $(date -u +%FT%TZ)" | tee -a "$results"

# Warm-up, untimed: every package downloaded (and the lists fetched) into
# the shared cache, through a throw-away tree.
"$bench/patcheval" tree import --tree "$bench/warm.git" "${versions[@]}" >/dev/null 2>"$bench/warm.err" ||
	{ cat "$bench/warm.err" >&2; exit 3; }
rm -rf "$bench/warm.git"

echo "load before: $(cut -d' ' -f1-3 /proc/loadavg)" | tee -a "$results"
tree=$bench/releases.git
for v in "${versions[@]}"; do
	/usr/bin/time -f "%e %U %S %M" -o "$bench/time" "$bench/patcheval" tree import --tree "$tree" --json "$v" \
		>"$bench/out" 2>"$bench/err" || { cat "$bench/err" >&2; exit 1; }
	read -r wall user sys rss <"$bench/time"
	tag=$(sed -n 's/^ *"tag": "\(.*\)",$/\1/p' "$bench/out" | tail -1)
	deb=$(ls "$cache"/debian/debs/*-linux-source-"$(echo "$v" | cut -d. -f1-2)"_"$(sed -n 's/.*"origin": "debian linux-source-[0-9.]* \(.*\)",$/\1/p' "$bench/out" | tail -1)"_all.deb)
	member=./usr/src/linux-source-$(echo "$v" | cut -d. -f1-2).tar.xz
	/usr/bin/time -f "%e %U %S" -o "$bench/xztime" sh -c "dpkg-deb --fsys-tarfile '$deb' | tar -xOf - '$member' | xz -dc >/dev/null"
	read -r xwall xuser xsys <"$bench/xztime"
	printf '%-8s import wall %6.1f s  cpu %6.1f s  peak RSS %4d MB | floor (dpkg-deb | tar | xz -dc) wall %5.1f s  cpu %5.1f s | load %s\n' \
		"$tag" "$wall" "$(echo "$user + $sys" | bc)" $((rss / 1024)) "$xwall" "$(echo "$xuser + $xsys" | bc)" \
		"$(cut -d' ' -f1 /proc/loadavg)" | tee -a "$results"
done
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)" | tee -a "$results"
echo "repository: $(du -sm "$tree" | cut -f1) MB" | tee -a "$results"
git --git-dir="$tree" log --format='%h %s' master | tee -a "$results"
