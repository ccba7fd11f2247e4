#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# `make demo`: format a gstore image (./gstore.img, 4 GiB sparse) unless one is
# there, import two example arrays (a .npy made with numpy and a raw file),
# mount it at /mnt/gstore (./mnt when not root), show it, and say what to try.
# Running it again keeps the image and its data; only the examples are redone.
#
# Env: GSTORE_IMG (./gstore.img), GSTORE_MNT (/mnt/gstore), GSTORE_SIZE (4G), B (build)
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
B=${B:-build}
BIN=$ROOT/$B/bin
IMG=${GSTORE_IMG:-$ROOT/gstore.img}
SIZE=${GSTORE_SIZE:-4G}
EX=$ROOT/$B/demo

bold() { if [[ -t 1 ]]; then printf '\n\033[1m%s\033[0m\n' "$*"; else printf '\n%s\n' "$*"; fi; }
run() { printf '$ %s\n' "$*"; "$@"; }
die() { echo "demo: $*" >&2; exit 1; }

[[ -x $BIN/gstore && -x $BIN/gstorefs ]] || die "build first: make"
PY=
for p in /usr/bin/python3 python3; do
	if command -v "$p" >/dev/null && "$p" -c 'import numpy' 2>/dev/null; then
		PY=$p
		break
	fi
done
[[ -n $PY ]] || die "python3-numpy is missing: make deps"

# Where to mount: /mnt/gstore as root; ./mnt otherwise (creating /mnt/gstore
# needs root).  Without a usable /dev/fuse we can still format and import.
can_mount=1
if [[ -n ${GSTORE_MNT:-} ]]; then
	MNT=$GSTORE_MNT
elif [[ $(id -u) -eq 0 ]]; then
	MNT=/mnt/gstore
else
	MNT=$ROOT/mnt
	echo "demo: not root, so the mount point is $MNT instead of /mnt/gstore"
fi
if [[ ! -c /dev/fuse ]] || [[ ! -r /dev/fuse || ! -w /dev/fuse ]]; then
	can_mount=0
	echo "demo: /dev/fuse is not usable here: formatting and importing only, no mount"
fi

# A second run: unmount what the first one mounted, and let its daemon finish.
if mountpoint -q "$MNT" 2>/dev/null; then
	bold "Unmounting the previous demo mount"
	run fusermount3 -u "$MNT" || run umount "$MNT"
	for _ in $(seq 100); do
		"$BIN/gstore" stat "$IMG" >/dev/null 2>&1 && break
		sleep 0.1
	done
fi

bold "1. Format an image"
if [[ -e $IMG ]] && "$BIN/gstore" stat "$IMG" >/dev/null 2>&1; then
	echo "$IMG already holds a gstore filesystem: keeping it (delete it to start over)"
	run "$BIN/gstore" fsck -p "$IMG" || [[ $? -le 1 ]] || die "fsck found errors it could not fix"
else
	run "$BIN/gstore" mkfs --size "$SIZE" --force "$IMG"
fi

bold "2. Make example data and import it"
mkdir -p "$EX"
"$PY" - "$EX" <<'EOF'
import sys, numpy as np
ex = sys.argv[1]
rng = np.random.default_rng(42)
np.save(ex + "/matrix.npy", rng.standard_normal((1024, 1024), dtype=np.float32))
np.arange(1_000_000, dtype=np.int32).tofile(ex + "/ramp.raw")
# a small undirected graph (SNAP-style edge list) and a 3-D space
with open(ex + "/ring.txt", "w") as f:
    f.write("# a ring of 1000 vertices with chords\n")
    for v in range(1000):
        f.write(f"{v}\t{(v + 1) % 1000}\n")
        if v % 10 == 0:
            f.write(f"{v}\t{(v * 7 + 3) % 1000}\n")
np.save(ex + "/cube.npy", np.arange(64 * 64 * 64, dtype=np.float64).reshape(64, 64, 64))
EOF
run "$BIN/gstore" import array matrix "$EX/matrix.npy" --image "$IMG" --force
run "$BIN/gstore" import array ramp "$EX/ramp.raw" --image "$IMG" --force \
	--dtype int32 --shape 1000,1000
run "$BIN/gstore" import graph ring "$EX/ring.txt" --image "$IMG" --undirected --force
if ! "$BIN/gstore" nd info cube --image "$IMG" >/dev/null 2>&1; then
	run "$BIN/gstore" nd import cube "$EX/cube.npy" --image "$IMG"
fi

if [[ $can_mount == 0 ]]; then
	bold "Done (no mount here). Try: $BIN/gstore stat $IMG"
	exit 0
fi

bold "3. Mount it"
mkdir -p "$MNT"
run "$BIN/gstorefs" "$IMG" "$MNT"

bold "4. Look around"
run ls -l "$MNT" "$MNT/arrays"
run cat "$MNT/.gstore/info"
bold "5. Read an array with numpy, straight from the mount"
printf '$ %s\n' "python3: np.memmap('$MNT/arrays/matrix', dtype, shape) from its xattrs"
"$PY" - "$MNT/arrays/matrix" "$EX/matrix.npy" <<'EOF'
import os, sys, numpy as np
path, orig = sys.argv[1], sys.argv[2]
dtype = os.getxattr(path, "user.gstore.dtype").decode()
shape = tuple(int(x) for x in os.getxattr(path, "user.gstore.shape").decode().split(","))
a = np.memmap(path, dtype=dtype, mode="r", shape=shape)
print(f"user.gstore.dtype={dtype} user.gstore.shape={shape}")
print("a[:2, :4] =\n", a[:2, :4])
print("mean %.6f, equal to the original .npy: %s" % (a.mean(), bool((a == np.load(orig)).all())))
EOF

bold "6. A graph and an N-D space, as files"
run cat "$MNT/graph/ring/info"
run cat "$MNT/graph/ring/v10/neighbors.txt"
printf '$ %s\n' "python3: np.load('$MNT/nd/cube/slice/0:2,5:7,0:4.npy')"
"$PY" -c "import numpy as np; print(np.load('$MNT/nd/cube/slice/0:2,5:7,0:4.npy'))"

G="$BIN/gstore"
[[ $(command -v gstore 2>/dev/null) == "$BIN/gstore" ]] && G=gstore
cat <<EOF

Mounted $IMG at $MNT.  Things to try:
  ls -l $MNT/arrays                        arrays are ordinary files
  python3 -c "import numpy as np; print(np.memmap('$MNT/arrays/ramp', dtype='int32')[:10])"
  dd if=/dev/urandom of=$MNT/arrays/blob bs=1M count=256 conv=fsync
  watch -n1 cat $MNT/.gstore/stats         live counters (requests, bytes, cache, queues)
  $G stat $MNT
  $G import array NAME FILE.npy --mount $MNT
  $G export array matrix /tmp/matrix.npy --npy --mount $MNT
  cat $MNT/graph/ring/v123/neighbors.txt      a vertex's neighbours (one page read)
  $G graph bfs ring --image $IMG          (unmounted) BFS over the stored graph
  python3 -c "import numpy as np; print(np.load('$MNT/nd/cube/as/4096x64.npy').shape)"
  man -l $ROOT/man/man7/gstore.7           the overview (man pages: man/)
Unmount:  fusermount3 -u $MNT   (or: umount $MNT as root)
Check:    $G fsck -n $IMG        (once unmounted)
EOF
