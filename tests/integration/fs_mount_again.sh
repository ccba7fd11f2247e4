#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# A second mount of a mounted image (xfstests generic/732) is another view of
# the same filesystem, as a block device mounted twice is: a bind mount of
# the first, served by the same daemon, which stays until the last of them is
# unmounted.  Renames through one are seen through the other; a second mount
# -o ro is read-only alone.  gstorefs -f (run a daemon) still refuses.
# timeout: 120
. "$(dirname "$0")/../helpers/gsmount.sh"
gs_need_root "a second mount is a bind mount, mount(2)"
gs_init 256M
opts=${GS_MNT_OPTS:+,$GS_MNT_OPTS}
M2=$T/m2
M3=$T/m3
mkdir -p "$M2" "$M3" "$T/m4"
trap 'umount -l "$M2" 2>/dev/null; umount -l "$M3" 2>/dev/null; gs_cleanup' EXIT

daemons() { pgrep -f -- "gstorefs.* $IMG( |$)" | wc -l; }

mount -t fuse -o "cache=32M$opts" "$GSTOREFS#$IMG" "$MNT" || fail "first mount"
GS_MOUNTED=1
mount -t fuse -o "cache=32M$opts" "$GSTOREFS#$IMG" "$M2" || fail "second mount of the image"
[[ $(daemons) == 1 ]] || fail "$(daemons) daemons for two mounts"
[[ $(findmnt -n -o FSTYPE "$M2") == fuse.gstorefs ]] || fail "type of the second mount"
[[ $(findmnt -n -o OPTIONS "$M2") == rw,*nosuid*nodev* ]] ||
	fail "second mount's flags: $(findmnt -n -o OPTIONS "$M2")"
# generic/732's moves
mkdir "$MNT/arrays/A" "$MNT/arrays/B" && touch "$MNT/arrays/A/f" || fail "mkdir, touch"
mv "$MNT/arrays/A/f" "$MNT/arrays/B/" || fail "mv 1"
cat "$M2/arrays/B/f" || fail "the move is not seen through the second mount"
mv "$M2/arrays/B/f" "$M2/arrays/A/" || fail "mv 2"
echo x >"$M2/arrays/A/f" && [[ $(cat "$MNT/arrays/A/f") == x ]] || fail "write through the second"
ok "two mounts, one daemon, one filesystem"

mount -t fuse -o "ro,cache=32M$opts" "$GSTOREFS#$IMG" "$M3" || fail "third mount, ro"
[[ $(findmnt -n -o OPTIONS "$M3") == ro,* ]] || fail "not ro: $(findmnt -n -o OPTIONS "$M3")"
touch "$M3/arrays/y" 2>/dev/null && fail "wrote through the ro mount"
touch "$MNT/arrays/y" || fail "the first mount became ro"
ok "a second mount -o ro is read-only alone"

"$GSTOREFS" -f "$IMG" "$T/m4" 2>"$T/m4.log" && fail "gstorefs -f of a mounted image"
grep -q "is mounted at" "$T/m4.log" || fail "-f: $(cat "$T/m4.log")"

umount "$MNT" || fail "umount the first"
GS_MOUNTED=0
[[ $(cat "$M2/arrays/A/f") == x ]] || fail "the second mount died with the first"
[[ $(daemons) == 1 ]] || fail "the daemon left while a mount remains"
umount "$M2" || fail "umount the second"
umount "$M3" || fail "umount the third"
gs_wait_exit
"$GSTORE" fsck -n "$IMG" >"$T/fsck.log" 2>&1 || { cat "$T/fsck.log" >&2; fail "fsck"; }
ok "the daemon exits after the last unmount; fsck clean"
