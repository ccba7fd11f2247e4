#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Run xfstests (fstests) against gstorefs mounts: FSTYP=fuse, subtype gstorefs,
# a test image and a scratch image, mounted by xfstests itself through
# `mount -t fuse.gstorefs IMAGE DIR` (mount.fuse3 runs gstorefs).  Not part of
# `make check`: `-g quick` takes about half an hour.
#
#   XFSTESTS_DIR=/path/to/built/xfstests bench/xfstests.sh [check args]
#
# Default arguments: -g quick.  Examples:
#   bench/xfstests.sh generic/035 generic/426
#   bench/xfstests.sh -g quick -x remount     # all but a group
# Needs root, /dev/fuse, a built gstore (make) and a built xfstests
# (its README: make; Debian packages xfsprogs xfslibs-dev libattr1-dev
# libacl1-dev libaio-dev uuid-dev attr acl bc psmisc).  The users and groups
# fsgqa and fsgqa2 and the user 123456-fsgqa, which some tests run as, are
# made if missing.
# The mounts have -o allow_dev,allow_suid (gstorefs(8)): device nodes and
# setuid bits work, as on the kernel's filesystems (the default nodev,nosuid
# fails generic/184, 306, 434 and 633; XFSTESTS_MOUNT_OPTIONS= replaces it).
# Results: $XFSTESTS_DIR/results/; docs/XFSTESTS.md has the last run, which
# tests do not run on gstorefs and why.
set -eu
ROOT=$(cd "$(dirname "$0")/.." && pwd)
B=${B:-$ROOT/build}
: "${XFSTESTS_DIR:?set XFSTESTS_DIR to a built xfstests tree}"
[[ -x $XFSTESTS_DIR/check ]] || { echo "no check in $XFSTESTS_DIR" >&2; exit 1; }
[[ $(id -u) -eq 0 ]] || { echo "xfstests needs root" >&2; exit 1; }
[[ -x $B/bin/gstorefs && -x $B/bin/gstore ]] || { echo "build gstore first (make)" >&2; exit 1; }
WORK=${XFSTESTS_WORK:-/tmp/gstore-xfstests}
SIZE=${XFSTESTS_SIZE:-4G}

# mount.fuse3 runs the daemon by name, with mount(8)'s safe PATH: the copy
# is linked from /usr/local/sbin for the run (and the link removed after)
mkdir -p "$WORK/bin" "$WORK/test" "$WORK/scratch"
cp "$B/bin/gstorefs" "$B/bin/gstore" "$WORK/bin/"
# xfstests checks that FSTYP=fuse mounts have type "fuse" (df -T); gstorefs
# mounts are "fuse.gstorefs" (the subtype): df on this run's PATH says "fuse"
cat >"$WORK/bin/df" <<EOF
#!/bin/sh
$(type -P df) "\$@" | sed 's/ fuse\.gstorefs / fuse /'
EOF
chmod +x "$WORK/bin/df"
export PATH=$WORK/bin:$PATH
LINK=/usr/local/sbin/gstorefs
if [[ -e $LINK && ! -L $LINK ]]; then
	echo "$LINK exists and is not our link: not replacing it" >&2
	exit 1
fi
ln -sf "$WORK/bin/gstorefs" "$LINK"
trap 'rm -f "$LINK"' EXIT

for g in fsgqa fsgqa2; do
	getent group "$g" >/dev/null || groupadd "$g"
	id "$g" >/dev/null 2>&1 || useradd -g "$g" -m "$g"
done
id 123456-fsgqa >/dev/null 2>&1 || useradd -g fsgqa -m 123456-fsgqa
for u in fsgqa fsgqa2 123456-fsgqa; do	# su warns about a missing home
	h=$(getent passwd "$u" | cut -d: -f6)
	[[ -d $h ]] || { mkdir -p "$h" && chown "$u" "$h"; }
done

for m in "$WORK/test" "$WORK/scratch"; do
	mountpoint -q "$m" && umount "$m"
done
for img in test scratch; do
	rm -f "$WORK/$img.img"
	"$WORK/bin/gstore" mkfs --size "$SIZE" "$WORK/$img.img" >/dev/null
done

# the test mount's too: with FUSE_MOUNT_OPTIONS alone, the test mount of a
# -g quick run, remounted between tests, once came back without them
OPTS=${XFSTESTS_MOUNT_OPTIONS--o allow_dev,allow_suid}
cat >"$XFSTESTS_DIR/local.config" <<EOF
# written by gstore's bench/xfstests.sh
export FSTYP=fuse
export FUSE_SUBTYP=.gstorefs
export TEST_DEV=$WORK/test.img
export TEST_DIR=$WORK/test
export SCRATCH_DEV=$WORK/scratch.img
export SCRATCH_MNT=$WORK/scratch
export FUSE_MOUNT_OPTIONS="$OPTS"
export TEST_FS_MOUNT_OPTS="$OPTS"
EOF

cd "$XFSTESTS_DIR"
[[ $# -gt 0 ]] || set -- -g quick
# generic/394 and 564 lower the file size limit and raise it again, which needs
# CAP_SYS_RESOURCE: where root lacks it (a sandbox's root), they fail on every
# filesystem, so they are left out, as xfstests leaves out a test whose needs are
# missing, and the reason printed (XFSTESTS_KEEP_ALL=1 runs them anyway)
EXCL=()
if [[ -z ${XFSTESTS_KEEP_ALL:-} ]] && ! bash -c 'ulimit -f 100 && ulimit -f unlimited' 2>/dev/null; then
	echo "xfstests.sh: not run: generic/394 generic/564: 'ulimit -f' cannot be raised" \
		"again here (root without CAP_SYS_RESOURCE)"
	EXCL=(-e "generic/394 generic/564")
fi
rc=0
./check "${EXCL[@]}" "$@" || rc=$?
for m in "$WORK/test" "$WORK/scratch"; do
	mountpoint -q "$m" && umount "$m"
done
echo
"$ROOT/bench/xfstests-summary.sh" "$XFSTESTS_DIR/results" || true
exit $rc
