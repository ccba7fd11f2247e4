# SPDX-License-Identifier: MIT
# shellcheck shell=bash
# Shared by tests/qemu/*.sh (sourced; not a test: the runner runs *.sh only).
#
# qemu_setup         find qemu, the Debian kernel + headers, busybox; build
#                    gstore_nvme.ko and the static guest programs in $W
# qemu_add_mod ORDER PATH   a module and what it needs, in load order
# qemu_boot NAME SCRIPT [qemu args...]
#                    initramfs whose /init loads the module, runs SCRIPT (a
#                    guest shell script, tests/qemu/guest/common.sh sourced
#                    first), checks dmesg, powers off; boots it under TCG
#                    with an emulated NVMe controller; output in $W/NAME.log
#                    (= qemu_initrd NAME SCRIPT, then qemu_run NAME [args]:
#                    several guests at once get their initramfs made first;
#                    GS_QEMU_DISK names a guest's disk image, default $W/disk.img)
#
# The machine is q35: on i440fx every PCI bind/unbind spends seconds in ACPI
# interrupt-link methods under TCG.  Guest kernel command line: panic_on_warn=1 oops=panic slub_debug=FZPU, so a
# WARN or BUG ends the boot without the "GS-EXIT 0" line.
qemu_skip() {
	echo "skip: $*"
	exit 77
}

