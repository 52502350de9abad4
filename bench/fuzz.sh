#!/bin/sh
# bench/fuzz.sh — a fuzzing campaign over patcheval's parsers (not CI).
#
#   bench/fuzz.sh [-t FUZZTIME] [-m MINIMIZETIME] [-p PARALLEL] [-n NICE] [-o REPORT] [-l LOGDIR] [TARGET...]
#
# Runs `go test -fuzz` once per target, one after the other, under nice, and
# prints a table: executions, executions per second, "new interesting"
# inputs (new coverage found in this run) and the corpus total, and whether
# a crasher was found. FUZZTIME is go test's -fuzztime: a duration ("90s")
# or a count ("1000000x", the default: at least 10^6 executions per target).
# PARALLEL is -parallel (default 1: fuzz workers share 2 cores with others).
# MINIMIZETIME is -fuzzminimizetime (default 10s; go's 60s default can eat
# a short run whole: executions spent minimizing a new input are not
# counted until it is done).
# NICE is the niceness added to the script's own (default 15). Under
# `nice -n 10` that makes 19: on a machine loaded by others' nice 0 and 10
# work the fuzz worker then gets a few % of a core (FuzzRead managed 111
# executions in 72 s at load 14); `nice -n 10 bench/fuzz.sh -n 0` runs
# at 10 like the team's builds.
# TARGETs are "pkg:FuzzName" (default: all below). LOGDIR keeps go test's
# output per target (default: a temporary directory, removed at the end);
# its last "fuzz: elapsed" line is the figure of a run stopped early.
#
# Seeds: the targets seed themselves from real mail (mbox/testdata,
# series/testdata) and the kernel's own Kconfig files (small copies in
# build/kconfig/testdata/kernel-kconfig). When the imported 6.1 tree is in the
# shared cache ($PATCHEVAL_CACHE_DIR/trees/linux-6.1.git) every Kconfig file
# of it up to 8 KiB seeds the Kconfig target too.
#
# A crasher is written by go test into <pkg>/testdata/fuzz/<Target>/ and
# stays there as a regression test (it runs with every plain `go test`):
# fix the bug, keep the file, commit both.
set -eu
cd "$(dirname "$0")/.."
PATH=/usr/local/go/bin:$PATH

fuzztime=1000000x
minimize=10s
parallel=1
niceness=15
report=
logdir=
while getopts t:m:p:n:o:l: opt; do
	case $opt in
	t) fuzztime=$OPTARG ;;
	m) minimize=$OPTARG ;;
	p) parallel=$OPTARG ;;
	n) niceness=$OPTARG ;;
	o) report=$OPTARG ;;
	l) logdir=$OPTARG ;;
	*) awk 'NR > 1 && /^set -eu/ { exit } NR > 1' "$0" >&2; exit 2 ;;
	esac
done
shift $((OPTIND - 1))

targets="$*"
if [ -z "$targets" ]; then
	targets="./mbox:FuzzParse ./mbox:FuzzMboxrdRoundTrip ./series:FuzzParseSubject ./series:FuzzParseTrailers ./series:FuzzResolve ./series/apply:FuzzApply ./pipelines:FuzzParse ./build/kconfig:FuzzParse ./mbox/numbers:FuzzRead ./internal/gittree:FuzzInflate ./internal/termsafe:FuzzLine ./pipelines/bots/follow:FuzzAuthenticate"
fi

cache=${PATCHEVAL_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/patcheval}
if [ -d "$cache/trees/linux-6.1.git" ]; then
	export PATCHEVAL_FUZZ_KERNEL_GIT="$cache/trees/linux-6.1.git"
fi

if [ -z "$logdir" ]; then
	logdir=$(mktemp -d)
	trap 'rm -rf "$logdir"' EXIT
fi
mkdir -p "$logdir"
rows=
status=0
for t in $targets; do
	pkg=${t%%:*}
	name=${t#*:}
	log="$logdir/$(echo "$t" | tr '/:.' '___').log"
	echo "fuzzing $pkg $name for $fuzztime ..." >&2
	start=$(date +%s)
	if nice -n "$niceness" go test "$pkg" -run '^$' -fuzz "^$name\$" -fuzztime "$fuzztime" -fuzzminimizetime "$minimize" -parallel "$parallel" >"$log" 2>&1; then
		result=ok
	else
		result=FAIL
		status=1
	fi
	secs=$(( $(date +%s) - start ))
	# The last progress line: "fuzz: elapsed: 1m0s, execs: 123 (2/sec), new interesting: 4 (total: 9)".
	last=$(grep 'fuzz: elapsed:' "$log" | tail -n 1 || true)
	execs=$(echo "$last" | sed -n 's/.*execs: \([0-9]*\).*/\1/p')
	newint=$(echo "$last" | sed -n 's/.*new interesting: \([0-9]*\).*/\1/p')
	total=$(echo "$last" | sed -n 's/.*(total: \([0-9]*\)).*/\1/p')
	# Rate over the fuzzing time go reports (the wall time also counts
	# building the instrumented test binary).
	el=$(echo "$last" | sed -n 's/.*elapsed: \([0-9hms.]*\),.*/\1/p')
	fsecs=$(echo "$el" | awk '{ s = 0; n = $0; if (match(n, /[0-9]+h/)) s += 3600 * substr(n, RSTART, RLENGTH - 1); if (match(n, /[0-9]+m/)) s += 60 * substr(n, RSTART, RLENGTH - 1); if (match(n, /[0-9.]+s/)) s += substr(n, RSTART, RLENGTH - 1); print int(s) }')
	rate=0
	if [ -n "$execs" ] && [ "${fsecs:-0}" -gt 0 ]; then
		rate=$((execs / fsecs))
	fi
	crasher=$(sed -n 's/.*Failing input written to \(.*\)/\1/p' "$log" | head -n 1)
	if [ "$result" = FAIL ] && [ -z "$crasher" ]; then
		crasher="(see log below)"
		tail -n 30 "$log" >&2
	fi
	rows="$rows$(printf '%-16s %-22s %10s %8s %11s %8s %6s  %s %s' "$pkg" "$name" "${execs:-0}" "$rate" "${fsecs:-0}/$secs" "${newint:-0}" "${total:-0}" "$result" "$crasher")
"
done

out=$(printf '%-16s %-22s %10s %8s %11s %8s %6s  %s\n' package target execs execs/s fuzz/wall-s new-int corpus result; printf '%s' "$rows")
echo "$out"
if [ -n "$report" ]; then
	{
		echo "# bench/fuzz.sh -t $fuzztime -m $minimize -p $parallel -n $niceness (running at nice $(nice)), $(date -u '+%Y-%m-%d %H:%M UTC'), $(nproc) CPUs, $(go version | cut -d' ' -f3), load $(cut -d' ' -f1-3 /proc/loadavg)"
		echo "$out"
	} >"$report"
fi
exit $status
