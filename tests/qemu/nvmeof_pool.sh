#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# timeout: 600
# A gstore pool on NVMe over Fabrics members, inside one QEMU guest: the
# kernel's target (nvmet) exports three file-backed namespaces over TCP on
# loopback, one subsystem and port each; the host (nvme-tcp) connects to them
# and gstore runs a 3-member stripe+mirror pool on the fabric-attached
# /dev/nvmeXnY.  Steps: mkfs, mount (gstorefs), fio write + verify; fio
# writing while one target port is removed (its configfs link unlinked):
# fio completes without errors, the pool is degraded, nothing acknowledged is
# lost (verify); the port comes back, the member is reconnected and rebuilt
# with `gstore pool replace`, fsck finds every copy equal, verify again.
set -u
. "$(dirname "$0")/lib.bash"
. "$(dirname "$0")/nvmeof.bash"
nvmeof_setup
{
	echo "G=$G"
	cat <<'GUEST'
. /nvmeof.sh
nvmeof_init || fail "modules, configfs, lo"
nvmeof_export3 127.0.0.1 || fail "nvmet export"
echo "ok nvmet: 3 subsystems on TCP ports 4420-4422"
connect() { nvme_tcp_connect gs$1 127.0.0.1 $((4420 + $1)); }
port_down() { nvmet_port_down gs$1 $(($1 + 1)); }
port_up() { nvmet_port_up gs$1 $(($1 + 1)); }
. /nvmeof_host.sh
GUEST
} >"$W/guest.sh"
GS_QEMU_TIMEOUT=540 qemu_boot nvmeof "$W/guest.sh" -m 2G || exit 1
echo "pass"
