#!/usr/bin/env bash
# kcc's cost on a miss against a plain compile, on the same kernel objects:
# for N C objects sampled from a finished (or running) build's O= directory,
# kbuild's recorded command (.o.cmd) is run three ways, interleaved, each
# into a scratch directory (the build's own files are only read):
#   plain  the compiler alone
#   kcc    through a wrapper with an empty store (a cold miss: preprocess,
#          hash, compile the preprocessed text, store)
#   hit    the same wrapper again (the object now in its store)
#   plain+thp  the compiler alone with the huge-page library a wrapper
#          preloads into it (kcc-thp.so beside the wrapper, when there is
#          one): what the library alone saves, apart from caching
# Figures are CPU time (user+sys of all processes, /usr/bin/time), so they
# hold up better than wall time on a loaded machine; wall is shown too.
#
#   bench/kccmiss.sh O_DIR [N] [WRAPPER...]
#
# WRAPPER defaults to the installed <cache>/kcc/bin/kcc; several can be
# given (e.g. an old one and a new one) and each gets its own kcc/hit rows.
# Target (issue 19): a miss within 5% of a plain compile.
set -euo pipefail
out=$(cd "$1" && pwd)
n=${2:-20}
shift $(($# < 2 ? $# : 2))
cache=${PATCHEVAL_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/patcheval}
wrappers=("$@")
[ ${#wrappers[@]} -gt 0 ] || wrappers=("$cache/kcc/bin/kcc")
shim=
for w in "${wrappers[@]}"; do
	[ -n "$shim" ] || [ ! -f "$(dirname "$w")/kcc-thp.so" ] || shim=$(dirname "$w")/kcc-thp.so
done
bench=${BENCH_DIR:-$(mktemp -d /tmp/patcheval-bench-kccmiss.XXXXXX)}
mkdir -p "$bench"
[ -x /usr/bin/time ] || { echo "kccmiss.sh: /usr/bin/time missing (apt-get install time)" >&2; exit 3; }

# Sample C objects evenly (sorted list, every k-th) for a stable choice.
mapfile -t cmds < <(cd "$out" && find . -name '*.o.cmd' | LC_ALL=C sort)
picked=()
step=$(( ${#cmds[@]} / n ))
[ "$step" -ge 1 ] || step=1
for ((i = 0; i < ${#cmds[@]} && ${#picked[@]} < n; i += step)); do
	line=$(head -1 "$out/${cmds[$i]}")
	[[ $line =~ \ -c\ -o\ [^\ ]+\.o\ [^\ ]+\.c\ *$ ]] && picked+=("${cmds[$i]}")
done
echo "kccmiss: ${#picked[@]} C objects from $out; load $(cut -d' ' -f1-3 /proc/loadavg)" | tee "$bench/results.txt"

declare -A cpu wall
run() { # label cmd...: timed in $out, added to the label's totals
	local label=$1
	shift
	(cd "$out" && /usr/bin/time -f "%e %U %S" -o "$bench/t" "$@" >/dev/null 2>"$bench/err") ||
		{ echo "kccmiss: $label failed:" >&2; cat "$bench/err" >&2; exit 1; }
	local tw tu ts
	read -r tw tu ts <"$bench/t"
	cpu[$label]=$(echo "${cpu[$label]:-0} + $tu + $ts" | bc)
	wall[$label]=$(echo "${wall[$label]:-0} + $tw" | bc)
}

for c in "${picked[@]}"; do
	line=$(head -1 "$out/$c")
	cmd=${line#*:= }
	eval "argv=($cmd)" # kbuild's command is shell text (quoted -D values)
	# Drop a wrapper in front of the compiler (kcc, ccache).
	while [[ ${argv[0]##*/} == kcc* || ${argv[0]##*/} == ccache ]]; do argv=("${argv[@]:1}"); done
	obj=$(basename "${c%.cmd}")
	obj=${obj#.}
	scratch=$bench/o
	rm -rf "$scratch" && mkdir -p "$scratch"
	# Outputs into the scratch dir: -o FILE and the dependency file.
	args=()
	for ((k = 0; k < ${#argv[@]}; k++)); do
		a=${argv[$k]}
		case $a in
		-o) args+=(-o "$scratch/$obj"); k=$((k + 1)) ;;
		-Wp,-MMD,* | -Wp,-MD,*) args+=("-Wp,-MMD,$scratch/$obj.d") ;;
		*) args+=("$a") ;;
		esac
	done
	run plain "${args[@]}"
	[ -z "$shim" ] || run plain+thp env LD_PRELOAD="$shim" "${args[@]}"
	for w in "${wrappers[@]}"; do
		store=$bench/store
		rm -rf "$store"
		run "kcc:$w" env PATCHEVAL_KCC=1 PATCHEVAL_KCC_DIR="$store" PATCHEVAL_KCC_BASEDIR="$(dirname "$out")/src" \
			PATCHEVAL_KCC_LOG="$bench/kcc.log" TMPDIR="$bench" "$w" "${args[@]}"
		run "hit:$w" env PATCHEVAL_KCC=1 PATCHEVAL_KCC_DIR="$store" PATCHEVAL_KCC_BASEDIR="$(dirname "$out")/src" \
			PATCHEVAL_KCC_LOG="$bench/kcc.log" TMPDIR="$bench" "$w" "${args[@]}"
	done
done
for label in plain ${shim:+plain+thp} $(for w in "${wrappers[@]}"; do echo "kcc:$w hit:$w"; done); do
	printf '%-60s cpu %7.2f s (%.3fx plain)  wall %7.2f s\n' "$label" "${cpu[$label]}" \
		"$(echo "${cpu[$label]} / ${cpu[plain]}" | bc -l)" "${wall[$label]}" | tee -a "$bench/results.txt"
done
echo "kccmiss: kcc log: $(awk '{print $1}' "$bench/kcc.log" | sort | uniq -c | tr '\n' ' ')" | tee -a "$bench/results.txt"
