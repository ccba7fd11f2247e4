#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# nosuid,nodev by default, dev and suid on request (root: -o allow_dev,
# allow_suid; xfstests generic/184, 306, 434, 633 need them): a device node
# opens its device and a setuid program runs as its owner only then.  The
# words dev,suid that mount.fuse3 adds to every root mount change nothing;
# nosuid,nodev asked for win; a remount keeps what the mount has unless it
# asks for nosuid,nodev.
# timeout: 120
. "$(dirname "$0")/../helpers/gsmount.sh"
gs_need_root "dev and suid mounts"
gs_init 256M
A=$MNT/arrays
id nobody >/dev/null 2>&1 || skip "no user nobody"
NOBODY=$(id -u nobody)

# a program that prints its effective uid, setuid to root below
cat >"$T/euid.c" <<'EOF'
#include <stdio.h>
#include <unistd.h>
int main(void) { printf("%u\n", (unsigned)geteuid()); return 0; }
EOF
cc -o "$T/euid" "$T/euid.c" || skip "no C compiler"

check() {	# check dev|nodev suid|nosuid: what the mount does
	local o
	o=$(findmnt -n -o OPTIONS "$MNT")
	rm -f "$A/null" "$A/euid"
	mknod "$A/null" c 1 3 && chmod 666 "$A/null" || fail "mknod"
	cp "$T/euid" "$A/euid" && chmod 4755 "$A/euid" || fail "setuid copy"
	chmod 755 "$MNT/arrays"
	if [[ $1 == dev ]]; then
		[[ $o != *nodev* ]] || fail "nodev in $o"
		echo x >"$A/null" || fail "the device node does not open with allow_dev"
	else
		[[ $o == *nodev* ]] || fail "no nodev in $o"
		echo x 2>/dev/null >"$A/null" && fail "a device node opened on a nodev mount"
	fi
	local eu
	eu=$(setpriv --reuid="$NOBODY" --regid="$NOBODY" --clear-groups "$A/euid") ||
		fail "run the setuid program"
	if [[ $2 == suid ]]; then
		[[ $o != *nosuid* ]] || fail "nosuid in $o"
		[[ $eu == 0 ]] || fail "setuid ignored with allow_suid (euid $eu)"
	else
		[[ $o == *nosuid* ]] || fail "no nosuid in $o"
		[[ $eu == "$NOBODY" ]] || fail "setuid took effect on a nosuid mount (euid $eu)"
	fi
}

# the default, also through mount.fuse3 (which adds dev,suid)
mount -t fuse -o "cache=32M${GS_MNT_OPTS:+,$GS_MNT_OPTS}" "$GSTOREFS#$IMG" "$MNT" || fail "mount"
GS_MOUNTED=1
check nodev nosuid
umount "$MNT" && GS_MOUNTED=0
gs_wait_exit
ok "default: nosuid,nodev"

mount -t fuse -o "allow_dev,allow_suid${GS_MNT_OPTS:+,$GS_MNT_OPTS}" "$GSTOREFS#$IMG" "$MNT" ||
	fail "mount -o allow_dev,allow_suid"
GS_MOUNTED=1
check dev suid
# a remount keeps them
mount -t fuse -o remount,ro "$GSTOREFS#$IMG" "$MNT" || fail "remount,ro"
o=$(findmnt -n -o OPTIONS "$MNT")
[[ $o == ro,* && $o != *nodev* && $o != *nosuid* ]] || fail "after remount,ro: $o"
mount -t fuse -o remount,rw "$GSTOREFS#$IMG" "$MNT" || fail "remount,rw"
check dev suid
# nosuid, nodev asked for on a remount take effect (dev, suid do not: mount.fuse3's)
mount -t fuse -o remount,nosuid,nodev "$GSTOREFS#$IMG" "$MNT" || fail "remount,nosuid,nodev"
check nodev nosuid
umount "$MNT" && GS_MOUNTED=0
gs_wait_exit
ok "allow_dev,allow_suid: devices open, setuid takes effect, kept over remounts"

# nosuid / nodev asked for win over allow_suid / allow_dev, wherever they are
# (xfstests generic/128: its mount options, then -o nosuid)
mount -t fuse -o "allow_dev,allow_suid,nosuid,nodev${GS_MNT_OPTS:+,$GS_MNT_OPTS}" \
	"$GSTOREFS#$IMG" "$MNT" || fail "mount -o allow_dev,allow_suid,nosuid,nodev"
GS_MOUNTED=1
check nodev nosuid
umount "$MNT" && GS_MOUNTED=0
gs_wait_exit
ok "nosuid,nodev win over allow_suid,allow_dev"
