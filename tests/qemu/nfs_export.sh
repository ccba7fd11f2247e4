#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# timeout: 420
# gstorefs exported by the kernel's NFS server (gstorefs(8): "The mount is
# exportable"), inside the QEMU guest (the host kernel may lack nfsd): a
# gstore image in the guest's tmpfs, mounted with gstorefs; its arrays/
# exported by nfsd (NFSv4 only, TCP over loopback, exportfs + rpc.mountd +
# rpc.nfsd from nfs-utils); mounted with the NFSv4.2 client in the same guest.
# Through NFS: a tree written there reads back byte-equal through the FUSE
# mount and the other way (after drop_caches, so from the daemon); rename,
# hard link, symlink, unlink, rmdir, a 300-entry readdir; fio verify (crc32c)
# on a file over NFS, verified again through FUSE.  File handles: a file held
# open over NFS still reads after drop_caches (nfsd holds it open too, so its
# FUSE inode stays); a directory and a file pinned on the client by bind
# mounts (no NFS open: the server holds nothing) are used again after
# drop_caches has evicted their FUSE inodes, so nfsd must resolve the handles
# through gstorefs's export support (FUSE LOOKUP of "." and ".." by node id):
# no ESTALE (without FUSE_CAP_EXPORT_SUPPORT, or with "." lookups refused,
# these fail with ESTALE); a file deleted through FUSE gives ESTALE through
# its pinned handle.  Then NFS unmount, nfsd stop, gstorefs unmount and
# `gstore fsck -n -f` clean.  Skips without nfs-kernel-server/nfs-common.
set -u
. "$(dirname "$0")/lib.bash"
BIN=${GS_BUILD:-build}/bin
[[ -x $BIN/gstorefs && -x $BIN/gstore ]] || qemu_skip "gstorefs/gstore not built"
nfsbin=()
for p in rpc.nfsd rpc.mountd exportfs mount.nfs; do
	q=$(PATH=$PATH:/usr/sbin:/sbin command -v $p) ||
		qemu_skip "$p not installed (nfs-kernel-server, nfs-common)"
	nfsbin+=("$q")
done
qemu_setup
# the modules, with what they need, in load order
: >"$W/root/mod/nfs.order"
for top in kernel/fs/fuse/fuse.ko kernel/fs/nfsd/nfsd.ko kernel/fs/nfs/nfsv4.ko; do
	grep -q "^$top:" "/lib/modules/$KVER/modules.dep" ||
		qemu_skip "$top not in /lib/modules/$KVER/modules.dep"
	for m in $(grep "^$top:" "/lib/modules/$KVER/modules.dep" | cut -d: -f2) "$top"; do
		[[ -e /lib/modules/$KVER/$m ]] || qemu_skip "$m missing"
	done
	qemu_add_mod nfs.order "$top"
done
G=$(cd "$BIN" && pwd)
qemu_add_dyn "$G/gstorefs" "$G/gstore" "${nfsbin[@]}"
FIO=$(command -v fio || true)
[[ -n $FIO ]] && qemu_add_dyn "$FIO"
# what nfs-utils and libtirpc read from /etc
mkdir -p "$W/root/etc"
for f in /etc/netconfig /etc/services /etc/protocols; do
	[[ -e $f ]] && cp "$f" "$W/root/etc/"
