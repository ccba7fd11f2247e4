#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# gstore nd create|info|import|export on an unmounted image and through a
# mount: .npy and raw in, .npy (numpy loads it) and raw out, slices and views,
# bad arguments refused.
# timeout: 120
. "$(dirname "$0")/../helpers/gsmount.sh"
"$PY" -c 'import numpy' 2>/dev/null || skip "python3-numpy is not installed"
gs_init 512M
nd() { "$GSTORE" nd "$@"; }

"$PY" - "$T" <<'PY' || fail "make inputs"
import sys, numpy as np
t = sys.argv[1]
rng = np.random.default_rng(5)
np.save(t + "/a.npy", rng.standard_normal((300, 200, 3)).astype("<f8"))
rng.integers(0, 1 << 15, (777, 513), dtype="<i2").tofile(t + "/b.raw")
PY

nd import a "$T/a.npy" --image "$IMG" || fail "import .npy"
nd import b "$T/b.raw" --shape 777x513 --dtype i16 --bb 64x32 --image "$IMG" || fail "import raw"
nd create c --shape 1000000x1000000 --dtype f32 --image "$IMG" || fail "create sparse"
nd import b "$T/b.raw" --shape 777x513 --dtype i16 --image "$IMG" 2>/dev/null && fail "import over b"
nd import z "$T/b.raw" --shape 777x512 --dtype i16 --image "$IMG" 2>/dev/null && fail "size mismatch"
nd create z --shape 4x0 --dtype f32 --image "$IMG" 2>/dev/null && fail "shape 4x0"
nd create z --shape 4 --dtype c16 --image "$IMG" 2>/dev/null && fail "dtype c16"
nd info b --image "$IMG" | grep -qx "block_shape 64x32" || fail "info: block shape"
nd info c --image "$IMG" | grep -qx "blocks_written 0" || fail "info: sparse"

nd export a "$T/a2.npy" --npy --image "$IMG" || fail "export .npy"
cmp -s "$T/a.npy" "$T/a2.npy" || fail "export .npy differs from the import"
nd export b - --image "$IMG" | cmp -s - "$T/b.raw" || fail "export raw to stdout"
nd export a "$T/s.npy" --npy --slice 5:50:3,7,1: --image "$IMG" || fail "export slice"
nd export a "$T/v.npy" --npy --as 600x300 --slice 100:130,10:290 --image "$IMG" || fail "export view"
nd export a "$T/x" --slice 0:301 --image "$IMG" 2>/dev/null && fail "slice out of range"
nd export a "$T/e.npy" --npy --slice 299,199,2 --image "$IMG" || fail "export an element"
"$PY" - "$T" <<'PY' || fail "exports vs numpy"
import sys, numpy as np
t = sys.argv[1]
a = np.load(t + "/a.npy")
s = np.load(t + "/s.npy")
v = np.load(t + "/v.npy")
assert s.dtype == a.dtype and s.shape == a[5:50:3, 7, 1:].shape, s.shape
assert (s == a[5:50:3, 7, 1:]).all()
assert (v == a.reshape(600, 300)[100:130, 10:290]).all()
e = np.load(t + "/e.npy")
assert e.shape == () and e == a[299, 199, 2], (e.shape, e)
PY
ok "image: import, info, export"

gs_mount
nd info a --mount "$MNT" | grep -qx "shape 300x200x3" || fail "info through the mount"
nd import m "$T/a.npy" --mount "$MNT" || fail "import through the mount"
nd export m "$T/m.npy" --npy --mount "$MNT" || fail "export through the mount"
cmp -s "$T/a.npy" "$T/m.npy" || fail "mount round trip"
cmp -s "$T/a.npy" "$MNT/nd/a/data.npy" || fail "nd/a/data.npy is not the imported file"
nd export a "$T/s2.npy" --npy --slice 5:50:3,7,1: --mount "$MNT" || fail "slice through the mount"
cmp -s "$T/s.npy" "$T/s2.npy" || fail "slice: image and mount differ"
gs_umount
"$GSTORE" fsck -n -f "$IMG" >/dev/null || fail fsck
ok "mount: import, info, export"
