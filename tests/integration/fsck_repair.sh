#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# fsck repairs damage no checksum sees, driven through the CLI as a user
# would (gstore mkfs / import / export / nd / fsck on an image file); the
# image is edited with a small python tool that recomputes the crcs.
#   1. every block marked free in the bitmap: the next mount goes read-only
#      (the write fails, no file's data is overwritten); fsck -y repairs
#   2. two files claiming the same blocks: fsck -y gives one a copy; both
#      read what they read before, and are independent afterwards
#   3. the inode-table block holding the root (and arrays/, graph/, nd/ and
#      the first files) zeroed: fsck -y rebuilds the tree, the files whose
#      inodes survived are back under their names
#   4. an N-D space's superblock corrupted: fsck -y removes the space
# Each: fsck -n -f reports (exit 4), fsck -y -f repairs (exit 1), then
# fsck -n -f is clean (exit 0).
# timeout: 300
set -u
cd "$(dirname "$0")/../.."
B=${B:-build}
G=$B/bin/gstore
[[ -x $G ]] || { echo "skip: $G not built"; exit 77; }
command -v python3 >/dev/null || { echo "skip: python3 needed to edit the image"; exit 77; }
work=$(mktemp -d "${TMPDIR:-/tmp}/gs-fsckrep.XXXXXX")
trap 'rm -rf "$work"' EXIT
img=$work/t.img
N=20

fail() {
	echo "FAIL: $*"
	exit 1
}

cat >"$work/img.py" <<'EOF'
# Edit a gstore image behind the filesystem's back (gstore_format.h layout).
import struct, sys

def crc32c(data):
    crc = 0xffffffff
    for b in data:
        crc ^= b
        for _ in range(8):
            crc = (crc >> 1) ^ (0x82f63b78 if crc & 1 else 0)
    return crc ^ 0xffffffff

img, cmd, args = sys.argv[1], sys.argv[2], sys.argv[3:]
f = open(img, 'r+b')
sb = f.read(512)
bs = struct.unpack_from('<I', sb, 16)[0]
(nblocks, ninodes, bb_start, bb_n, ib_start, ib_n, it_start, it_n) = \
    struct.unpack_from('<8Q', sb, 40)
ipb = (bs - 32) // 256

def rd(blk):
    f.seek(blk * bs)
    return bytearray(f.read(bs))

def wr(blk, b, seal=True):
    if seal:
        struct.pack_into('<I', b, 4, 0)
        struct.pack_into('<I', b, 4, crc32c(bytes(b)))
    f.seek(blk * bs)
    f.write(b)

def inode(ino):
    blk = it_start + ino // ipb
    return blk, 32 + (ino % ipb) * 256

def extent0(ino):
    blk, off = inode(ino)
    b = rd(blk)
    depth, nr = struct.unpack_from('<HH', b, off + 152)
    assert depth == 0 and nr >= 1, 'inode %d: no inline extent' % ino
    return struct.unpack_from('<QQI', b, off + 160)   # lblk, pblk, len

def lookup(dir_ino, name):
    pblk = extent0(dir_ino)[1]
    b = rd(pblk)
    off = 32
    while off < bs:
        ino, rec, nl = struct.unpack_from('<QHB', b, off)
        if ino and b[off + 16:off + 16 + nl].decode() == name:
            return ino
        off += rec
    sys.exit('%s not found in directory %d' % (name, dir_ino))

if cmd == 'bitmap-free':        # every block free, crcs valid
    for k in range(bb_n):
        b = rd(bb_start + k)
        b[32:] = bytes(bs - 32)
        wr(bb_start + k, b)
elif cmd == 'cross-link':       # arrays/B's first extent -> arrays/A's blocks
    a, bname = lookup(2, args[0]), lookup(2, args[1])
    blk, off = inode(bname)
    b = rd(blk)
    struct.pack_into('<Q', b, off + 160 + 8, extent0(a)[1])
    wr(blk, b)
elif cmd == 'zero-itable':      # inode-table block 0: /, arrays/, graph/, nd/, ...
    wr(it_start, bytearray(bs), seal=False)
elif cmd == 'ino':              # inode number of arrays/NAME
    print(lookup(2, args[0]))
elif cmd == 'nd-flip':          # a byte of nd/NAME's superblock
    pblk = extent0(lookup(4, args[0]))[1]
    b = rd(pblk)
    b[16] ^= 0x40
    wr(pblk, b, seal=False)
else:
    sys.exit('unknown command ' + cmd)
