#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# The hostile attach client (tests/unit/attach/test_hostile.c: rewritten
# ring geometry and indexes, out-of-bounds offsets and buffers, writes on a
# read-only ring, a flood, a disconnect mid-request, malformed messages)
# against the daemon side built with ASan and UBSan, so that a stray read or
# write of the server or the pollers is an error, not luck.  The protocol
# test (test_attach) runs the same way.  Builds what it needs into
# build-asan/ (incremental after the first run).
# timeout: 900
set -u
cd "${GS_ROOT:-$(dirname "$0")/../..}" || exit 1
fail() { echo "FAIL: $*" >&2; exit 1; }

echo 'int main(void) { return 0; }' >"${TMPDIR:-/tmp}/asan-probe-$$.c"
if ! ${CC:-cc} -fsanitize=address,undefined -o "${TMPDIR:-/tmp}/asan-probe-$$" \
	"${TMPDIR:-/tmp}/asan-probe-$$.c" 2>/dev/null; then
	rm -f "${TMPDIR:-/tmp}/asan-probe-$$"*
	echo "skip: the compiler cannot build with -fsanitize=address,undefined"
	exit 77
fi
rm -f "${TMPDIR:-/tmp}/asan-probe-$$"*

AB=build-asan
progs=("$AB/tests/unit/attach/test_hostile" "$AB/tests/unit/attach/test_attach")
# half the CPUs: the other tests run meanwhile (tests/run.sh runs them in parallel)
jobs=$(($(nproc) / 2))
make -s asan B="$AB" -j"$((jobs > 2 ? jobs : 2))" "${progs[@]}" >"${TMPDIR:-/tmp}/attach-asan-build-$$.log" 2>&1 || {
	tail -30 "${TMPDIR:-/tmp}/attach-asan-build-$$.log" >&2
	rm -f "${TMPDIR:-/tmp}/attach-asan-build-$$.log"
	fail "ASan build"
}
rm -f "${TMPDIR:-/tmp}/attach-asan-build-$$.log"

# any report is fatal, leaks included (the daemon side frees what clients left)
export ASAN_OPTIONS=${ASAN_OPTIONS:-abort_on_error=0:halt_on_error=1:detect_leaks=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-halt_on_error=1:print_stacktrace=1}
for p in "${progs[@]}"; do
	"$p" || fail "$(basename "$p") under ASan/UBSan"
	echo "ok: $(basename "$p") under ASan/UBSan"
done
