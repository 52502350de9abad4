#!/usr/bin/env bash
# Benchmark: peak RSS of `patcheval lore` against a hostile lore on
# loopback serving a gzip bomb as t.mbox.gz (issue 35, finding 4): a 4 MB
# gzip of 4 GiB of zeros. Python's http.server serves the files (a real
# HTTP server, nothing of patcheval's). Reports the exit code, the error
# line, the peak RSS (/usr/bin/time -v) and whether anything was cached.
#
#   bench/bomb.sh [GiB]        # default 4 GiB of zeros
#
# Needs Go, python3, gzip and /usr/bin/time. Not a timed test.
set -euo pipefail

gib=${1:-4}
root=$(cd "$(dirname "$0")/.." && pwd)
msgid=bomb-20261207@example.org
for tool in go python3 gzip; do
	command -v "$tool" >/dev/null || { echo "bench/bomb.sh: $tool not installed" >&2; exit 3; }
done
[ -x /usr/bin/time ] || { echo "bench/bomb.sh: /usr/bin/time missing (apt-get install time)" >&2; exit 3; }

work=$(mktemp -d)
server=
cleanup() {
	if [ -n "$server" ]; then kill "$server" 2>/dev/null || true; wait "$server" 2>/dev/null || true; fi
	rm -rf "$work"
}
trap cleanup EXIT

cd "$root"
go build -o "$work/patcheval" ./cmd/patcheval
mkdir -p "$work/www/all/$msgid" "$work/cache"
head -c "$((gib << 30))" /dev/zero | gzip -9 >"$work/www/all/$msgid/t.mbox.gz"
echo "bomb: $(stat -c %s "$work/www/all/$msgid/t.mbox.gz") bytes of gzip, $gib GiB inflated"

port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
python3 -m http.server --bind 127.0.0.1 --directory "$work/www" "$port" >"$work/server.log" 2>&1 &
server=$!
for _ in $(seq 50); do
	python3 -c "import socket; socket.create_connection(('127.0.0.1',$port),1)" 2>/dev/null && break
	sleep 0.1
done

rc=0
XDG_CACHE_HOME=$work/cache /usr/bin/time -v "$work/patcheval" lore --lore "http://127.0.0.1:$port" "$msgid" \
	>"$work/out" 2>"$work/err" || rc=$?
echo "exit code: $rc"
grep -v '^\s' "$work/err" | grep -v 'Command being timed' | tail -3
grep -E 'Maximum resident set size|Elapsed \(wall' "$work/err"
echo "cached files: $(find "$work/cache" -type f | wc -l)"