EOF

tool() { python3 "$work/img.py" "$img" "$@"; }

# fsck with @2.. must exit @1
fsck_rc() {
	local want=$1 rc
	shift
	"$G" fsck "$@" "$img" >"$work/fsck.out" 2>&1
	rc=$?
	[[ $rc == "$want" ]] || { cat "$work/fsck.out"; fail "gstore fsck $* exited $rc, expected $want"; }
}

# report, repair (its report kept in fsck.y), clean
repair() {
	fsck_rc 4 -n -f
	fsck_rc 1 -y -f
	cp "$work/fsck.out" "$work/fsck.y"
	sed 's/^/    /' "$work/fsck.y" | head -30
	fsck_rc 0 -n -f
}

fresh() {
	rm -f "$img"
	"$G" mkfs "$img" --size 32M >/dev/null || fail mkfs
	for ((i = 0; i < N; i++)); do
		[[ -f $work/d$i ]] || head -c $((20000 + i * 4096)) /dev/urandom >"$work/d$i"
		"$G" import array "f$i" "$work/d$i" --image "$img" --raw >/dev/null ||
			fail "import f$i"
	done
}

# arrays/f$1 holds file $2
same() {
	"$G" export array "f$1" "$work/out" --image "$img" >/dev/null 2>&1 || fail "export f$1"
	cmp -s "$2" "$work/out" || fail "f$1 does not hold what it should"
}

echo "== 1. bitmap marks every block free (valid crc)"
fresh
tool bitmap-free
if "$G" import array new "$work/d0" --image "$img" --raw >"$work/out.txt" 2>&1; then
	fail "a write on a filesystem whose bitmap lies succeeded"
fi
grep -q "block bitmap" "$work/out.txt" || { cat "$work/out.txt"; fail "no message naming the bitmap"; }
grep -qi "read-only" "$work/out.txt" || { cat "$work/out.txt"; fail "no read-only message"; }
for ((i = 0; i < N; i++)); do same $i "$work/d$i"; done
repair
"$G" import array new "$work/d0" --image "$img" --raw >/dev/null || fail "write after repair"
for ((i = 0; i < N; i++)); do same $i "$work/d$i"; done
fsck_rc 0 -n -f

echo "== 2. two files claim the same blocks"
fresh
tool cross-link f3 f4
"$G" export array f3 "$work/a.before" --image "$img" >/dev/null || fail "export f3"
"$G" export array f4 "$work/b.before" --image "$img" >/dev/null || fail "export f4"
repair
grep -q "claimed by more than one object" "$work/fsck.y" || fail "no word of the shared blocks"
same 3 "$work/a.before"
same 4 "$work/b.before"
"$G" import array f4 "$work/d9" --image "$img" --raw --force >/dev/null || fail "rewrite f4"
same 3 "$work/a.before"
same 4 "$work/d9"
fsck_rc 0 -n -f

echo "== 3. the root's inode-table block destroyed"
fresh
first=$(tool ino f0) || fail "ino"
tool zero-itable
repair
grep -q "root directory was gone: recreated" "$work/fsck.y" || fail "no word of the root"
kept=0
for ((i = 0; i < N; i++)); do
	if (($(tool ino "f$i" 2>/dev/null || echo 0) > 0)); then
		same $i "$work/d$i"
		kept=$((kept + 1))
	fi
done
# inodes 0..14 shared the destroyed block: f0 (inode $first) .. f$((14 - first))
((kept == N - (15 - first))) || fail "$kept files came back, expected $((N - (15 - first)))"
"$G" import array after "$work/d1" --image "$img" --raw >/dev/null || fail "write after repair"
"$G" stat "$img" >/dev/null || fail "stat after repair"
fsck_rc 0 -n -f

echo "== 4. an N-D space's superblock corrupted"
fresh
"$G" nd create s --shape 64,64 --dtype u8 --image "$img" >/dev/null || fail "nd create"
"$G" nd create t --shape 32,32 --dtype u8 --image "$img" >/dev/null || fail "nd create"
tool nd-flip s
repair
grep -q "superblock is corrupt: space removed" "$work/fsck.y" || fail "no word of the space"
"$G" nd info s --image "$img" >/dev/null 2>&1 && fail "the broken space is still there"
"$G" nd info t --image "$img" >/dev/null || fail "the intact space is gone"
for ((i = 0; i < N; i++)); do same $i "$work/d$i"; done

echo "fsck_repair: all repaired, every check after a repair clean"
