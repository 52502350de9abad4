#!/usr/bin/env bash
# Boot-to-first-result per architecture under TCG (no KVM): QEMU start to
# the guest agent's first benchmark result on the console, and the whole
# boot until power-off. Target: ppc64le <= 10 s.
#
# usage: bench/boot.sh ARCH=KERNEL_IMAGE... [-- extra patcheval run flags]
#   e.g. bench/boot.sh ppc64le=/path/vmlinux arm64=/path/Image x86_64=/path/bzImage
# BOOTS (default 3) boots per arch; the agent runs getppid:1000 only.
set -euo pipefail
cd "$(dirname "$0")/.."
boots=${BOOTS:-3}
bin=$(mktemp -d)/patcheval
trap 'rm -rf "$(dirname "$bin")"' EXIT
go build -o "$bin" ./cmd/patcheval
kernels=()
while [ $# -gt 0 ] && [ "$1" != "--" ]; do kernels+=("$1"); shift; done
[ "${1:-}" = "--" ] && shift
if [ ${#kernels[@]} -eq 0 ]; then
	echo "usage: bench/boot.sh ARCH=KERNEL_IMAGE... [-- patcheval run flags]" >&2
	exit 2
fi
printf '%-8s %-6s %-16s %-10s %s\n' arch boot first_result_s boot_s release
for k in "${kernels[@]}"; do
	arch=${k%%=*} img=${k#*=}
	# Build the agent once outside the timing (it is cached by content).
	"$bin" run --kernel "warm=$img,arch=$arch" --bench getppid:1000 --kvm off --json "$@" >/dev/null
	"$bin" run --kernel "bench=$img,arch=$arch" --bench getppid:1000 --boots "$boots" --kvm off --json "$@" |
		python3 -c '
import json, sys
arch = sys.argv[1]
for line in sys.stdin:
    j = json.loads(line)
    rel = (j.get("info") or {}).get("release", "?")
    print("%-8s %-6d %-16.2f %-10.2f %s" % (arch, j["boot"], j.get("first_result_s", 0), j.get("duration_s", 0), rel))
' "$arch"
done
