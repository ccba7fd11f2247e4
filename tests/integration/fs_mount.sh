#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Mounting the ways users do: gstorefs as a daemon (errors reach the exit
# status), `mount -t fuse.gstorefs` and an fstab line (mount.fuse3 runs
# `gstorefs IMAGE DIR -o OPTS`), -o ro, and the default options.
# timeout: 120
. "$(dirname "$0")/../helpers/gsmount.sh"
gs_init 256M
export PATH=$T/bin:$PATH

# daemon mode: a bad image or mount point is a non-zero exit, not a silent one
gstorefs "$T/nonexistent" "$MNT" 2>"$T/err" && fail "mounted a nonexistent image"
grep -q nonexistent "$T/err" || fail "no message for a bad image: $(cat "$T/err")"
gstorefs "$IMG" "$T/nodir" 2>/dev/null && fail "mounted on a nonexistent dir"
gstorefs "$IMG" 2>/dev/null && fail "ran without a mount point"

gstorefs "$IMG" "$MNT" -o cache=64M,pollers=1 || fail "daemon mode mount"
GS_MOUNTED=1
opts=$(findmnt -n -o OPTIONS "$MNT")
[[ $opts == *nosuid* && $opts == *nodev* ]] || fail "options: $opts"
[[ $(findmnt -n -o FSTYPE "$MNT") == fuse.gstorefs ]] || fail "type"
# root widens the kernel's read-ahead to the default 4 MiB (the bdi of the mount)
ra=/sys/class/bdi/$(mountpoint -d "$MNT")/read_ahead_kb
if [[ $(id -u) -eq 0 && -w $ra ]]; then
	[[ $(cat "$ra") == 4096 ]] || fail "read_ahead_kb $(cat "$ra"), expected 4096"
fi
echo daemon >"$MNT/arrays/d"
fusermount3 -u "$MNT" || fail "unmount"
GS_MOUNTED=0
gs_wait_exit
ok "daemon mode"

# mount.fuse3's convention, as mount -t fuse.gstorefs / fstab type fuse.gstorefs
# use it (they find gstorefs in the sanitized PATH once installed)
mount.fuse3 "$IMG" "$MNT" -t fuse.gstorefs -o rw,dev,suid,cache=32M,readahead=256 ||
	fail "mount.fuse3 IMAGE DIR -t fuse.gstorefs"
GS_MOUNTED=1
ra=/sys/class/bdi/$(mountpoint -d "$MNT")/read_ahead_kb
if [[ $(id -u) -eq 0 && -w $ra ]]; then
	[[ $(cat "$ra") == 256 ]] || fail "-o readahead=256: read_ahead_kb $(cat "$ra")"
fi
[[ $(cat "$MNT/arrays/d") == daemon ]] || fail "data through mount.fuse3"
opts=$(findmnt -n -o OPTIONS "$MNT")
[[ $opts == *nosuid* && $opts == *nodev* ]] || fail "suid/dev were not ignored: $opts"
fusermount3 -u "$MNT" || fail umount
GS_MOUNTED=0
gs_wait_exit
ok "mount.fuse3 -t fuse.gstorefs"

if [[ $(id -u) -ne 0 ]]; then
	skip "mount(8) and fstab need root (daemon mode and mount.fuse3 passed)"
fi
# mount(8) runs helpers with a fixed PATH: the build tree's gstorefs is named
# in the source ("PROGRAM#IMAGE", type fuse), as an fstab line may do too.
mount -t fuse -o cache=32M "$GSTOREFS#$IMG" "$MNT" || fail "mount -t fuse PROG#IMAGE"
GS_MOUNTED=1
[[ $(findmnt -n -o FSTYPE "$MNT") == fuse.gstorefs ]] || fail "type via mount(8)"
umount "$MNT" || fail umount
GS_MOUNTED=0
gs_wait_exit
if [[ $(command -v gstorefs) != "$GSTOREFS" ]] && PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin command -v gstorefs >/dev/null; then
	mount -t fuse.gstorefs -o cache=32M "$IMG" "$MNT" || fail "mount -t fuse.gstorefs (installed)"
	GS_MOUNTED=1
	umount "$MNT" || fail umount
	GS_MOUNTED=0
	gs_wait_exit
	ok "mount -t fuse.gstorefs with the installed gstorefs"
fi
ok "mount(8)"

echo "$GSTOREFS#$IMG $MNT fuse defaults,ro,cache=32M 0 0" >"$T/fstab"
mount -T "$T/fstab" "$MNT" || fail "mount from an fstab line"
GS_MOUNTED=1
[[ $(findmnt -n -o OPTIONS "$MNT") == ro,* ]] || fail "not read-only: $(findmnt -n -o OPTIONS "$MNT")"
[[ $(cat "$MNT/arrays/d") == daemon ]] || fail "data through fstab mount"
touch "$MNT/arrays/x" 2>/dev/null && fail "wrote on a ro mount"
umount "$MNT" || fail umount
GS_MOUNTED=0
gs_wait_exit
"$GSTORE" fsck -n "$IMG" >/dev/null || fail "fsck"
ok "fstab line, ro"
