#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# NVMe backends inside a QEMU guest (TCG, emulated NVMe controller), same
# boot, same data, same queue depth, one submitting thread each:
#
#   nvme            "nvme" backend: gstore_nvme.ko queue pair, doorbells
#                   mapped, completions polled (no system call per I/O)
#   uring           io_uring O_DIRECT reads on /dev/nvme0n1 (kernel driver)
#   passthru        "uring-passthru" backend: IORING_OP_URING_CMD on /dev/ng0n1
#
# 4 KiB random reads over the first 64 MiB; each measurement runs RUNTIME s
# after a 0.5 s warm-up, RUNS times, median reported (IOPS and CPU time of
# the process per I/O, user + system, getrusage).  Prints the results and
# the ratios nvme/uring and passthru/uring; also written to
# bench/out/qemu-nvme.txt.  The emulator dominates the absolute numbers
# (every doorbell write is an MMIO exit into QEMU): track the ratios.
#
#   bench/qemu-nvme.sh          Env: QDS ("1 32"), RUNTIME (3), RUNS (3)
set -euo pipefail
cd "$(dirname "$0")/.."
QDS=${QDS:-1 32}
RUNTIME=${RUNTIME:-3}
RUNS=${RUNS:-3}
. tests/qemu/lib.bash
qemu_setup
{
	echo 'B=$(nvme_bdf) || fail "no NVMe controller"'
	echo 'gs_bind "$B" || fail bind'
	for qd in $QDS; do
		echo "gsbench nvme /dev/gstore-nvme0 $qd $RUNTIME $RUNS"
	done
	echo 'gs_unbind "$B" || fail unbind'
	echo 'load_nvme'
	echo 'n=0; while [ ! -b /dev/nvme0n1 ]; do n=$((n+1)); [ $n -gt 200 ] && fail nvme; usleep 50000; done'
	for qd in $QDS; do
		echo "gsbench uring /dev/nvme0n1 $qd $RUNTIME $RUNS"
		echo "gsbench passthru /dev/ng0n1 $qd $RUNTIME $RUNS"
	done
} >"$W/guest.sh"
GS_QEMU_TIMEOUT=900 qemu_boot bench "$W/guest.sh" >"$W/out.txt" || { cat "$W/out.txt"; exit 1; }
mkdir -p bench/out
{
	echo "# bench/qemu-nvme.sh $(date -u +%F) kernel $KVER, qemu $(qemu-system-x86_64 --version | head -1)"
	echo "# RUNTIME=$RUNTIME RUNS=$RUNS, guest: -accel tcg -machine q35 -m 1G -smp 2, -device nvme"
	grep '^bench ' "$W/out.txt"
	for qd in $QDS; do
		awk -v qd="qd=$qd" '
			$1 == "bench" && $3 == qd {
				split($4, a, "="); split($5, c, "="); iops[$2] = a[2]; cpu[$2] = c[2]
			}
			END {
				if (iops["uring"] > 0)
					printf "ratio %s iops nvme/uring=%.2f passthru/uring=%.2f " \
					       "cpu_per_io nvme/uring=%.2f passthru/uring=%.2f\n", qd,
					       iops["nvme"] / iops["uring"], iops["passthru"] / iops["uring"],
					       cpu["nvme"] / cpu["uring"], cpu["passthru"] / cpu["uring"]
			}' "$W/out.txt"
	done
} | tee bench/out/qemu-nvme.txt
