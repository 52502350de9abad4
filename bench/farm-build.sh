#!/usr/bin/env bash
# Benchmark the farm's build stage (issue 14): one evaluation of KERNELS
# distinct kernels built on one worker at -j1, one kernel at a time (the
# one-machine reference), then on two such workers, in the same run and
# on the same machine. serve, Postgres and each worker run in network
# namespaces the test makes (pipelines/service TestFarmBuildBench; needs
# root and ip), so the database, the sources (git smart HTTP) and the
# kernels (the artifact store) cross veth links as between machines.
#
#   bench/farm-build.sh [--kernels N] [--seconds S]   # default 4 kernels, 20 s
#
# The kernels are a fake Kbuild-like tree whose compile takes S seconds
# (sleep): the figure is the farm's scheduling and transfer overhead
# against the parallelism it buys (expect near 0.5x for two workers when
# S is large beside the overhead), not a kernel's compile time. A
# real-kernel variant is not written. Prints the load average before and
# after, and the BENCH line with both wall times and their ratio.
set -euo pipefail
kernels=4
seconds=20
while [ $# -gt 0 ]; do
	case $1 in
	--kernels) kernels=$2; shift 2 ;;
	--seconds) seconds=$2; shift 2 ;;
	*) echo "usage: bench/farm-build.sh [--kernels N] [--seconds S]" >&2; exit 2 ;;
	esac
done
root=$(cd "$(dirname "$0")/.." && pwd)
export PATH=$PATH:/usr/local/go/bin
cd "$root"
echo "load before: $(cut -d' ' -f1-3 /proc/loadavg)"
PATCHEVAL_FARM_BENCH="$kernels,$seconds" go test ./pipelines/service/ -run '^TestFarmBuildBench$' -count=1 -timeout 0 -v |
	grep -E '^BENCH|^(--- )?FAIL|^ok' || { echo "bench/farm-build.sh: the benchmark failed (run the go test above with -v)" >&2; exit 1; }
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)"
