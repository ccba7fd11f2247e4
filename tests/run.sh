#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# The one test runner.  Runs every test with a timeout, exit 0 = pass,
# 77 = skip (the test says why), anything else = fail.  One line per test as
# it ends, then the closing line:
#   N passed, N failed, N skipped
#
# Tests: $B/tests/unit/*/test_* (cmocka), tests/integration/*.sh,
#        tests/qemu/*.sh.  A script may carry "# timeout: SECONDS".
#
# Independent tests run in parallel, longest first (durations of the last run
# are kept in $B/test-logs/times).  A test whose source carries a line
# "# serial: WHY" (scripts) or " * serial: WHY" (C, in its head comment) runs
# alone after the parallel phase: it measures time or CPU use, or loads the
# machine so much that it would disturb the others.
#
# The FUSE transport matrix: every test that mounts through gs_mount
# (tests/helpers/gsmount.sh) runs once per word of $TEST_TRANSPORTS (default
# "fuse uring"), with GS_TRANSPORT set to the word: the classic /dev/fuse
# transport, then FUSE over io_uring (that leg skips where the kernel lacks
# it).  The first leg keeps the test's name; the others are NAME@WORD.  A
# script with a line "# matrix: no" runs once (it picks its transport).  Every
# leg runs every mounted test, the crash, power-cut and stress ones included;
# TEST_MATRIX_SKIP="NAME..." leaves those tests out of the legs after the first
# (for a quicker run by hand; nothing is left out by default).
#
# Usage: tests/run.sh [-j N] [FILTER...]
# Env:   B=build dir (build), TESTS_FILTER="substr1 substr2" (run matching; FILTER
#        arguments add to it), TEST_JOBS=N (parallel jobs; default: number of CPUs
#        + 1, at least 2; 1 runs everything one at a time), TEST_TIMEOUT=default
#        seconds (300), V=1 (show output of passing tests), TEST_TRANSPORTS (above)
set -u
cd "$(dirname "$0")/.."
B=${B:-build}
export B GS_BUILD=$PWD/$B GS_ROOT=$PWD
def_timeout=${TEST_TIMEOUT:-300}
jobs=${TEST_JOBS:-}
filter=${TESTS_FILTER:-}
while [[ $# -gt 0 ]]; do
	case $1 in
	-j)	jobs=${2:-}; shift 2 ;;
	-j*)	jobs=${1#-j}; shift ;;
	*)	filter="$filter $1"; shift ;;
	esac
done
if [[ -z $jobs ]]; then
	jobs=$(($(nproc 2>/dev/null || echo 1) + 1))
	[[ $jobs -ge 2 ]] || jobs=2
fi
[[ $jobs =~ ^[1-9][0-9]*$ ]] || { echo "run.sh: bad job count '$jobs'" >&2; exit 2; }
logdir=$B/test-logs
mkdir -p "$logdir"
times=$logdir/times

tests=()
for t in "$B"/tests/unit/*/test_*; do
	[[ -x $t && $t != *.d && $t != *.o ]] && tests+=("$t")
done
transports=(${TEST_TRANSPORTS-fuse uring})
matrix_skip=${TEST_MATRIX_SKIP-}
in_matrix() { grep -qE '\bgs_(try_)?mount\b' "$1" && ! grep -q '^# matrix: no' "$1"; }
# in_later_legs SCRIPT: also run in the legs after the first
in_later_legs() {
	local n
	for n in $matrix_skip; do
		[[ $(basename "$1" .sh) == "$n" ]] && return 1
	done
	return 0
}
for t in tests/integration/*.sh tests/qemu/*.sh; do
	[[ -f $t ]] || continue
	if [[ ${#transports[@]} -gt 0 ]] && in_matrix "$t"; then
		tests+=("$t")
		if in_later_legs "$t"; then
			for w in "${transports[@]:1}"; do
				tests+=("$t@$w")
			done
		fi
	else
		tests+=("$t")
	fi
done

if [[ -n ${filter// /} ]]; then
	sel=()
	for t in "${tests[@]}"; do
		for f in $filter; do
			[[ $t == *"$f"* ]] && { sel+=("$t"); break; }
		done
	done
	tests=("${sel[@]}")
fi

tname() {
	local n=${1#"$B"/}
	echo "${n#tests/}"
}

# the source a test's markers are read from: the script, or the C file
tsrc() {
	if [[ $1 == *.sh* ]]; then
		tscript "$1"
	else
		echo "tests/${1#"$B"/tests/}.c"
	fi
}

# a matrix leg: the script and its transport
tscript() { echo "${1%@*}"; }
tleg() {
	if [[ $1 == *@* ]]; then
		echo "${1##*@}"
	elif [[ $1 == *.sh ]] && [[ ${#transports[@]} -gt 0 ]] && in_matrix "$1"; then
		echo "${transports[0]}"
	fi
}

ttimeout() {
	local x=
	set -- "$(tscript "$1")"
	[[ $1 == *.sh ]] && x=$(sed -n 's/^# timeout: *\([0-9]\+\).*/\1/p' "$1" | head -1)
	echo "${x:-$def_timeout}"
}

