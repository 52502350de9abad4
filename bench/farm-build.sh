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
#   bench/farm-build.sh --fetch
#   bench/farm-build.sh --real [--one-machine]
#
# The kernels are a fake Kbuild-like tree whose compile takes S seconds
# (sleep): the figure is the farm's scheduling and transfer overhead
# against the parallelism it buys (expect near 0.5x for two workers when
# S is large beside the overhead), not a kernel's compile time.
#
# --fetch: a worker's first fetch of the whole imported 6.1 tree (the
# suite's, PATCHEVAL_CACHE_DIR) into its empty mirror over serve's
# /git/<id> (go-git, one commit by hash), against C git's `git clone
# --bare` and `git fetch` of that commit from the same URL
# (pipelines/service TestFarmTreeFetchBench; loopback, no root needed).
#
# --real: a real evaluation (one x86_64 tinyconfig kernel of the 6.1
# tree, two variants, 3 deterministic boots each) on one machine with the
# kernel from the suite's cache, then across the namespaces on two cold
# workers: one fetches the tree over serve's git smart HTTP and builds
# the kernel for real (-j2, an empty compiler cache: a full kernel build,
# tens of minutes on a loaded 2-core machine), both boot it, and Postgres
# restarts during the first boot. Checks the samples and the two
# report.json files agree (pipelines/service TestFarmRealKernel). Needs
# the suite's x86_64 boot kernel cached (evaluate/qemu
# TestOtherArches/x86_64 with PATCHEVAL_LONG_TESTS=1 builds it); run it
# under nice on a shared machine, and announce the build there.
# --one-machine runs the one-machine half alone (boots only).
#
# Prints the load average before and after, and the BENCH lines.
set -euo pipefail
kernels=4
seconds=20
mode=build
real=1
while [ $# -gt 0 ]; do
	case $1 in
	--kernels) kernels=$2; shift 2 ;;
	--seconds) seconds=$2; shift 2 ;;
	--fetch) mode=fetch; shift ;;
	--real) mode=real; shift ;;
	--one-machine) real=one-machine; shift ;;
	*) echo "usage: bench/farm-build.sh [--kernels N] [--seconds S] | --fetch | --real [--one-machine]" >&2; exit 2 ;;
	esac
done
root=$(cd "$(dirname "$0")/.." && pwd)
export PATH=$PATH:/usr/local/go/bin
cd "$root"
echo "load before: $(cut -d' ' -f1-3 /proc/loadavg)"
case $mode in
build) export PATCHEVAL_FARM_BENCH="$kernels,$seconds" test=TestFarmBuildBench ;;
fetch) export PATCHEVAL_FARM_FETCH_BENCH=1 test=TestFarmTreeFetchBench ;;
real) export PATCHEVAL_FARM_REAL=$real test=TestFarmRealKernel ;;
esac
start=$(date +%s)
go test ./pipelines/service/ -run "^$test\$" -count=1 -timeout 0 -v |
	grep -E '^BENCH|^(--- )?FAIL|^ok' || { echo "bench/farm-build.sh: the benchmark failed (run the go test above with -v)" >&2; exit 1; }
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg); $(($(date +%s) - start)) s in all"
