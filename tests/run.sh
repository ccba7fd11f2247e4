#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# The one test runner.  Runs every test with a timeout, exit 0 = pass,
# 77 = skip (the test says why), anything else = fail.  Closing line:
#   N passed, N failed, N skipped
#
# Tests: $B/tests/unit/*/test_* (cmocka), tests/integration/*.sh,
#        tests/qemu/*.sh.  A script may carry "# timeout: SECONDS".
# Env:   B=build dir (build), TESTS_FILTER="substr1 substr2" (run matching),
#        TEST_TIMEOUT=default seconds (300), V=1 (show output of passing tests)
set -u
cd "$(dirname "$0")/.."
B=${B:-build}
export B GS_BUILD=$PWD/$B GS_ROOT=$PWD
def_timeout=${TEST_TIMEOUT:-300}
logdir=$B/test-logs
mkdir -p "$logdir"

tests=()
for t in "$B"/tests/unit/*/test_*; do
	[[ -x $t && $t != *.d && $t != *.o ]] && tests+=("$t")
done
for t in tests/integration/*.sh tests/qemu/*.sh; do
	[[ -f $t ]] && tests+=("$t")
done

if [[ -n ${TESTS_FILTER:-} ]]; then
	sel=()
	for t in "${tests[@]}"; do
		for f in $TESTS_FILTER; do
			[[ $t == *"$f"* ]] && { sel+=("$t"); break; }
		done
	done
	tests=("${sel[@]}")
fi

pass=0 fail=0 skip=0 failed=()
for t in "${tests[@]}"; do
	name=${t#"$B"/}
	name=${name#tests/}
	log=$logdir/$(echo "$name" | tr '/' '_').log
	to=$def_timeout
	if [[ $t == *.sh ]]; then
		x=$(sed -n 's/^# timeout: *\([0-9]\+\).*/\1/p' "$t" | head -1)
		[[ -n $x ]] && to=$x
	fi
	start=$(date +%s.%N)
	if [[ $t == *.sh ]]; then
		timeout -k 10 "$to" bash "$t" >"$log" 2>&1
	else
		timeout -k 10 "$to" "$t" >"$log" 2>&1
	fi
	rc=$?
	secs=$(awk -v s="$start" -v e="$(date +%s.%N)" 'BEGIN{printf "%.1f", e-s}')
	case $rc in
	0)	pass=$((pass + 1)); printf 'PASS  %-50s %6ss\n' "$name" "$secs"
		[[ ${V:-0} == 1 ]] && sed 's/^/      /' "$log" ;;
	77)	skip=$((skip + 1))
		why=$(grep -i 'skip' "$log" | tail -1)
		printf 'SKIP  %-50s %s\n' "$name" "${why:-(no reason given)}" ;;
	124|137) fail=$((fail + 1)); failed+=("$name")
		printf 'FAIL  %-50s timed out after %ss\n' "$name" "$to"
		tail -30 "$log" | sed 's/^/      /' ;;
	*)	fail=$((fail + 1)); failed+=("$name")
		printf 'FAIL  %-50s exit %d (%ss)\n' "$name" "$rc" "$secs"
		tail -40 "$log" | sed 's/^/      /' ;;
	esac
done

[[ $fail -gt 0 ]] && printf 'failed: %s\n' "${failed[*]}"
printf '%d passed, %d failed, %d skipped\n' "$pass" "$fail" "$skip"
[[ $fail -eq 0 ]]
