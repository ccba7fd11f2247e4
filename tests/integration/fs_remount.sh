#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# `mount -o remount,ro|rw` of a gstorefs mount (xfstests generic/294, 306,
# 452): mount(8) runs the helper again (mount.fuse3: `gstorefs IMAGE DIR -o
# remount,...`), which must remount, not start a second daemon.  The daemon
# follows: read-only, it has written everything back (a copy of the image
# taken then mounts read-only, which needs no journal replay) and refuses
# writes that do not pass through the kernel (an attach client); read-write
# again, writes work.  A mount made read-only cannot be remounted read-write.
# timeout: 120
. "$(dirname "$0")/../helpers/gsmount.sh"
gs_need_root "remount is mount(2) MS_REMOUNT"
ATT=$GS_BUILD/tests/helpers/attach_client
[[ -x $ATT ]] || skip "build first (no $ATT)"
gs_init 256M
cp "$ATT" "$T/bin/" && ATT=$T/bin/attach_client
A=$MNT/arrays
opts=${GS_MNT_OPTS:+$GS_MNT_OPTS,}

daemons() { pgrep -f -- "gstorefs.* $IMG( |$)" | wc -l; }
info() { sed -n "s/^$1: //p" "$MNT/.gstore/info"; }

gs_mount
head -c 300000 /dev/urandom >"$T/src"
cp "$T/src" "$A/a" || fail "write a"
echo before >"$A/b" || fail "write b"

# as mount -t fuse -o remount,ro PROG#IMAGE DIR runs it (through mount.fuse3)
mount -t fuse -o remount,ro "$GSTOREFS#$IMG" "$MNT" || fail "mount -o remount,ro"
[[ $(daemons) == 1 ]] || fail "$(daemons) gstorefs processes for $IMG after the remount"
gs_alive || fail "the daemon is gone after the remount"
[[ $(findmnt -n -o OPTIONS "$MNT") == ro,* ]] || fail "not ro: $(findmnt -n -o OPTIONS "$MNT")"
[[ $(findmnt -n -o OPTIONS "$MNT") == *nosuid*nodev* ]] || fail "nosuid,nodev lost"
[[ $(info read_only) == 1 ]] || fail "the daemon did not follow: read_only $(info read_only)"
err=$(touch "$A/c" 2>&1) && fail "created a file on the ro mount"
[[ $err == *"Read-only file system"* ]] || fail "touch: $err"
cmp "$T/src" "$A/a" || fail "a differs on the ro mount"
# the daemon itself refuses writes: a ring client opening for write
"$ATT" open "$A/a" w >"$T/att.log" 2>&1 && fail "attach client opened a for write"
grep -q "Read-only file system" "$T/att.log" || fail "attach open w: $(cat "$T/att.log")"
"$ATT" open "$A/a" r >/dev/null || fail "attach client open for read"
ok "remount,ro: one daemon, EROFS from the kernel and from the daemon"

# written back and clean: a copy of the image mounts read-only (a journal
# left to replay would refuse that) and has the data
cp --sparse=always "$IMG" "$T/copy"
mkdir "$T/mnt2"
"$GSTOREFS" -f "$T/copy" "$T/mnt2" -o "${opts}ro" 2>"$T/copy.log" &
cpid=$!
for ((i = 0; i < 200; i++)); do
	[[ -f $T/mnt2/.gstore/info ]] && break
	kill -0 $cpid 2>/dev/null || break
	sleep 0.05
done
[[ -f $T/mnt2/.gstore/info ]] || { cat "$T/copy.log" >&2; fail "the copy does not mount ro"; }
cmp "$T/src" "$T/mnt2/arrays/a" || fail "a differs in the copy"
[[ $(cat "$T/mnt2/arrays/b") == before ]] || fail "b in the copy"
fusermount3 -u "$T/mnt2" || fail "unmount the copy"
wait $cpid || fail "the copy's daemon failed"
ok "remount,ro wrote everything back"

# as mount.fuse3 calls the helper for `mount -o remount,rw DIR` (mount(8)'s merged options)
"$GSTOREFS" "$IMG" "$MNT" -o \
	rw,nosuid,nodev,relatime,remount,user_id=0,group_id=0,default_permissions,allow_other ||
	fail "gstorefs IMAGE DIR -o remount,rw"
[[ $(daemons) == 1 ]] || fail "$(daemons) gstorefs processes after remount,rw"
[[ $(findmnt -n -o OPTIONS "$MNT") == rw,*nosuid*nodev* ]] ||
	fail "not rw: $(findmnt -n -o OPTIONS "$MNT")"
[[ $(info read_only) == 0 ]] || fail "the daemon stayed read-only"
echo after >"$A/b" || fail "write after remount,rw"
"$ATT" open "$A/a" w >/dev/null || fail "attach client open for write after remount,rw"
# and back and forth once more, with the atime and exec flags passed on
mount -t fuse -o remount,ro,noexec,noatime "$GSTOREFS#$IMG" "$MNT" || fail "remount,ro again"
o=$(findmnt -n -o OPTIONS "$MNT")
[[ $o == ro,* && $o == *noexec* && $o == *noatime* ]] || fail "flags: $o"
mount -t fuse -o remount,rw "$GSTOREFS#$IMG" "$MNT" || fail "remount,rw again"
echo again >>"$A/b" || fail "write after the second remount,rw"
gs_umount
"$GSTORE" fsck -n "$IMG" >"$T/fsck.log" 2>&1 || { cat "$T/fsck.log" >&2; fail "fsck"; }
gs_mount -o ro
[[ $(cat "$A/b") == $'after\nagain' ]] || fail "b after the remounts: $(cat "$A/b")"
ok "remount,rw: writes work and last"

# mounted -o ro: the daemon opened the image read-only; rw is refused, the
# mount stays as it was
err=$(mount -t fuse -o remount,rw "$GSTOREFS#$IMG" "$MNT" 2>&1) && fail "remount,rw of a -o ro mount"
[[ $err == *"mounted read-only"* ]] || fail "message: $err"
[[ $(findmnt -n -o OPTIONS "$MNT") == ro,* ]] || fail "the refused remount changed the mount"
gs_umount
ok "remount,rw of a -o ro mount refused"
