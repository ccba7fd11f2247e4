#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# timeout: 900
# A gstore pool whose members are on another machine: two QEMU guests joined
# by a socket network (-netdev socket, virtio-net NICs, 10.0.9.0/24).  The
# target guest exports three 64 MiB file-backed namespaces with the kernel's nvmet over TCP
# and takes orders on a control port (busybox nc: take a port down, bring it
# back, stop); the host guest connects with nvme-tcp and runs the same steps
# as nvmeof_pool.sh (guest/nvmeof_host.sh): a 3-member stripe+mirror pool,
# fio write + verify, a target port removed mid-write (degraded, nothing
# acknowledged lost), the port back, `gstore pool replace`, fsck, verify.
# Two TCG guests want two CPUs of their own: on 2 shared vCPUs (load 20) it
# took 13 minutes, so with fewer than 4 CPUs it skips unless GS_QEMU_2GUEST=1.
set -u
. "$(dirname "$0")/lib.bash"
[[ ${GS_QEMU_2GUEST:-} == 1 || $(nproc) -ge 4 ]] ||
	qemu_skip "two TCG guests need 4 CPUs ($(nproc) here; GS_QEMU_2GUEST=1 runs it anyway)"
. "$(dirname "$0")/nvmeof.bash"
# virtio-net NICs (paravirtual: fewer emulated register accesses than e1000 under TCG)
NIC=(kernel/drivers/virtio/virtio_pci.ko kernel/drivers/net/virtio_net.ko)
nvmeof_setup "${NIC[@]}"
for m in "${NIC[@]}"; do
	[[ -e $K/$m ]] || grep -q "/$(basename "$m")\$" "$K/modules.builtin" ||
		qemu_skip "no $(basename "$m") in this kernel ($KVER)"
done
command -v ss >/dev/null || qemu_skip "no ss (iproute2) to find a free port"
# a free port on this machine for the guests' wire
for ((i = 0; i < 50; i++)); do
	port=$((20000 + RANDOM % 40000))
	ss -Hltn "sport = :$port" | grep -q . || break
done

# the target's control: one command per connection, answered with a line
cat >"$W/root/ctl.sh" <<'CTL'
#!/bin/sh
. /nvmeof.sh
read -r cmd arg
case $cmd in
ping) echo pong ;;
down) nvmet_port_down gs$arg $((arg + 1)) && echo done ;;
up) nvmet_port_up gs$arg $((arg + 1)) && echo done ;;
stop) touch /tmp/stop && echo done ;;
esac
CTL
chmod +x "$W/root/ctl.sh"
cat >"$W/target.sh" <<'GUEST'
. /nvmeof.sh
nvmeof_init || fail "modules, configfs, lo"
ip addr add 10.0.9.1/24 dev eth0 && ip link set eth0 up || fail "eth0"
nvmeof_export3 10.0.9.1 64M || fail "nvmet export"
echo "ok target: gs0..gs2 on 10.0.9.1:4420-4422"
nc -ll -p 5000 -e /ctl.sh &
while [ ! -e /tmp/stop ]; do sleep 1; done
echo "ok target: stopped by the host"
GUEST
{
	echo "G=$G"
	cat <<'GUEST'
. /nvmeof.sh
nvmeof_init || fail "modules, configfs, lo"
ip addr add 10.0.9.2/24 dev eth0 && ip link set eth0 up || fail "eth0"
ctl() { echo "$*" | nc 10.0.9.1 5000; }
n=0
until ctl ping | grep -q pong; do
	n=$((n + 1)); [ $n -gt 300 ] && fail "the target does not answer"; sleep 1
done
echo "ok host: the target answers over the wire"
connect() { nvme_tcp_connect gs$1 10.0.9.1 $((4420 + $1)); }
port_down() { ctl down $1 | grep -q done; }
port_up() { ctl up $1 | grep -q done; }
. /nvmeof_host.sh
ctl stop >/dev/null
GUEST
} >"$W/host.sh"
qemu_initrd target "$W/target.sh"
qemu_initrd host "$W/host.sh"
GS_QEMU_DISK=$W/target.img GS_QEMU_TIMEOUT=840 qemu_run target -m 1536M \
	-netdev "socket,id=n0,listen=127.0.0.1:$port" \
	-device virtio-net-pci,netdev=n0,mac=52:54:00:12:09:01 >"$W/target.out" 2>&1 &
tpid=$!
for ((i = 0; i < 300; i++)); do
	ss -Hltn "sport = :$port" | grep -q . && break
	kill -0 $tpid 2>/dev/null || break
	sleep 0.1
done
GS_QEMU_TIMEOUT=780 qemu_run host -m 1G \
	-netdev "socket,id=n0,connect=127.0.0.1:$port" \
	-device virtio-net-pci,netdev=n0,mac=52:54:00:12:09:02
hrc=$?
for ((i = 0; i < 600 && hrc == 0; i++)); do
	kill -0 $tpid 2>/dev/null || break
	sleep 0.1
done
kill $tpid 2>/dev/null
wait $tpid
trc=$?
cat "$W/target.out"
[[ $hrc == 0 ]] || { echo "FAIL: the host guest"; exit 1; }
[[ $trc == 0 ]] || { echo "FAIL: the target guest (rc $trc)"; exit 1; }
echo "pass"
