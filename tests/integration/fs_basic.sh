#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# gstorefs on a real mount: the namespace, every array file operation,
# xattrs, statfs, /.gstore, and persistence across a remount.
# timeout: 180
. "$(dirname "$0")/../helpers/gsmount.sh"
gs_init 1G
gs_mount
A=$MNT/arrays

# ---- namespace
for d in arrays graph nd .gstore; do
	[[ -d $MNT/$d ]] || fail "no $d/ at the root"
done
ls -a "$MNT" | grep -qx .gstore || fail ".gstore not listed in the root"
[[ $(ls "$MNT/.gstore" | tr '\n' ' ') == "info stats " ]] || fail ".gstore lists $(ls "$MNT/.gstore")"
grep -q . "$MNT/.gstore/info" || fail ".gstore/info is empty"
[[ -s $MNT/.gstore/stats ]] || fail ".gstore/stats is empty"
[[ -e $MNT/.gstore/nope ]] && fail ".gstore/nope exists"
touch "$MNT/.gstore/x" 2>/dev/null && fail "created a file in .gstore"
ok namespace

# ---- create, write, read
echo hello >"$A/h"
[[ $(cat "$A/h") == hello ]] || fail "read back"
[[ $(stat -c %s "$A/h") == 6 ]] || fail "size after echo"
[[ $(stat -c %F "$A/h") == "regular file" ]] || fail "not a regular file"
# pwrite/pread at any offset and size (unaligned, spanning blocks and cache lines)
$FSOPS pwrite "$A/p" 0 1000 1 || fail pwrite
$FSOPS pwrite "$A/p" 4093 7 2 || fail pwrite
$FSOPS pwrite "$A/p" 65530 131090 3 || fail pwrite
$FSOPS pwrite "$A/p" 3000000 1048577 4 || fail pwrite
$FSOPS verify "$A/p" 0 1000 1 || fail "verify 0"
$FSOPS zero "$A/p" 1000 3093 || fail "gap 1000..4093 not zeros"
$FSOPS verify "$A/p" 4093 7 2 || fail "verify 4093"
$FSOPS verify "$A/p" 65530 131090 3 || fail "verify 65530"
$FSOPS zero "$A/p" 196620 2803380 || fail "hole not zeros"
$FSOPS verify "$A/p" 3000000 1048577 4 || fail "verify 3000000"
[[ $(stat -c %s "$A/p") == 4048577 ]] || fail "size $(stat -c %s "$A/p")"
dd if="$A/p" bs=1 skip=4048570 count=100 status=none | wc -c | grep -qx 7 || fail "read past EOF"
ok "create/read/write/pread/pwrite"

# ---- truncate
truncate -s 10M "$A/p" && $FSOPS zero "$A/p" 4048577 $((10 * 1048576 - 4048577)) ||
	fail "grown tail not zeros"
truncate -s 5000 "$A/p"
[[ $(stat -c %s "$A/p") == 5000 ]] || fail "shrink"
truncate -s 8192 "$A/p"
$FSOPS verify "$A/p" 0 1000 1 && $FSOPS zero "$A/p" 5000 3192 || fail "shrink then grow"
echo x >"$A/h"
[[ $(cat "$A/h") == x ]] || fail "O_TRUNC"
ok truncate

# ---- fallocate
: >"$A/f"
expect ok $FSOPS falloc "$A/f" 0 0 1M
[[ $(stat -c %s "$A/f") == 1048576 ]] || fail "fallocate did not extend"
expect ok $FSOPS falloc "$A/f" keep 1M 1M
[[ $(stat -c %s "$A/f") == 1048576 ]] || fail "KEEP_SIZE changed the size"
$FSOPS pwrite "$A/f" 0 1048576 5
expect ok $FSOPS falloc "$A/f" punch 4096 8192
$FSOPS zero "$A/f" 4096 8192 && $FSOPS verify "$A/f" 12288 4096 5 &&
	$FSOPS verify "$A/f" 0 4096 5 || fail "punch hole"
for m in zero collapse insert; do
	expect EOPNOTSUPP $FSOPS falloc "$A/f" $m 0 4096
done
ok fallocate

# ---- unlink, also of an open file
echo data >"$A/u"
rm "$A/u"
[[ -e $A/u ]] && fail "unlink"
$FSOPS pwrite "$A/o" 0 300000 6
exec 3<"$A/o"
rm "$A/o"
[[ -e $A/o ]] && fail "unlinked name still there"
$FSOPS verify "/proc/$$/fd/3" 0 300000 6 || fail "data of an unlinked open file"
exec 3<&-
ok unlink

# ---- rename: plain, over an existing file, NOREPLACE, EXCHANGE, directories
echo a >"$A/ra"
echo b >"$A/rb"
mv "$A/ra" "$A/rc" && [[ $(cat "$A/rc") == a && ! -e $A/ra ]] || fail "rename"
mv -f "$A/rc" "$A/rb" && [[ $(cat "$A/rb") == a && ! -e $A/rc ]] || fail "rename over"
echo c >"$A/rd"
expect EEXIST $FSOPS rename2 "$A/rd" "$A/rb" noreplace
expect ok $FSOPS rename2 "$A/rd" "$A/rb" exchange
[[ $(cat "$A/rb") == c && $(cat "$A/rd") == a ]] || fail "exchange"
expect ENOENT $FSOPS rename2 "$A/rd" "$A/nonexist" exchange
mkdir "$A/d1" "$A/d2"
echo in >"$A/d1/x"
mv "$A/d1/x" "$A/d2/y" && [[ $(cat "$A/d2/y") == in ]] || fail "rename across dirs"
rmdir "$A/d2" 2>/dev/null && fail "removed a non-empty directory"
rm "$A/d2/y"
rmdir "$A/d1" "$A/d2" || fail rmdir
mv "$MNT/.gstore" "$A/" 2>/dev/null && fail "renamed .gstore"
ok rename

