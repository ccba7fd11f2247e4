#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# timeout: 540
# 100 cycles of bind -> I/O -> kill -9 of the client mid-I/O -> unbind ->
# rebind (every third cycle the controller is unbound while the client is
# still running: device removal with queues live), then data written through
# gstore_nvme is read back through the kernel's nvme driver, by io_uring on
# /dev/nvme0n1 and by the uring-passthru backend on /dev/ng0n1.  The guest runs
# with panic_on_warn=1 slub_debug=FZPU; dmesg must show no WARNING/BUG.
set -u
. "$(dirname "$0")/lib.bash"
qemu_setup
cat >"$W/guest.sh" <<'GUEST'
B=$(nvme_bdf) || fail "no NVMe controller"
echo 10 >/proc/sys/kernel/hung_task_timeout_secs
i=0
while [ $i -lt ${CYCLES:-100} ]; do
	gs_bind "$B" || fail "cycle $i: bind"
	if [ $((i % 4)) = 3 ]; then	# the backend: per-thread queues, bounce buffers, MAP_USER
		gsnvme backend /dev/gstore-nvme0 3 1000000 >/tmp/hold.log 2>&1 &
	else				# BaM mode: threads sharing queue pairs
		gsnvme hold /dev/gstore-nvme0 >/tmp/hold.log 2>&1 &
	fi
	p=$!
	wait_for running /tmp/hold.log
	echo "cycle $i: running $(cut -d" " -f1 /proc/uptime)"
	usleep $(( (i % 4) * 30000 ))
	if [ $((i % 3)) = 2 ]; then
		# removal under a live client: its mappings are zapped (SIGBUS)
		echo "$B" >/sys/bus/pci/drivers/gstore_nvme/unbind || fail "cycle $i: unbind live"
		kill -9 $p 2>/dev/null
		wait $p 2>/dev/null
	else
		kill -9 $p
		wait $p 2>/dev/null
		echo "cycle $i: killed $(cut -d" " -f1 /proc/uptime)"
		echo "$B" >/sys/bus/pci/drivers/gstore_nvme/unbind || fail "cycle $i: unbind"
	fi
	[ -e /dev/gstore-nvme0 ] && fail "cycle $i: device node left behind"
	echo "cycle $i ok $(cut -d" " -f1 /proc/uptime)"
	i=$((i + 1))
done
echo "ok cycles $i"
# device removal while 8 threads are inside ioctls, mmaps and munmaps
for r in 1 2 3 4 5; do
	gs_bind "$B" || fail "stress $r: bind"
	gsnvme stress /dev/gstore-nvme0 8 30 >/tmp/stress.log 2>&1 &
	p=$!
	wait_for running /tmp/stress.log
	usleep $((r * 150000))
	echo "$B" >/sys/bus/pci/drivers/gstore_nvme/unbind || fail "stress $r: unbind"
	kill -9 $p 2>/dev/null
	wait $p 2>/dev/null
done
echo "ok removal under ioctl stress"
gs_bind "$B" || fail "bind"
gsnvme info | grep -q 'qps 0/' || fail "queue pairs left behind"
gsnvme pwrite /dev/gstore-nvme0 8192 77 || exit 1
gs_unbind "$B" || fail "unbind"
load_nvme
n=0
while [ ! -b /dev/nvme0n1 ]; do
	n=$((n + 1))
	[ $n -gt 200 ] && fail "kernel nvme driver did not take the controller"
	usleep 50000
done
gsnvme pcheck /dev/nvme0n1 8192 77 || exit 1
echo "ok kernel driver reads the data"
gsnvme ptcheck /dev/ng0n1 8192 77 || exit 1
GUEST
qemu_boot cycles "$W/guest.sh" || exit 1
echo "pass"
