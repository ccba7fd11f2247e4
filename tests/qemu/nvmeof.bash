# SPDX-License-Identifier: MIT
# shellcheck shell=bash
# Shared by tests/qemu/nvmeof*.sh (sourced after lib.bash; not a test).
#
# nvmeof_setup [MODULE.ko path below /lib/modules/KVER...]
#     skip without fio, gstore, nvmet-tcp or nvme-tcp; qemu_setup; copy
#     gstorefs, gstore and fio, the fabric modules (and the extra ones) in
#     load order (/mod/nvmeof.order), nvmeof.sh and nvmeof_host.sh into the
#     guest root; sets G (gstore's bin dir, the same path in the guest)
nvmeof_setup() {
	local bin=${GS_BUILD:-build}/bin m
	[[ -x $bin/gstorefs && -x $bin/gstore ]] || qemu_skip "gstorefs/gstore not built"
	command -v fio >/dev/null || qemu_skip "fio not installed"
	qemu_setup
	K=/lib/modules/$KVER
	for m in nvmet-tcp nvme-tcp; do
		grep -q "/$m.ko:" "$K/modules.dep" || qemu_skip "$m.ko not in this kernel ($KVER)"
	done
	G=$(cd "$bin" && pwd)
	qemu_add_dyn "$G/gstorefs" "$G/gstore" "$(command -v fio)"
	: >"$W/root/mod/nvmeof.order"
	for m in kernel/crypto/crct10dif_generic.ko kernel/crypto/crc64_rocksoft_generic.ko \
		 kernel/fs/fuse/fuse.ko kernel/drivers/nvme/target/nvmet-tcp.ko \
		 kernel/drivers/nvme/host/nvme-tcp.ko "$@"; do
		[[ -e $K/$m ]] && qemu_add_mod nvmeof.order "$m"
	done
	cp "$ROOT/tests/qemu/guest/nvmeof.sh" "$ROOT/tests/qemu/guest/nvmeof_host.sh" "$W/root/"
}