# ---- attributes
chmod 600 "$A/rb"
[[ $(stat -c %a "$A/rb") == 600 ]] || fail chmod
chown 1234:5678 "$A/rb"
[[ $(stat -c %u:%g "$A/rb") == 1234:5678 ]] || fail chown
touch -m -d '2001-02-03 04:05:06 UTC' "$A/rb"
[[ $(stat -c %Y "$A/rb") == 981173106 ]] || fail "utimens mtime $(stat -c %Y "$A/rb")"
touch -a -d '2002-02-03 04:05:06 UTC' "$A/rb"
[[ $(stat -c %X "$A/rb") == 1012709106 ]] || fail "utimens atime"
ok "chmod/chown/utimens"

# ---- symlinks, links, fifos
ln -s x "$A/sl" && [[ $(readlink "$A/sl") == x ]] || fail "symlink"
ln "$A/rb" "$A/hl" && [[ $(stat -c %h "$A/rb") == 2 ]] || fail "hard link"
mkfifo "$A/fifo" && [[ -p $A/fifo ]] || fail "fifo"
rm "$A/sl" "$A/hl" "$A/fifo"
ok "symlink/link/mknod (tests/integration/fs_posix.sh has the rest)"

# ---- fsync, fsyncdir
$PY - "$A" <<'EOF' || fail "fsync/fsyncdir"
import os, sys
d = sys.argv[1]
fd = os.open(d + "/s", os.O_RDWR | os.O_CREAT, 0o644)
os.write(fd, b"x" * 10000)
os.fsync(fd)
os.fdatasync(fd)
os.close(fd)
dfd = os.open(d, os.O_RDONLY | os.O_DIRECTORY)
os.fsync(dfd)
os.close(dfd)
EOF
ok "fsync/fsyncdir"

# ---- xattrs
$PY - "$A/rb" <<'EOF' || fail xattrs
import errno, os, sys
f = sys.argv[1]
os.setxattr(f, "user.gstore.dtype", b"float32")
os.setxattr(f, "user.gstore.shape", b"2,3")
assert os.getxattr(f, "user.gstore.dtype") == b"float32"
assert os.getxattr(f, "user.gstore.shape") == b"2,3"
assert set(os.listxattr(f)) >= {"user.gstore.dtype", "user.gstore.shape"}, os.listxattr(f)
os.setxattr(f, "user.other", b"v")
try:
    os.setxattr(f, "user.other", b"w", os.XATTR_CREATE)
    raise SystemExit("XATTR_CREATE over an existing one")
except OSError as e:
    assert e.errno == errno.EEXIST, e
os.removexattr(f, "user.other")
try:
    os.getxattr(f, "user.other")
    raise SystemExit("removed xattr still there")
except OSError as e:
    assert e.errno == errno.ENODATA, e
try:
    os.setxattr(f, "trusted.x", b"v")
    raise SystemExit("trusted.* accepted")
except OSError as e:
    assert e.errno in (errno.EOPNOTSUPP, errno.EPERM), e
EOF
ok xattrs

# ---- statfs
df -B1 --output=size,avail "$MNT" | tail -1 | {
	read -r size avail
	[[ $size -gt 900000000 && $size -le 1073741824 && $avail -gt 0 && $avail -le $size ]] ||
		fail "df: size $size avail $avail"
}
[[ $(stat -f -c %l "$MNT") -ge 255 ]] || fail "name max"
ok statfs

# ---- live counters in .gstore/stats
w1=$(awk '$1 == "fuse_write_bytes" {print $2}' "$MNT/.gstore/stats")
dd if=/dev/zero of="$A/big" bs=1M count=8 conv=fsync status=none
w2=$(awk '$1 == "fuse_write_bytes" {print $2}' "$MNT/.gstore/stats")
[[ -n $w1 && $((w2 - w1)) -ge 8388608 ]] || fail "stats: fuse_write_bytes $w1 -> $w2"
s1=$(md5sum <"$MNT/.gstore/stats")
cat "$A/big" >/dev/null
[[ $(md5sum <"$MNT/.gstore/stats") != "$s1" ]] || fail "stats did not change"
ok ".gstore/stats"

# ---- persistence across a remount
sum=$(md5sum <"$A/p")
gs_umount
gs_mount
[[ $(md5sum <"$A/p") == "$sum" ]] || fail "data changed across remount"
[[ $(cat "$A/rb") == c && $(stat -c %a:%u:%g:%Y "$A/rb") == 600:1234:5678:981173106 ]] ||
	fail "attributes across remount: $(stat -c %a:%u:%g:%Y "$A/rb")"
[[ $($PY -c "import os,sys; print(os.getxattr(sys.argv[1],'user.gstore.shape').decode())" \
	"$A/rb") == 2,3 ]] || fail "xattr across remount"
[[ ! -e $A/u && ! -e $A/o && ! -e $A/ra ]] || fail "removed names came back"
gs_alive || fail "daemon died"
gs_umount
"$GSTORE" fsck -n "$IMG" >"$T/fsck.out" || { cat "$T/fsck.out"; fail "fsck after the test"; }
ok "remount persistence, fsck clean"
