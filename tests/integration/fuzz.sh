#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Fuzz the filesystem's image parsers (tests/fuzz/fuzz_image.c) for 60 s:
# with libFuzzer when clang can build it (the library sources instrumented
# too), else the standalone random driver under ASan/UBSan with gcc.
# GS_FUZZ_SECONDS overrides the duration.  Exit 77 if nothing can be built.
# timeout: 240
set -u
cd "$(dirname "$0")/../.."
secs=${GS_FUZZ_SECONDS:-60}
work=$(mktemp -d "${TMPDIR:-/tmp}/gs-fuzz.XXXXXX")
trap 'rm -rf "$work"' EXIT
out=$work/build
mkdir -p "$out" "$work/corpus" "$work/tmp"
# the parsers under test get UBSan too; the layers below only ASan (their own
# tests cover them, and gpuq computes NULL + 0 for flushes, which clang flags)
# every fs and lib source but the FUSE front end and the log hook (fsck reaches into the
# object types: a hand-picked list broke the link twice already)
fssrcs=()
for s in lib/*.c fs/*.c fs/graph/*.c fs/graph/apps/*.c fs/nd/*.c; do
	[[ $s == lib/log.c ]] || fssrcs+=("$s")
done
srcs=(lib/log.c gpuq/*.c cache/*.c)
cppflags=(-D_GNU_SOURCE -D_FILE_OFFSET_BITS=64 -Iinclude -Iuapi -Ilib -I.)
libs=(-luring -lm -pthread)

# Compile the sources with $1 (compiler), $2 (sanitizers for fs), $3 (for
# the rest) and the common flags after them.
build() {
	local cc=$1 fsan=$2 osan=$3
	shift 3
	local objs=() i=0 s o
	for s in "${fssrcs[@]}" "${srcs[@]}"; do
		o=$out/$i.o
		i=$((i + 1))
		if [[ $s == fs/* || ($s == lib/* && $s != lib/log.c) ]]; then
			"$cc" "${cppflags[@]}" $fsan "$@" -c -o "$o" "$s" 2>>"$out/log" || return 1
		else
			"$cc" "${cppflags[@]}" $osan "$@" -c -o "$o" "$s" 2>>"$out/log" || return 1
		fi
		objs+=("$o")
	done
	printf '%s\n' "${objs[@]}" >"$out/objs"
}

mode=
if command -v clang >/dev/null &&
	build clang -fsanitize=fuzzer-no-link,address,undefined -fsanitize=fuzzer-no-link,address \
		-g -O1 &&
	clang "${cppflags[@]}" -g -O1 -fsanitize=fuzzer,address,undefined -o "$out/fuzz" \
		tests/fuzz/fuzz_image.c $(cat "$out/objs") "${libs[@]}" 2>>"$out/log"; then
	mode=libfuzzer
elif rm -f "$out"/*.o &&
	build cc -fsanitize=address,undefined -fsanitize=address -g -O1 -fno-omit-frame-pointer &&
	cc "${cppflags[@]}" -DGS_FUZZ_STANDALONE -g -O1 -fsanitize=address,undefined \
		-o "$out/fuzz" tests/fuzz/fuzz_image.c $(cat "$out/objs") "${libs[@]}" \
		2>>"$out/log"; then
	mode=standalone
else
	tail -20 "$out/log"
	# a toolchain that builds a sanitized program but not the target is a bug
	# (a parser source missing from fssrcs, a compile error), not a skip
	echo 'int main(void) { return 0; }' >"$work/t.c"
	if cc -fsanitize=address,undefined -o "$work/t" "$work/t.c" 2>/dev/null; then
		echo "FAIL: the fuzz target does not build (log above)"
		exit 1
	fi
	echo "skip: cannot build the fuzz target (no clang libFuzzer, no gcc ASan)"
	exit 77
fi
echo "fuzz_image: $mode build, ${secs}s"
export TMPDIR=$work/tmp
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=0:abort_on_error=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-halt_on_error=1:print_stacktrace=1}
if [[ $mode == libfuzzer ]]; then
	# seeds: one per mode, so every parser is reached at once
	for m in 0 1 2 3; do printf "\\x0$m\\x01\\x00\\x00\\x00\\x00\\x01" >"$work/corpus/seed$m"; done
	"$out/fuzz" -max_total_time="$secs" -max_len=4200 -timeout=20 -rss_limit_mb=2048 \
		-artifact_prefix="$work/" \
		-print_final_stats=1 "$work/corpus" 2>&1 | tail -25
	rc=${PIPESTATUS[0]}
else
	"$out/fuzz" -t "$secs"
	rc=$?
fi
[[ $rc == 0 ]] || { echo "FAIL: the fuzz target crashed (exit $rc)"; exit 1; }
echo "fuzz_image: no crash"
