#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# The POSIX namespace through gstorefs, each behaviour pjdfstest and xfstests
# found missing: symlinks, hard links, fifos, sockets and device nodes in
# arrays/ and in any directory (kept across a remount, clean in fsck, copied
# by tar and cp -a); nlink 0 in fstat of open files that lost their name;
# setgid directories; suid/sgid cleared on write, truncate and fallocate by
# others; file handles (open_by_handle_at); mmap of O_DIRECT files and of nd
# data (np.memmap); many and large xattrs.
# timeout: 180
. "$(dirname "$0")/../helpers/gsmount.sh"
gs_need_root "mknod of devices, other uids, open_by_handle_at, drop_caches"
command -v setpriv >/dev/null || skip "no setpriv"
gs_init 256M
gs_mount
A=$MNT/arrays
CHECK="$PY $GS_ROOT/tests/helpers/posix_check.py $MNT"
as_nobody() { setpriv --reuid=65534 --regid=65534 --clear-groups "$@"; }

# ---- symlinks, hard links, special files ----
mkdir "$A/d" "$MNT/top"
echo data >"$A/f"
ln -s f "$A/sl" || fail "symlink in arrays/"
long=$(printf 'p%.0s' {1..300})/f
ln -s "$long" "$MNT/top/long" || fail "symlink with a 304-byte target"
ln "$A/f" "$A/d/hard" || fail "hard link"
ln "$A/f" "$MNT/top/hard2" || fail "hard link in another directory"
mkfifo "$A/d/fifo" || fail "mkfifo"
mknod "$A/d/null" c 1 3 || fail "mknod c"
mknod "$MNT/top/blk" b 7 0 || fail "mknod b"
$PY -c "import socket,sys; s=socket.socket(socket.AF_UNIX); s.bind(sys.argv[1])" "$A/d/sock" ||
	fail "bind of a unix socket"
ln "$A/d" "$A/d2" 2>/dev/null && fail "a directory got a hard link"
check_names() {
	expect f readlink "$A/sl"
	expect "$long" readlink "$MNT/top/long"
	expect data cat "$A/sl"
	[[ $(stat -c %h "$A/f") == 3 ]] || fail "link count $(stat -c %h "$A/f"), want 3"
	[[ $(stat -c %i "$A/f") == $(stat -c %i "$MNT/top/hard2") ]] || fail "links differ"
	expect "fifo" stat -c %F "$A/d/fifo"
	expect "character special file 1:3" stat -c '%F %t:%T' "$A/d/null"
	expect "block special file 7:0" stat -c '%F %t:%T' "$MNT/top/blk"
	expect "socket" stat -c %F "$A/d/sock"
	expect "symbolic link" stat -c %F "$A/sl"
}
check_names
# nodev: a device node opens nothing
cat "$A/d/null" 2>/dev/null && fail "a device node opened on a nodev mount"
ok "symlinks, hard links, fifos, sockets and device nodes"

# a fifo works as a fifo
(echo through >"$A/d/fifo") &
writer=$!
expect through cat "$A/d/fifo"
wait $writer

rm "$A/f"
[[ $(stat -c %h "$A/d/hard") == 2 ]] || fail "unlink of one name: $(stat -c %h "$A/d/hard") links left"
expect data cat "$MNT/top/hard2"
ln "$A/d/hard" "$A/f"
mv "$A/d/hard" "$MNT/top/hard2"		# same object: rename does nothing
[[ -e $A/d/hard && $(stat -c %h "$A/f") == 3 ]] || fail "rename between two links of one file"
gs_umount
"$GSTORE" fsck -n -f "$IMG" >"$T/fsck.log" 2>&1 || { cat "$T/fsck.log"; fail "fsck after links"; }
gs_mount
check_names
ok "links kept across a remount, fsck clean"

# tar and cp -a of a tree with links
tar -C "$MNT" -cf "$T/t.tar" top arrays/d arrays/f arrays/sl 2>"$T/tar.log" ||
	{ cat "$T/tar.log"; fail "tar c"; }
