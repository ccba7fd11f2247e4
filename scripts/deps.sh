#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Install the Debian 12 packages gstore needs, only those missing.
set -euo pipefail
pkgs=(build-essential pkg-config liburing-dev libfuse3-dev fuse3 libcmocka-dev libnvme-dev
      fio stress-ng python3 python3-numpy libhdf5-dev hdf5-tools clang
      qemu-system-x86 linux-image-amd64 linux-headers-amd64 busybox-static kmod cpio)
missing=()
for p in "${pkgs[@]}"; do
	dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' ||
		missing+=("$p")
done
[[ ${#missing[@]} -eq 0 ]] && exit 0
echo "installing: ${missing[*]}"
SUDO=
[[ $(id -u) -ne 0 ]] && SUDO=sudo
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq || true
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
