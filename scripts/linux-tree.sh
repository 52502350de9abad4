#!/usr/bin/env bash
# Import Debian's linux-source-6.1 tarball into a bare git repository, once,
# deterministically (fixed author, committer and dates), and print its path.
#
#   scripts/linux-tree.sh            # -> $CACHE/trees/linux-6.1.git
#
# CACHE is $PATCHEVAL_CACHE_DIR, else $XDG_CACHE_HOME/patcheval, else
# ~/.cache/patcheval. The repository has one commit on branch "master",
# tagged "v6.1-debian"; re-running prints the path at once. Installs
# linux-source-6.1 when missing and running as root.
set -euo pipefail

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
echo "linux-tree: extracting $tarball" >&2
tar -xJf "$tarball" -C "$tmp"
src="$tmp/linux-source-6.1"
[ -d "$src" ] || src=$(find "$tmp" -mindepth 1 -maxdepth 1 -type d | head -n1)

git init -q --bare "$tmp/repo.git"
git --git-dir="$tmp/repo.git" config gc.auto 0
export GIT_DIR="$tmp/repo.git" GIT_WORK_TREE="$src"
echo "linux-tree: importing $(find "$src" -type f | wc -l) files into git" >&2
# Debian's top-level .gitignore ignores everything; add -f takes all files.
git add -f -A .
export GIT_AUTHOR_NAME="patcheval import" GIT_AUTHOR_EMAIL="import@patcheval.invalid"
export GIT_COMMITTER_NAME="$GIT_AUTHOR_NAME" GIT_COMMITTER_EMAIL="$GIT_AUTHOR_EMAIL"
export GIT_AUTHOR_DATE="2022-12-11T14:15:00Z" GIT_COMMITTER_DATE="2022-12-11T14:15:00Z"
git commit -q -m "Linux 6.1 (Debian linux-source-6.1 $(basename "$tarball"))"
git tag v6.1-debian
git repack -q -a -d
unset GIT_DIR GIT_WORK_TREE
touch "$tmp/repo.git/patcheval-imported"
rm -rf "$repo"
mv "$tmp/repo.git" "$repo"
echo "$repo"