done
printf '127.0.0.1 localhost\n' >"$W/root/etc/hosts"
printf 'root:x:0:0:root:/:/bin/sh\nnobody:x:65534:65534:nobody:/:/bin/false\n' >"$W/root/etc/passwd"
printf 'root:x:0:\nnogroup:x:65534:\n' >"$W/root/etc/group"
{
	echo "G=$G"
	echo "NFSD=${nfsbin[0]} MOUNTD=${nfsbin[1]} EXPORTFS=${nfsbin[2]} MOUNTNFS=${nfsbin[3]}"
	echo "FIO=$FIO"
	cat <<'GUEST'
for m in $(cat /mod/nfs.order); do
	insmod "/mod/$m" || fail "insmod $m"
done
echo "ok modules: $(cat /mod/nfs.order | tr '\n' ' ')"
drop() { sync; echo 3 >/proc/sys/vm/drop_caches; }

# the NFS server first: its grace period runs while the rest is set up
ip link set lo up || fail "lo up"
mount -t nfsd nfsd /proc/fs/nfsd || fail "mount nfsd"
echo 10 >/proc/fs/nfsd/nfsv4gracetime || fail "nfsv4gracetime"
echo 10 >/proc/fs/nfsd/nfsv4leasetime || fail "nfsv4leasetime"
mkdir -p /var/lib/nfs /run /etc/exports.d
: >/etc/exports
: >/var/lib/nfs/etab
: >/var/lib/nfs/rmtab
$NFSD -N 3 -U -p 2049 4 >/tmp/nfsd.log 2>&1 || { cat /tmp/nfsd.log; fail "rpc.nfsd"; }
[ "$(cat /proc/fs/nfsd/threads)" = 4 ] || { cat /tmp/nfsd.log; fail "nfsd threads: $(cat /proc/fs/nfsd/threads)"; }
NFSD_UP=$(uptime_s)
echo "ok nfsd: versions $(cat /proc/fs/nfsd/versions), ports $(cat /proc/fs/nfsd/portlist | tr '\n' ' ')"

IMG=/tmp/gs.img
F=/mnt/gs/arrays
N=/mnt/nfs
mkdir -p /mnt/gs $N
$G/gstore mkfs $IMG --size 96M >/tmp/mkfs.log 2>&1 || { cat /tmp/mkfs.log; fail "mkfs"; }
$G/gstorefs $IMG /mnt/gs -o buffered,cache=64M || fail "gstorefs mount"
n=0
while [ ! -d $F ]; do
	n=$((n + 1)); [ $n -gt 100 ] && fail "gstorefs mount did not come up"; usleep 100000
done

# source data in tmpfs: sizes around page and FUSE request boundaries
S=/tmp/src
mkdir -p $S/a/b/c $S/d
: >$S/empty
dd if=/dev/urandom of=$S/f1 bs=4095 count=1 2>/dev/null
dd if=/dev/urandom of=$S/f2 bs=4096 count=3 2>/dev/null
dd if=/dev/urandom of=$S/a/f3 bs=65537 count=1 2>/dev/null
dd if=/dev/urandom of=$S/a/b/f4 bs=1048576 count=2 2>/dev/null
dd if=/dev/urandom of=$S/a/b/c/f5 bs=1000 count=7 2>/dev/null
dd if=/dev/urandom of=$S/d/f6 bs=333333 count=1 2>/dev/null
sums() { (cd "$1" && find . -type f | sort | xargs md5sum); }
sums $S >/tmp/src.sums
same_tree() {	# same_tree DIR WHAT: DIR holds what $S holds, byte for byte
	diff -r $S "$1" >/tmp/diff.out 2>&1 || { head -20 /tmp/diff.out; fail "$2: trees differ"; }
	sums "$1" | diff /tmp/src.sums - || fail "$2: checksums differ"
	[ "$(cd "$1" && find . | sort)" = "$(cd $S && find . | sort)" ] || fail "$2: names differ"
}

# fsid=0: the export is the NFSv4 pseudo-root (no pseudo directories above it)
$EXPORTFS -o rw,no_root_squash,fsid=0,no_subtree_check,insecure,sync 127.0.0.1:$F ||
	fail "exportfs"
$MOUNTD -F -N 2 -N 3 -u >/tmp/mountd.log 2>&1 &
MOUNTD_PID=$!
$EXPORTFS -v | grep -q "^$F" || { $EXPORTFS -v; fail "export not listed"; }
$MOUNTNFS 127.0.0.1:/ $N -n -o vers=4.2,addr=127.0.0.1,clientaddr=127.0.0.1 ||
	{ cat /tmp/mountd.log; dmesg | tail -20; fail "mount.nfs4"; }
grep " $N nfs4 " /proc/mounts | grep -q "vers=4.2" || { cat /proc/mounts; fail "not an NFSv4.2 mount"; }
echo "ok exported $F (exportfs, rpc.mountd), mounted over NFSv4.2 at $N"

# NFSv4 OPENs wait for the end of nfsd's grace period (10 s: nobody is
# there to reclaim state, and v4_end_grace is refused without client tracking)
while [ "$(cat /proc/fs/nfsd/v4_end_grace)" != Y ]; do
	[ "$(uptime_s)" -gt $((NFSD_UP + 30)) ] && fail "nfsd grace period did not end"
	usleep 200000
done
echo "ok nfsd grace period over after $(($(uptime_s) - NFSD_UP)) s"
cp -r $S $N/tn || fail "cp -r to NFS"
drop
same_tree $F/tn "written through NFS, read through FUSE"
echo "ok tree written through NFS reads back equal through FUSE"
cp -r $S $F/tf || fail "cp -r to FUSE"
drop
same_tree $N/tf "written through FUSE, read through NFS"
echo "ok tree written through FUSE reads back equal through NFS"

# namespace operations through NFS, seen through FUSE
mv $N/tn/f1 $N/tn/a/f1r || fail "rename over NFS"
mv $N/tn/d $N/tn/a/b/d2 || fail "directory rename over NFS"
[ ! -e $F/tn/f1 ] && [ ! -e $F/tn/d ] || fail "renamed names still there (FUSE)"
cmp $S/f1 $F/tn/a/f1r && cmp $S/d/f6 $F/tn/a/b/d2/f6 || fail "renamed contents (FUSE)"
echo "ok rename (file, directory) through NFS"
ln $N/tn/f2 $N/tn/a/f2l || fail "hard link over NFS"
[ "$(stat -c %h $F/tn/f2)" = 2 ] || fail "nlink after link: $(stat -c %h $F/tn/f2)"
[ "$(stat -c %i $F/tn/f2)" = "$(stat -c %i $F/tn/a/f2l)" ] || fail "link: inode numbers differ (FUSE)"
[ "$(stat -c %i $N/tn/f2)" = "$(stat -c %i $N/tn/a/f2l)" ] || fail "link: inode numbers differ (NFS)"
cmp $S/f2 $F/tn/a/f2l || fail "link contents"
echo "ok hard link through NFS (nlink 2, one inode on both sides)"
ln -s a/b/f4 $N/tn/sl || fail "symlink over NFS"
[ "$(readlink $N/tn/sl)" = a/b/f4 ] && [ "$(readlink $F/tn/sl)" = a/b/f4 ] ||
	fail "readlink: '$(readlink $N/tn/sl)' (NFS), '$(readlink $F/tn/sl)' (FUSE)"
cmp $S/a/b/f4 $F/tn/sl || fail "symlink target contents"
echo "ok symlink, readlink through NFS and FUSE"
rm $N/tn/a/f2l || fail "unlink over NFS"
[ "$(stat -c %h $F/tn/f2)" = 1 ] && [ ! -e $F/tn/a/f2l ] || fail "after unlink of the link"
rm $N/tn/a/b/c/f5 || fail "unlink over NFS"
[ ! -e $F/tn/a/b/c/f5 ] || fail "unlinked file still there (FUSE)"
rmdir $N/tn/a/b/c || fail "rmdir over NFS"
[ ! -e $F/tn/a/b/c ] || fail "removed directory still there (FUSE)"
echo "ok unlink, rmdir through NFS"
mkdir $F/many || fail "mkdir many"
i=0
while [ $i -lt 300 ]; do
	: >$F/many/entry-with-a-longer-name-$i || fail "create entry $i"
	i=$((i + 1))
done
drop
ls $N/many >/tmp/ls.nfs || fail "readdir over NFS"
ls $F/many >/tmp/ls.fuse || fail "readdir through FUSE"
[ "$(wc -l </tmp/ls.nfs)" = 300 ] || fail "readdir over NFS: $(wc -l </tmp/ls.nfs) entries, not 300"
cmp /tmp/ls.nfs /tmp/ls.fuse || fail "readdir: NFS and FUSE lists differ"
echo "ok readdir: 300 entries, same through NFS and FUSE"

if [ -n "$FIO" ]; then
	$FIO --name=nfs --filename=$N/fio --size=8M --bs=4k --rw=randwrite \
		--ioengine=psync --verify=crc32c --do_verify=1 --verify_fatal=1 \
		--randrepeat=1 --eta=never --output=/tmp/fio.out
	rc=$?
	[ $rc = 0 ] || { cat /tmp/fio.out; fail "fio verify over NFS"; }
	drop
	$FIO --name=nfs --filename=$F/fio --size=8M --bs=4k --rw=randwrite \
		--ioengine=psync --verify=crc32c --verify_only --verify_fatal=1 \
		--randrepeat=1 --eta=never --output=/tmp/fio2.out
	rc=$?
	[ $rc = 0 ] || { cat /tmp/fio2.out; fail "fio verify through FUSE of the file fio wrote over NFS"; }
	grep -q "READ:.*io=8192KiB" /tmp/fio2.out || { cat /tmp/fio2.out; fail "fio --verify_only read less than the 8 MiB"; }
	echo "ok fio randwrite + verify (crc32c) over NFS, verified again through FUSE"
else
	echo "skip: fio (not installed on the host)"
fi

# file handles.  A file held open over NFS: nfsd holds it open too (its FUSE
# inode stays cached: this one passes without export support as well).
exec 3<$N/tn/a/b/f4 || fail "open over NFS"
# a directory and files pinned on the client by bind mounts: the client
# keeps their file handles, the server holds nothing once they are closed
mkdir -p /tmp/pind
: >/tmp/pinf
: >/tmp/ping
mount -o bind $N/tf/a/b /tmp/pind || fail "bind mount of an NFS directory"
mount -o bind $N/tf/a/f3 /tmp/pinf || fail "bind mount of an NFS file"
cp $S/f2 $F/gone || fail "create gone"
cmp $S/f2 $N/gone || fail "gone over NFS"
mount -o bind $N/gone /tmp/ping || fail "bind mount of gone"
rm $F/gone || fail "rm gone (FUSE)"
# evict: the client's and the server's dentries and inodes, the FUSE inodes
# with them (FORGET), nfsd's cached open files (its shrinker)
drop
sleep 2
drop
[ "$(dd bs=65536 <&3 2>/dev/null | md5sum)" = "$(md5sum <$S/a/b/f4)" ] || fail "read through the held NFS descriptor after drop_caches"
exec 3<&-
echo "ok a file held open over NFS reads back after drop_caches"
ls /tmp/pind >/tmp/pind.ls 2>/tmp/pind.err || { cat /tmp/pind.err; fail "readdir through a pinned NFS directory handle"; }
[ "$(cat /tmp/pind.ls | tr '\n' ' ')" = "c f4 " ] || fail "pinned directory lists '$(cat /tmp/pind.ls | tr '\n' ' ')'"
cmp $S/a/b/f4 /tmp/pind/f4 || fail "lookup + read through a pinned NFS directory handle"
cmp $S/a/f3 /tmp/pinf || fail "open + read through a pinned NFS file handle"
stat /tmp/pinf >/dev/null || fail "stat through a pinned NFS file handle"
echo "ok handles of a directory and a file whose FUSE inodes were evicted: readdir, lookup, open, read (no ESTALE)"
drop
ls -lR $N/tn $N/tf >/tmp/lsR.nfs 2>&1 || { tail /tmp/lsR.nfs; fail "ls -lR over NFS after drop_caches"; }
grep -qi stale /tmp/lsR.nfs && fail "ESTALE in ls -lR over NFS"
same_tree $N/tf "after drop_caches, through NFS"
echo "ok paths over NFS after drop_caches: ls -lR, tree equal"
if cat /tmp/ping >/dev/null 2>/tmp/ping.err; then
	fail "a file deleted through FUSE still opens through its NFS handle"
fi
grep -q "Stale file handle" /tmp/ping.err || { cat /tmp/ping.err; fail "deleted file: not ESTALE"; }
echo "ok a file deleted through FUSE: ESTALE through its NFS handle"

umount /tmp/ping || umount -l /tmp/ping || fail "umount /tmp/ping"
umount /tmp/pinf || fail "umount /tmp/pinf"
umount /tmp/pind || fail "umount /tmp/pind"
umount $N || fail "umount NFS"
$EXPORTFS -ua || fail "exportfs -ua"
$NFSD 0 || fail "rpc.nfsd 0"
[ "$(cat /proc/fs/nfsd/threads)" = 0 ] || fail "nfsd threads left: $(cat /proc/fs/nfsd/threads)"
kill $MOUNTD_PID
echo "ok NFS unmounted, nfsd stopped"
n=0
until umount /mnt/gs; do
	n=$((n + 1)); [ $n -gt 20 ] && fail "umount gstorefs"; sleep 1
done
n=0
while pidof gstorefs >/dev/null; do
	n=$((n + 1)); [ $n -gt 300 ] && fail "gstorefs did not exit"; usleep 100000
done
$G/gstore fsck -n -f $IMG || fail "fsck -n -f after the NFS run"
echo "ok fsck clean"
GUEST
} >"$W/guest.sh"
qemu_boot nfs "$W/guest.sh" -m 2G || exit 1
echo "pass"
