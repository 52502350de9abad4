#!/usr/bin/env bash
# Import Debian's linux-source-6.1 tarball into a bare git repository, once,
# deterministically (fixed author, committer and dates), and print its path.
#
#   scripts/linux-tree.sh            # -> $CACHE/trees/linux-6.1.git
#   scripts/linux-tree.sh 7.2.13 7.3 # -> $CACHE/trees/linux-releases.git
#
# CACHE is $PATCHEVAL_CACHE_DIR, else $XDG_CACHE_HOME/patcheval, else
# ~/.cache/patcheval. The repository has one commit on branch "master",
# tagged "v6.1-debian"; re-running prints the path at once. Installs
# linux-source-6.1 when missing and running as root.
#
# With versions (6.1, 6.12, 7.2, 7.2.13, 7.2.12-1~bpo13+1, ...) it runs
# `patcheval tree import` instead: Debian's linux-source-X.Y of each, from
# the machine's Debian mirror through a private apt state, into one
# release-history repository (tags vX.Y.Z), and prints its path; the exit
# code is patcheval's (2 bad input, 3 network).
set -euo pipefail

if [ $# -gt 0 ]; then
	cache=${PATCHEVAL_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/patcheval}
	root=$(cd "$(dirname "$0")/.." && pwd)
	command -v go >/dev/null || PATH="$PATH:/usr/local/go/bin"
	bin=$(mktemp -d)
	trap 'rm -rf "$bin"' EXIT
	(cd "$root" && go build -o "$bin/patcheval" ./cmd/patcheval)
	rc=0
	"$bin/patcheval" tree import --tree "$cache/trees/linux-releases.git" "$@" >&2 || rc=$?
	[ "$rc" = 0 ] && echo "$cache/trees/linux-releases.git"
	exit "$rc"
fi

tarball=${PATCHEVAL_LINUX_TARBALL:-/usr/src/linux-source-6.1.tar.xz}
cache=${PATCHEVAL_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/patcheval}
repo="$cache/trees/linux-6.1.git"

if [ -f "$repo/patcheval-imported" ]; then
	echo "$repo"
	exit 0
fi

if [ ! -f "$tarball" ]; then
	if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
		echo "linux-tree: installing linux-source-6.1" >&2
		DEBIAN_FRONTEND=noninteractive apt-get install -y -q linux-source-6.1 >&2 ||
			{ apt-get update -q >&2 && DEBIAN_FRONTEND=noninteractive apt-get install -y -q linux-source-6.1 >&2; }
	fi
	[ -f "$tarball" ] || { echo "linux-tree: $tarball missing (apt-get install linux-source-6.1)" >&2; exit 3; }
fi

mkdir -p "$cache/trees"
lock="$cache/trees/.linux-6.1.lock"
exec 9>"$lock"
flock 9
if [ -f "$repo/patcheval-imported" ]; then
	echo "$repo"
	exit 0
fi

tmp=$(mktemp -d "$cache/trees/import.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
# The tarball is never extracted: tar2git turns the decompressed stream into
# a git fast-import stream (the same commit that extracting it and
# `git add -f -A` + `git commit` with these identities and dates make), so
# decompression and object writing run side by side, one core each.
# Compression level 1: a bigger pack (~0.4 GB), written ~3x faster, read as
# fast; no delta search (nothing to delta against in one commit).
root=$(cd "$(dirname "$0")/.." && pwd)
command -v go >/dev/null || PATH="$PATH:/usr/local/go/bin"
(cd "$root" && go build -o "$tmp/tar2git" ./scripts/tar2git)
git init -q --bare "$tmp/repo.git"
git --git-dir="$tmp/repo.git" config gc.auto 0
echo "linux-tree: importing $tarball into git" >&2
xz -dc "$tarball" |
	"$tmp/tar2git" -message "Linux 6.1 (Debian linux-source-6.1 $(basename "$tarball"))" \
		-branch master -tag v6.1-debian \
		-name "patcheval import" -email "import@patcheval.invalid" -date 2022-12-11T14:15:00Z |
	git --git-dir="$tmp/repo.git" -c pack.compression=1 -c pack.depth=0 fast-import --quiet --done
git --git-dir="$tmp/repo.git" symbolic-ref HEAD refs/heads/master
touch "$tmp/repo.git/patcheval-imported"
rm -rf "$repo"
mv "$tmp/repo.git" "$repo"
echo "$repo"
