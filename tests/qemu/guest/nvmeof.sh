# SPDX-License-Identifier: MIT
# NVMe over Fabrics with the kernel's own target and host, for gstore pools
# whose members live on other machines (or, in tests, in the same guest over
# loopback).  POSIX sh (busybox); needs configfs mounted on /sys/kernel/config,
# modules nvmet + nvmet-tcp on the target, nvme-fabrics + nvme-tcp on the host.
#
#   target:  nvmet_export BACKING NQN PORT_ID ADDR SVCID
#            BACKING: a block device or a file (files are served buffered)
#   host:    nvme_tcp_connect NQN ADDR SVCID   -> prints /dev/nvmeXnY
#   then:    gstore mkfs --layout stripe+mirror DEV1 DEV2 ...; gstorefs DEV1 MNT
#   (nvme-cli does the host side as: nvme connect -t tcp -a ADDR -s SVCID -n NQN)
# shellcheck shell=sh

NVMET=/sys/kernel/config/nvmet

# load /mod/nvmeof.order, mount configfs, bring lo up
nvmeof_init() {
	for m in $(cat /mod/nvmeof.order); do
		insmod /mod/$m || { echo "FAIL: insmod $m"; return 1; }
	done
	mkdir -p /sys/kernel/config
	mount -t configfs none /sys/kernel/config || return 1
	ip link set lo up || ifconfig lo 127.0.0.1 up
}

# the tests' target: subsystem gs$i with a file-backed namespace of SIZE
# (default 160M), port $i+1 on ADDR:4420+i, for i in 0 1 2
nvmeof_export3() {	# ADDR [SIZE]
	for i in 0 1 2; do
		truncate -s "${2:-160M}" /tmp/t$i || return 1
		nvmet_export /tmp/t$i gs$i $((i + 1)) "$1" $((4420 + i)) || return 1
	done
}

nvmet_export() {
	s=$NVMET/subsystems/$2
	p=$NVMET/ports/$3
	mkdir -p "$s" || return 1
	echo 1 >"$s/attr_allow_any_host"
	mkdir -p "$s/namespaces/1"
	echo -n "$1" >"$s/namespaces/1/device_path"
	[ -f "$1" ] && echo 1 >"$s/namespaces/1/buffered_io"
	echo 1 >"$s/namespaces/1/enable" || return 1
	mkdir -p "$p"
	echo tcp >"$p/addr_trtype"
	echo ipv4 >"$p/addr_adrfam"
	echo "$4" >"$p/addr_traddr"
	echo "$5" >"$p/addr_trsvcid"
	ln -s "$s" "$p/subsystems/$2"
}

# take a port down / up again (what a failed link or target looks like)
nvmet_port_down() { rm "$NVMET/ports/$2/subsystems/$1"; }
nvmet_port_up() { ln -s "$NVMET/subsystems/$1" "$NVMET/ports/$2/subsystems/$1"; }

# Connect; fail I/O at once when the path is gone (fast_io_fail_tmo=0) and
# give up the controller after 3 s, so the pool sees the error and degrades
# instead of the I/O hanging in the multipath queue.
nvme_tcp_connect() {
	before=$(ls /sys/block | grep -E '^nvme[0-9]+n[0-9]+$')
	echo "transport=tcp,traddr=$2,trsvcid=$3,nqn=$1,ctrl_loss_tmo=3,reconnect_delay=1,fast_io_fail_tmo=0" \
		>/dev/nvme-fabrics || return 1
	n=0
	while :; do
		for b in $(ls /sys/block | grep -E '^nvme[0-9]+n[0-9]+$'); do
			echo "$before" | grep -qx "$b" && continue
			[ -e "/dev/$b" ] && { echo "/dev/$b"; return 0; }
		done
		n=$((n + 1))
		[ $n -gt 300 ] && return 1
		usleep 100000
	done
}
