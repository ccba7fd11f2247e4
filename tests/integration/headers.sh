#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# timeout: 300
# Every public header (include/*.h) compiles on its own, from a copy of include/
# alone (so a private header cannot be reached, by -I or by a relative path):
# as C (gnu11, and c11 -pedantic), as C++17 (-Wextra), and with nvcc where it
# exists for the headers CUDA code includes.  Public headers include only
# system headers and other public headers.
set -eu
cd "$(dirname "$0")/../.."
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cp include/*.h "$tmp/"
fails=0
bad() { echo "FAIL: $*"; fails=$((fails + 1)); }

for h in include/*.h; do
	n=$(basename "$h")
	if grep -n '#include "' "$h" | grep -v '#include "gstore[a-z_]*\.h"'; then
		bad "$n includes a header that is not public"
	fi
	echo "#include \"$n\"" >"$tmp/t.c"
	cc -std=gnu11 -Wall -Wextra -Werror -fsyntax-only -I"$tmp" "$tmp/t.c" ||
		bad "$n: C (gnu11)"
	cc -std=c11 -pedantic -Wall -Wextra -Werror -fsyntax-only -I"$tmp" "$tmp/t.c" ||
		bad "$n: C (c11 -pedantic)"
	if command -v g++ >/dev/null; then
		g++ -std=c++17 -Wall -Wextra -Werror -fsyntax-only -I"$tmp" -x c++ "$tmp/t.c" ||
			bad "$n: C++17"
	fi
done

NVCC=${NVCC:-$(command -v nvcc || { test -x /usr/local/cuda/bin/nvcc && echo /usr/local/cuda/bin/nvcc; } || true)}
if [[ -n $NVCC ]]; then
	# the headers with device code (GS_HD or __CUDACC__), each alone
	for h in $(grep -l 'GS_HD\|__CUDACC__' include/*.h); do
		n=$(basename "$h")
		echo "#include \"$n\"" >"$tmp/t.cu"
		"$NVCC" -arch=sm_90 -std=c++17 -Werror all-warnings -Xcompiler -Wall,-Wextra,-Werror \
			-I"$tmp" -c -o "$tmp/t.o" "$tmp/t.cu" || bad "$n: nvcc"
	done
else
	echo "note: no nvcc: the CUDA compiles are skipped"
fi

[[ $fails -eq 0 ]] || exit 1
echo "PASS: $(ls include/*.h | wc -l) public headers compile alone"
