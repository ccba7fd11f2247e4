#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# The gstore CLI: mkfs (and mkfs.gstore), fsck (and fsck.gstore), stat,
# import/export of raw and .npy arrays on an unmounted image and through a
# mount; clear errors and non-zero exits on bad input.
# timeout: 120
. "$(dirname "$0")/../helpers/gsmount.sh"
gs_init 512M
$PY -c 'import numpy' 2>/dev/null || skip "python3-numpy missing"
G=$GSTORE
# status WANT CMD...: exit status must be WANT
status() {
	local want=$1 rc
	shift
	"$@" >"$T/out" 2>&1
	rc=$?
	[[ $rc == "$want" ]] || { cat "$T/out"; fail "'$*' exited $rc, want $want"; }
}

# ---- mkfs
[[ $(stat -c %s "$IMG") == $((512 << 20)) ]] || fail "image size"
status 1 "$G" mkfs "$IMG"
grep -q -- --force "$T/out" || fail "mkfs over an image does not mention --force"
status 0 "$G" mkfs --force --size 512M "$IMG"
status 0 "$T/bin/mkfs.gstore" --size 64M "$T/img2"
[[ $(stat -c %s "$T/img2") == $((64 << 20)) ]] || fail "mkfs.gstore did not create the file"
status 2 "$G" mkfs --size 12Q "$T/img3"
status 2 "$G" mkfs --block-size 1000 "$T/img3"
status 2 "$G" mkfs
status 2 "$G" nosuchcommand
ok mkfs

# ---- fsck, stat
status 0 "$G" fsck -n "$IMG"
status 0 "$T/bin/fsck.gstore" -n -f "$T/img2"
status 8 "$G" fsck -n "$T/nonexistent"
dd if=/dev/urandom of="$T/junk" bs=1M count=8 status=none
status 8 "$G" fsck -n "$T/junk"
status 0 "$G" stat "$IMG"
grep -q . "$T/out" || fail "stat printed nothing"
status 1 "$G" stat "$T/junk"
status 1 "$G" stat "$T/nonexistent"
ok "fsck/stat"

# ---- import/export on the unmounted image
$PY - "$T" <<'PYEOF'
import numpy as np, sys
t = sys.argv[1]
np.save(t + "/m.npy", np.arange(12, dtype=np.float32).reshape(3, 4))
np.save(t + "/v.npy", np.arange(3_000_000, dtype=np.int64))
np.save(t + "/f.npy", np.asfortranarray(np.ones((3, 4))))
np.arange(1000, dtype=np.uint16).tofile(t + "/raw.bin")
PYEOF
status 0 "$G" import array m "$T/m.npy" --image "$IMG"
status 0 "$G" import array v "$T/v.npy" --image "$IMG"
status 0 "$G" import array r "$T/raw.bin" --image "$IMG" --dtype uint16 --shape 10,100
status 0 "$G" import array b "$T/raw.bin" --image "$IMG"
status 1 "$G" import array m "$T/m.npy" --image "$IMG"
grep -q exists "$T/out" || fail "import over an existing array: $(cat "$T/out")"
status 0 "$G" import array m "$T/m.npy" --image "$IMG" --force
status 0 "$G" import array z "$T/m.npy" --image "$IMG"
status 0 "$G" import array z "$T/raw.bin" --image "$IMG" --force	# raw: the old type goes
status 0 "$G" export array z "$T/z.npy" --npy --image "$IMG"
[[ $($PY -c "import numpy as np,sys; a=np.load(sys.argv[1]); print(a.dtype, a.shape)" \
	"$T/z.npy") == "uint8 (2000,)" ]] || fail "a replaced array kept its old dtype/shape"
status 1 "$G" import array f "$T/f.npy" --image "$IMG"
head -c 1000 "$T/v.npy" >"$T/trunc.npy"
status 1 "$G" import array t "$T/trunc.npy" --image "$IMG"
status 1 "$G" import array x "$T/raw.bin" --image "$IMG" --shape 7,7
status 1 "$G" import array x "$T/raw.bin" --image "$IMG" --dtype nosuchtype
status 2 "$G" import array a/b "$T/m.npy" --image "$IMG"
status 2 "$G" import nosuchkind g "$T/m.npy" --image "$IMG"
status 1 "$G" import array x "$T/nonexistent" --image "$IMG"
status 1 "$G" export array nosuch "$T/o" --image "$IMG"
status 0 "$G" export array m "$T/m2.npy" --npy --image "$IMG"
status 0 "$G" export array v "$T/v2.npy" --npy --image "$IMG"
status 0 "$G" export array r "$T/r2.npy" --npy --image "$IMG"
status 0 "$G" export array b "$T/b.raw" --image "$IMG"
cmp "$T/raw.bin" "$T/b.raw" || fail "raw export differs"
$PY - "$T" <<'PYEOF' || fail "exported .npy differ"
import numpy as np, sys
t = sys.argv[1]
a = np.load(t + "/m2.npy"); assert a.dtype == np.float32 and a.shape == (3, 4), a
assert (a == np.arange(12, dtype=np.float32).reshape(3, 4)).all()
v = np.load(t + "/v2.npy"); assert (v == np.arange(3_000_000)).all()
r = np.load(t + "/r2.npy"); assert r.dtype == np.uint16 and r.shape == (10, 100)
assert (r.ravel() == np.arange(1000)).all()
PYEOF
status 0 "$G" fsck -n "$IMG"
ok "import/export on an image"

# ---- through a mount
gs_mount
A=$MNT/arrays
[[ $(ls "$A" | sort | tr '\n' ' ') == "b m r v z " ]] || fail "arrays: $(ls "$A")"
$PY - "$A" <<'PYEOF' || fail "numpy through the mount"
import numpy as np, os, sys
a = sys.argv[1]
dt = os.getxattr(a + "/m", "user.gstore.dtype").decode()
shape = tuple(int(x) for x in os.getxattr(a + "/m", "user.gstore.shape").decode().split(","))
assert (dt, shape) == ("float32", (3, 4)), (dt, shape)
m = np.fromfile(a + "/m", dtype=dt).reshape(shape)
assert (m == np.arange(12, dtype=np.float32).reshape(3, 4)).all()
mm = np.memmap(a + "/v", dtype=np.int64, mode="r")
assert mm[2_999_999] == 2_999_999
PYEOF
status 0 "$G" import array m3 "$T/m.npy" --mount "$MNT"
status 0 "$G" import array m4 "$T/m.npy" --image "$IMG"	# mounted: goes through the mount
grep -q "using the mount" "$T/out" || fail "import --image of a mounted image"
[[ -f $A/m4 ]] || fail "m4 not visible in the mount"
status 0 "$G" export array m4 "$T/m4.npy" --npy --mount "$MNT"
cmp <($PY -c "import numpy as np,sys; print(np.load(sys.argv[1]).tolist())" "$T/m4.npy") \
    <($PY -c "import numpy as np,sys; print(np.load(sys.argv[1]).tolist())" "$T/m.npy") ||
	fail "export through the mount"
status 0 "$G" stat "$MNT"
status 0 "$G" stat "$IMG"
grep -q "mount:" "$T/out" || fail "stat of a mounted image does not use the mount"
status 1 "$G" mkfs --force "$IMG"
grep -q mounted "$T/out" || fail "mkfs of a mounted image: $(cat "$T/out")"
status 8 "$G" fsck -n "$IMG"
gs_umount
status 0 "$G" fsck -n "$IMG"
ok "CLI through a mount"
