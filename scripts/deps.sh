#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Install the Debian 12 packages gstore needs, only those missing.
#
#   scripts/deps.sh [SET...]     SET: demo (default), test, bench
#
#   demo   build and run: libgstore, gstore, gstorefs, `make demo` (what `make deps`
#          and `make demo` install)
#   test   what `make check` adds: cmocka, fio, stress-ng, clang (the fuzz target),
#          qemu with a kernel image, its headers and busybox (the kernel-module tests),
#          nfs-kernel-server and nfs-common (tests/qemu/nfs_export.sh copies their
#          programs into the guest)
#   bench  what `make bench` adds: HDF5 (the N-D peer), fio
#
# Env: DEPS_TRY=1  a missing package that cannot be installed (no root, no sudo, no
#                  network) is a warning, not an error: the tests that need it skip.
set -euo pipefail

demo=(build-essential pkg-config liburing-dev libfuse3-dev fuse3 python3 python3-numpy)
test=(libcmocka-dev fio stress-ng clang qemu-system-x86 linux-image-amd64 linux-headers-amd64
      busybox-static kmod cpio nfs-kernel-server nfs-common)
bench=(libhdf5-dev fio)

pkgs=()
[[ $# -eq 0 ]] && set -- demo
for s in "$@"; do
	case $s in
	demo) pkgs+=("${demo[@]}") ;;
	test) pkgs+=("${demo[@]}" "${test[@]}") ;;
	bench) pkgs+=("${demo[@]}" "${bench[@]}") ;;
	*) echo "deps.sh: unknown set '$s' (demo, test, bench)" >&2; exit 2 ;;
	esac
done

missing=()
for p in $(printf '%s\n' "${pkgs[@]}" | sort -u); do
	dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' ||
		missing+=("$p")
done
[[ ${#missing[@]} -eq 0 ]] && exit 0

give_up() {
	if [[ ${DEPS_TRY:-0} == 1 ]]; then
		echo "deps.sh: warning: not installed: ${missing[*]} ($*); tests that need them skip" >&2
		exit 0
	fi
	echo "deps.sh: cannot install ${missing[*]}: $*" >&2
	exit 1
}

SUDO=
if [[ $(id -u) -ne 0 ]]; then
	command -v sudo >/dev/null || give_up "not root and no sudo"
	SUDO=sudo
	# under DEPS_TRY never stop to ask for a password
	[[ ${DEPS_TRY:-0} == 1 ]] && SUDO="sudo -n"
fi
echo "installing: ${missing[*]}"
# sudo drops the environment: pass the frontend on its command line
$SUDO env DEBIAN_FRONTEND=noninteractive apt-get update -qq || true
$SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
	"${missing[@]}" || give_up "apt-get failed"