mkdir "$A/untar"
tar -C "$A/untar" -xf "$T/t.tar" || fail "tar x of a tree with links"
[[ $(stat -c %i "$A/untar/arrays/f") == $(stat -c %i "$A/untar/top/hard2") ]] ||
	fail "tar x lost a hard link"
expect f readlink "$A/untar/arrays/sl"
cp -a "$A/untar" "$A/cpa" || fail "cp -a"
expect "$long" readlink "$A/cpa/top/long"
expect fifo stat -c %F "$A/cpa/arrays/d/fifo"
ok "tar and cp -a of trees with links and special files"

# ---- nlink 0 for open files that lost their name; handles; O_DIRECT mmap ----
$CHECK "$A" fstat_unlinked handles mmap_direct || fail "posix checks"
# handles outlive the daemon: taken before an unmount, opened after the next mount
GS_HANDLES=$T/handles $CHECK "$A" handles_save || fail "handles"
gs_umount
gs_mount
GS_HANDLES=$T/handles $CHECK "$A" handles_load || fail "handles after a restart"
if "$PY" -c 'import numpy' 2>/dev/null; then
	$CHECK "$A" nd_mmap || fail "np.memmap of nd data"
else
	echo "np.memmap of nd data not checked: no numpy"
fi

# ---- setgid directories ----
mkdir -m 2777 "$A/sg"
chgrp 100 "$A/sg"
as_nobody mkdir "$A/sg/sub" || fail "mkdir in a setgid dir"
as_nobody touch "$A/sg/file" || fail "create in a setgid dir"
[[ $(stat -c %g "$A/sg/sub") == 100 && $(stat -c %g "$A/sg/file") == 100 ]] ||
	fail "group of new entries in a setgid dir: $(stat -c %g "$A/sg/sub" "$A/sg/file")"
[[ $(stat -c %a "$A/sg/sub") == 2* ]] || fail "a new dir in a setgid dir: $(stat -c %a "$A/sg/sub")"
[[ $(stat -c %a "$A/sg/file") != 2* ]] || fail "a new file in a setgid dir got setgid"
ok "setgid directories pass on their group (and setgid, to directories)"

# ---- suid/sgid cleared by a write, truncate or fallocate of another user ----
killpriv() {	# killpriv MODE GROUP WANT CMD...: as nobody on a file of MODE, GROUP
	local mode=$1 group=$2 want=$3
	shift 3
	rm -f "$A/k"
	head -c 8192 /dev/zero >"$A/k"
	chgrp "$group" "$A/k"
	chmod "$mode" "$A/k"
	as_nobody "$@" || fail "as nobody: $*"
	[[ $(stat -c %a "$A/k") == "$want" ]] ||
		fail "$mode (group $group), then $*: mode $(stat -c %a "$A/k"), want $want"
}
for cmd in "sh -c 'echo x >>$A/k'" \
	"dd if=/dev/zero of=$A/k bs=4096 count=1 oflag=direct conv=notrunc status=none" \
	"truncate -s 100 $A/k" "fallocate -l 1M $A/k" "sh -c ': >$A/k'"; do
	eval "killpriv 6777 0 777 $cmd"
	eval "killpriv 6777 65534 777 $cmd"	# setgid with group exec: gone for all
	# setgid without group exec stays for members of the group only
	eval "killpriv 2766 65534 2766 $cmd"
	eval "killpriv 2766 0 766 $cmd"
done
rm -f "$A/k"
head -c 10 /dev/zero >"$A/k"
chmod 6777 "$A/k"
echo x >>"$A/k"
[[ $(stat -c %a "$A/k") == 6777 ]] || fail "a write by root cleared the mode bits"
ok "suid/sgid cleared by other users' writes, truncates and fallocates"

# ---- xattrs beyond one block ----
$CHECK "$A" xattr_many || fail "xattrs"
gs_umount
"$GSTORE" fsck -n -f "$IMG" >"$T/fsck.log" 2>&1 || { cat "$T/fsck.log"; fail "fsck at the end"; }
gs_mount
[[ $($PY -c "import os,sys; print(len(os.listxattr(sys.argv[1])))" "$A/xa") == 101 ]] ||
	fail "xattrs after a remount"
ok "xattrs kept across a remount"
gs_umount