is_serial() {
	local s
	s=$(tsrc "$1")
	[[ -f $s ]] && grep -qE '^(#| \*|/\*) serial:' "$s"
}

# Estimated seconds, for the order: last run's time; for a script never timed
# here a tenth of its timeout (most of which scripts leave unused), 1 for a
# unit test.
declare -A last=()
if [[ -f $times ]]; then
	while read -r n s; do
		[[ -n $n && -n $s ]] && last[$n]=$s
	done <"$times"
fi
est() {
	local n
	n=$(tname "$1")
	if [[ -n ${last[$n]:-} ]]; then
		echo "${last[$n]}"
	elif [[ $1 != *.sh* ]]; then
		echo 1
	else
		echo $(($(ttimeout "$1") / 10))
	fi
}

par=() ser=()
while read -r _ t; do
	if is_serial "$t"; then
		ser+=("$t")
	else
		par+=("$t")
	fi
done < <(for t in "${tests[@]}"; do printf '%s %s\n' "$(est "$t")" "$t"; done | sort -s -k1,1gr)

pass=0 fail=0 skip=0 failed=()
declare -A job_name=() job_log=() job_to=() job_start=()
declare -A took=()

start_one() {
	local t=$1 name log to
	name=$(tname "$t")
	log=$logdir/$(echo "$name" | tr '/' '_').log
	to=$(ttimeout "$t")
	if [[ $t == *.sh* ]]; then
		GS_TRANSPORT=$(tleg "$t") timeout -k 10 "$to" bash "$(tscript "$t")" >"$log" 2>&1 \
			</dev/null &
	else
		timeout -k 10 "$to" "$t" >"$log" 2>&1 </dev/null &
	fi
	job_name[$!]=$name
	job_log[$!]=$log
	job_to[$!]=$to
	job_start[$!]=$(date +%s.%N)
}

# report PID RC: the line for the test that ran as PID
report() {
	local pid=$1 rc=$2 name=${job_name[$1]} log=${job_log[$1]} to=${job_to[$1]} secs why
	secs=$(awk -v s="${job_start[$pid]}" -v e="$(date +%s.%N)" 'BEGIN{printf "%.1f", e-s}')
	unset "job_name[$pid]" "job_log[$pid]" "job_to[$pid]" "job_start[$pid]"
	took[$name]=$secs
	case $rc in
	0)	pass=$((pass + 1)); printf 'PASS  %-50s %6ss\n' "$name" "$secs"
		[[ ${V:-0} == 1 ]] && sed 's/^/      /' "$log" ;;
	77)	skip=$((skip + 1))
		why=$(grep -i 'skip' "$log" | tail -1)
		printf 'SKIP  %-50s %s\n' "$name" "${why:-(no reason given)}" ;;
	124|137) fail=$((fail + 1)); failed+=("$name")
		printf 'FAIL  %-50s timed out after %ss (log: %s)\n' "$name" "$to" "$log"
		tail -30 "$log" | sed 's/^/      /' ;;
	*)	fail=$((fail + 1)); failed+=("$name")
		printf 'FAIL  %-50s exit %d (%ss, log: %s)\n' "$name" "$rc" "$secs" "$log"
		tail -40 "$log" | sed 's/^/      /' ;;
	esac
}

# reap one finished job (wait -n -p needs bash >= 5.1)
reap() {
	local pid rc
	wait -n -p pid
	rc=$?
	[[ -n ${pid:-} && -n ${job_name[$pid]:-} ]] && report "$pid" "$rc"
}

# run_all N TEST...: at most N at once
run_all() {
	local n=$1
	shift
	for t in "$@"; do
		while [[ ${#job_name[@]} -ge $n ]]; do
			reap
		done
		start_one "$t"
	done
	while [[ ${#job_name[@]} -gt 0 ]]; do
		reap
	done
}

# ^C: the running tests go too (timeout(1) passes the signal on)
trap 'kill -TERM "${!job_name[@]}" 2>/dev/null; wait; exit 130' INT TERM

[[ ${#par[@]} -gt 0 ]] && run_all "$jobs" "${par[@]}"
[[ ${#ser[@]} -gt 0 ]] && run_all 1 "${ser[@]}"

# keep the durations for the next run's order (tests not run keep theirs)
for n in "${!took[@]}"; do
	last[$n]=${took[$n]}
done
for n in "${!last[@]}"; do
	printf '%s %s\n' "$n" "${last[$n]}"
done | sort >"$times.tmp" && mv "$times.tmp" "$times"

[[ $fail -gt 0 ]] && printf 'failed: %s\n' "${failed[*]}"
printf '%d passed, %d failed, %d skipped\n' "$pass" "$fail" "$skip"
[[ $fail -eq 0 ]]
