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
#   bench/farm-build.sh --real-build [--kernels N]   # default 4 real kernels
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
# --real-build: the same build stage with real kernels (pipelines/service
# TestFarmRealBuildBench): one evaluation of N (1 to 4) x86_64
# tinyconfig kernels of the imported 6.1 tree (PATCHEVAL_CACHE_DIR),
# HZ=100, 250, 300, 1000, on one worker at -j1 and then on two, each
# worker with an empty cache but its mirror of the tree seeded (the
# first fetch is --fetch's figure) and the compiler cache off
# (--compiler-cache none: with kcc a worker's later kernels would reuse
# most of its first one's objects). Every object is compiled on both
# sides: N=4 is eight kernel builds at -j1, four per arm. Needs root and
# ip; give it the machine. Session 10, a quiet fresh 2-core VM (load 1.0
# to 2.35): one worker 559.7 s, two workers 299.5 s, 0.54x (each kernel
# 134 to 163 s, 516 objects; 894 s in all); 0.60x beside other helpers'
# nice-19 builds and, for its first 2 minutes, the coordinator's nice
# -20 bench/kccmiss.sh (load 3.4 to 5.8). bench/farm-results.md has
# each kernel's times.
#
# --real: a real evaluation (one x86_64 tinyconfig kernel of the 6.1
# tree, two variants, 3 deterministic boots each) on one machine with the
# kernel from the suite's cache, then across the namespaces on two cold
# workers: one fetches the tree over serve's git smart HTTP and builds
# the kernel for real (-j2, an empty compiler cache: a full kernel build,
# tens of minutes on a loaded 2-core machine), both boot it, and Postgres
# restarts during the first boot. Checks the samples and the two
# report.json files agree (pipelines/service TestFarmRealKernel). Needs
# the suite's x86_64 boot kernel cached (evaluate/target/qemu
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
	--real-build) mode=real-build; shift ;;
	--one-machine) real=one-machine; shift ;;
	*) echo "usage: bench/farm-build.sh [--kernels N] [--seconds S] | --fetch | --real [--one-machine] | --real-build [--kernels N]" >&2; exit 2 ;;
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
real-build) export PATCHEVAL_FARM_REAL_BENCH=$kernels test=TestFarmRealBuildBench ;;
esac
start=$(date +%s)
# The whole output goes to $FARM_BENCH_LOG (default: a temporary file);
# on a failure the BENCH lines measured before it are printed too.
log=${FARM_BENCH_LOG:-$(mktemp "${TMPDIR:-/tmp}/farm-build.XXXXXX.log")}
if go test ./pipelines/service/ -run "^$test\$" -count=1 -timeout 0 -v >"$log" 2>&1; then
	grep -E '^BENCH|^ok' "$log"
else
	grep -o 'BENCH .*' "$log" | awk '!seen[$0]++'
	grep -E '^(--- )?FAIL' "$log"
	echo "bench/farm-build.sh: the benchmark failed; its output: $log" >&2
	exit 1
fi
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg); $(($(date +%s) - start)) s in all"