qemu_setup() {
	ROOT=${GS_ROOT:-$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)}
	command -v qemu-system-x86_64 >/dev/null || qemu_skip "qemu-system-x86_64 not installed"
	command -v cpio >/dev/null || qemu_skip "cpio not installed"
	BUSYBOX=$(command -v busybox || true)
	[[ -n $BUSYBOX ]] || qemu_skip "busybox (busybox-static) not installed"
	[[ $(LC_ALL=C ldd "$BUSYBOX" 2>&1 || true) == *"not a dynamic"* ]] ||
		qemu_skip "busybox is not static (install busybox-static)"
	KVER=
	local v
	for v in $(ls -1 /lib/modules 2>/dev/null | sort -V); do
		[[ -e /lib/modules/$v/build/Makefile && -r /boot/vmlinuz-$v ]] && KVER=$v
	done
	[[ -n $KVER ]] || qemu_skip "no kernel image + headers pair (linux-image-amd64, linux-headers-amd64)"
	KERNEL=/boot/vmlinuz-$KVER
	[[ -e /usr/lib/x86_64-linux-gnu/liburing.a ]] || qemu_skip "liburing.a missing (liburing-dev)"

	W=$(mktemp -d "${TMPDIR:-/tmp}/gs-qemu.XXXXXX")
	[[ ${GS_KEEP:-0} == 1 ]] || trap 'rm -rf "$W"' EXIT
	mkdir -p "$W/kmod" "$W/root/bin" "$W/root/mod"

	# the module, built out of tree in $W (the source tree stays clean)
	cp "$ROOT"/kmod/*.c "$ROOT"/kmod/*.h "$ROOT"/kmod/Kbuild "$ROOT"/kmod/Makefile "$W/kmod/"
	sed -i 's|\$(src)/../uapi|'"$ROOT"'/uapi|' "$W/kmod/Kbuild"
	if ! make -s -C "$W/kmod" KVER="$KVER" >"$W/kmod.log" 2>&1; then
		cat "$W/kmod.log"
		echo "FAIL: gstore_nvme.ko does not build"
		exit 1
	fi
	cp "$W/kmod/gstore_nvme.ko" "$W/root/mod/"

	# the kernel's own nvme driver and what it needs, in load order (the crc
	# algorithms its integrity code asks for by name first)
	local m
	: >"$W/root/mod/nvme.order"
	for m in kernel/crypto/crct10dif_generic.ko kernel/crypto/crc64_rocksoft_generic.ko \
		 kernel/drivers/nvme/host/nvme.ko; do
		[[ -e /lib/modules/$KVER/$m ]] && qemu_add_mod nvme.order "$m"
	done

	# static guest programs
	local cflags=(-static -O2 -g -std=gnu11 -Wall -Wextra -Werror -Wno-unused-parameter
		      -D_GNU_SOURCE -I"$ROOT/include" -I"$ROOT/uapi" -I"$ROOT/lib" -I"$ROOT" -pthread)
	# with a built libgstore.a, gsnvme also drives the I/O core (gs_q_*, pollers)
	local lib=${GS_BUILD:-$ROOT/build}/libgstore.a
	local own=("$ROOT/tests/qemu/guest/gsnvme.c" "$ROOT/gpuq/nvme.c" "$ROOT/gpuq/passthru.c"
		   "$ROOT/lib/log.c" -luring)
	if [[ -e $lib ]] && ! gcc "${cflags[@]}" -DGS_WITH_GSQ -o "$W/root/bin/gsnvme" \
		"$ROOT/tests/qemu/guest/gsnvme.c" "$lib" -luring -lfuse3 -lm >"$W/gcc.log" 2>&1; then
		echo "note: gsnvme without the I/O core (static link with $lib failed):"
		tail -5 "$W/gcc.log"
		rm -f "$W/root/bin/gsnvme"
	fi
	if [[ ! -e $W/root/bin/gsnvme ]] &&
		! gcc "${cflags[@]}" -o "$W/root/bin/gsnvme" "${own[@]}" >"$W/gcc.log" 2>&1; then
		cat "$W/gcc.log"
		echo "FAIL: guest programs do not build"
		exit 1
	fi
	if [[ -e $ROOT/tests/qemu/guest/gsbench.c ]]; then
		if ! gcc "${cflags[@]}" -o "$W/root/bin/gsbench" "$ROOT/tests/qemu/guest/gsbench.c" \
			"$ROOT/gpuq/nvme.c" "$ROOT/gpuq/passthru.c" "$ROOT/lib/log.c" -luring \
			>"$W/gcc.log" 2>&1; then
			cat "$W/gcc.log"
			echo "FAIL: gsbench does not build"
			exit 1
		fi
	fi
	cp "$BUSYBOX" "$W/root/bin/busybox"
	cp "$ROOT/tests/qemu/guest/common.sh" "$W/root/common.sh"
}

# qemu_add_mod ORDER PATH: copy the module PATH (below /lib/modules/KVER) into
# the guest's /mod after the modules it needs (modules.dep), each once,
# appending their names to /mod/ORDER: the order to insmod them in
qemu_add_mod() {
	local order=$W/root/mod/$1 k=/lib/modules/$KVER b d
	b=$(basename "$2")
	grep -qsx "$b" "$order" && return 0
	for d in $(grep "^$2:" "$k/modules.dep" | cut -d: -f2 | tr ' ' '\n' | tac); do
		qemu_add_mod "$1" "$d"
	done
	cp "$k/$2" "$W/root/mod/" && echo "$b" >>"$order"
}

# qemu_add_dyn PROGRAM...: copy dynamically linked programs into the guest,
# with every shared library they load (same paths as here)
qemu_add_dyn() {
	local p l
	for p in "$@"; do
		mkdir -p "$W/root$(dirname "$p")"
		cp -L "$p" "$W/root$p"
		for l in $(ldd "$p" | grep -o '/[^ ]*'); do
			[[ -e $W/root$l ]] && continue
			mkdir -p "$W/root$(dirname "$l")"
			cp -L "$l" "$W/root$l"
		done
	done
	return 0
}

# seconds a guest may run: GS_QEMU_TIMEOUT, else 30 s under the test's own
# "# timeout:" (tests/run.sh kills the script there, and a guest killed by the
# runner takes its console with it), else 600
qemu_deadline() {
	local t
	[[ -n ${GS_QEMU_TIMEOUT:-} ]] && { echo "$GS_QEMU_TIMEOUT"; return; }
	t=$(sed -n 's/^# timeout: *\([0-9]\+\).*/\1/p' "$0" 2>/dev/null | head -1)
	echo "$(( ${t:-630} - 30 ))"
}

