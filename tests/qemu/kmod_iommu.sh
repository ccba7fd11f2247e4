#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# timeout: 420
# gstore_nvme.ko with DMA remapping on: q35 + intel-iommu in the guest
# (intel_iommu=on, strict invalidation), so any DMA to memory the module did
# not map faults (interrupt remapping off: only DMA remapping is under test).
# Queues, threads, the backend, kill mid-I/O, then the
# kernel driver reads the data back.
set -u
. "$(dirname "$0")/lib.bash"
qemu_setup
cat >"$W/guest.sh" <<'GUEST'
B=$(nvme_bdf) || fail "no NVMe controller"
gs_bind "$B" || fail "bind $B"
gsnvme info | tee /tmp/info
grep -q 'flags 0x2' /tmp/info || fail "INFO does not report IOMMU translation"
gsnvme basic || exit 1
gsnvme shared /dev/gstore-nvme0 4 2 60 || exit 1
gsnvme backend /dev/gstore-nvme0 4 60 || exit 1
gsnvme stress /dev/gstore-nvme0 4 3 || exit 1
for i in 1 2 3 4 5; do
	gsnvme hold /dev/gstore-nvme0 >/tmp/hold.log 2>&1 &
	p=$!
	wait_for running /tmp/hold.log
	usleep 50000
	kill -9 $p
	wait $p 2>/dev/null
done
echo "ok kill under iommu"
gsnvme pwrite /dev/gstore-nvme0 4096 91 || exit 1
gs_unbind "$B" || fail "unbind"
load_nvme
n=0
while [ ! -b /dev/nvme0n1 ]; do
	n=$((n + 1))
	[ $n -gt 200 ] && fail "kernel nvme driver did not take the controller"
	usleep 50000
done
gsnvme pcheck /dev/nvme0n1 4096 91 || exit 1
dmesg | grep -i 'DMAR.*fault\|DMAR:.*\[DMA' && fail "DMA remapping faults"
echo "ok iommu"
GUEST
GS_QEMU_APPEND="intel_iommu=on iommu.strict=1 intremap=off" \
	qemu_boot iommu "$W/guest.sh" -device intel-iommu,intremap=off || exit 1
echo "pass"
