#!/usr/bin/env bash
# Follower throughput (issue 13): per round, import BENCH_FOLLOW_MESSAGES
# (default 1000) generated messages (series of 1-6 patches with cover
# letters, and replies) into a real local public-inbox, then time one
# follower poll from the end of the import to every series queued, and
# read the Go heap after each round. Target: under 10 s per round, heap
# flat across the rounds (BENCH_FOLLOW_ROUNDS, default 2).
#
#   bench/follow.sh                    # 1000 messages x 2 rounds
#   BENCH_FOLLOW_MESSAGES=5000 BENCH_FOLLOW_ROUNDS=3 bench/follow.sh
#
# The import itself (public-inbox's own indexing) is timed apart and not
# part of the figure.
#
# Last measured (2026-12-01, 2 cores at load ~20, 1001 messages and 155
# series per round): round 1 9.09 s, round 2 8.41 s (target < 10 s); Go
# heap in use after GC 2.9 MB then 3.0 MB (flat); runtime Sys 29.6 MB then
# 41.6 MB; imports 222 s and 234 s (public-inbox, not in the figure).
set -euo pipefail
cd "$(dirname "$0")/.."
exec go test -run '^$' -bench BenchmarkFollowerThroughput -benchtime 1x -v ./pipelines/bots/follow/