# qemu_boot NAME SCRIPT [extra qemu args]
qemu_boot() {
	qemu_initrd "$1" "$2" && qemu_run "$1" "${@:3}"
}

# qemu_initrd NAME SCRIPT: $W/NAME.initrd.gz
qemu_initrd() {
	local name=$1 script=$2
	local r=$W/root

	cat >"$r/init" <<'EOF'
#!/bin/busybox sh
echo	# the console's escape sequences end the previous line
/bin/busybox mkdir -p /proc /sys /dev /tmp
/bin/busybox --install -s /bin
mount -t proc proc /proc
mount -t sysfs sys /sys
mount -t devtmpfs dev /dev
# programs copied in under their host paths may live below /tmp (a checkout
# in /tmp): keep the initramfs's /tmp then, it is writable memory already
[ -n "$(ls -A /tmp)" ] || mount -t tmpfs tmp /tmp
export PATH=/bin:/usr/bin:/sbin
. /common.sh
# a guest that hangs says where before qemu is killed: the blocked tasks
# (sysrq w) and the processes, on the console the host prints
wd=$(sed -n 's/.*gs_wd=\([0-9]*\).*/\1/p' /proc/cmdline)
if [ -n "$wd" ]; then
	( sleep "$wd"; echo "GS-WATCHDOG still running after ${wd}s"; ps
	  echo w >/proc/sysrq-trigger; dmesg | tail -120 ) &
fi
insmod /mod/gstore_nvme.ko || echo "FAIL: insmod gstore_nvme"
sh -c '. /common.sh; . /test.sh'
rc=$?
[ $rc = 0 ] || dmesg | tail -30
if dmesg | grep -E 'WARNING:|BUG:|Oops|general protection|UBSAN|KASAN|kmemleak' ; then
	echo "GS-DMESG-BAD"
fi
echo "GS-EXIT $rc"
poweroff -f
EOF
	chmod +x "$r/init"
	cp "$script" "$r/test.sh"
	(cd "$r" && find . | cpio -o -H newc --quiet | gzip -1 >"$W/$name.initrd.gz")
}

# qemu_run NAME [extra qemu args]: boot $W/NAME.initrd.gz, check its output
qemu_run() {
	local name=$1 disk=${GS_QEMU_DISK:-$W/disk.img}
	shift
	[[ -e $disk ]] || truncate -s 256M "$disk"

	# no_timer_check: under a loaded TCG host the IO-APIC timer check can time out
	local append="console=ttyS0 panic=-1 panic_on_warn=1 oops=panic slub_debug=FZPU no_timer_check"
	local dl
	dl=$(qemu_deadline)
	append+=" gs_wd=$((dl > 90 ? dl - 45 : dl * 3 / 4))"
	append+=" loglevel=4 rdinit=/init ${GS_QEMU_APPEND:-}"
	timeout -k 5 "$dl" qemu-system-x86_64 -accel tcg -machine q35 -m 1G -smp 2 \
		-nographic -no-reboot -monitor none -serial stdio -nic none \
		-kernel "$KERNEL" -initrd "$W/$name.initrd.gz" -append "$append" \
		-drive "file=$disk,if=none,id=nv0,format=raw" \
		-device "nvme,serial=gs0,drive=nv0,max_ioqpairs=16" \
		"$@" </dev/null >"$W/$name.log" 2>&1
	local rc=$?
	tr -d '\r' <"$W/$name.log" >"$W/$name.clean"
	grep -E '^(ok|FAIL|skip|info|bench|GS-|hold|cycle)' "$W/$name.clean"
	if ! grep -q '^GS-EXIT 0$' "$W/$name.clean" || grep -q 'GS-DMESG-BAD' "$W/$name.clean"; then
		local n=60
		grep -q '^GS-WATCHDOG' "$W/$name.clean" && n=250
		echo "---- guest console (last $n lines), qemu rc $rc ----"
		tail -$n "$W/$name.clean"
		return 1
	fi
	return 0
}
