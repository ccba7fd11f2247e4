#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# pjdfstest (POSIX filesystem conformance: chmod, chown, link, mkdir, mkfifo,
# mknod, open, rename, rmdir, symlink, truncate, unlink, utimensat, ...)
# against a gstorefs mount, in arrays/.  pjdfstest is no Debian package and
# the project does not carry its code: point PJDFSTEST_DIR at a checkout of
# it (github.com/pjd/pjdfstest); without one this test skips.  It is built
# here, in a copy, without autotools.  Every case must pass; none is left
# out (docs/POSIX.md lists what gstorefs does differently from other
# filesystems, none of which pjdfstest checks).
#   PJDFSTEST_DIR=~/src/pjdfstest TESTS_FILTER=pjdfstest make check
#   PJDFSTEST_TESTS="link symlink"   only these groups (default: all)
# timeout: 1200
. "$(dirname "$0")/../helpers/gsmount.sh"
[[ -n ${PJDFSTEST_DIR:-} ]] || skip "PJDFSTEST_DIR not set (a pjdfstest checkout)"
[[ -f $PJDFSTEST_DIR/pjdfstest.c && -d $PJDFSTEST_DIR/tests ]] ||
	skip "PJDFSTEST_DIR=$PJDFSTEST_DIR holds no pjdfstest"
gs_need_root "pjdfstest changes owners and makes device nodes"
command -v prove >/dev/null || skip "no prove (perl)"
command -v cc >/dev/null || skip "no C compiler"
gs_init 2G

# a private copy with the binary at its root, where tests/misc.sh looks
P=$T/pjdfstest
mkdir -p "$P"
cp -r "$PJDFSTEST_DIR/tests" "$PJDFSTEST_DIR/pjdfstest.c" "$P/"
cat >"$P/config.h" <<'EOF'
/* what pjdfstest's configure finds on Linux with glibc */
#define HAVE_SYS_SYSMACROS_H 1
#define HAVE_FACCESSAT 1
#define HAVE_FCHMODAT 1
#define HAVE_FCHOWNAT 1
#define HAVE_FSTATAT 1
#define HAVE_LINKAT 1
#define HAVE_MKDIRAT 1
#define HAVE_MKFIFOAT 1
#define HAVE_MKNODAT 1
#define HAVE_OPENAT 1
#define HAVE_POSIX_FALLOCATE 1
#define HAVE_READLINKAT 1
#define HAVE_RENAMEAT 1
#define HAVE_SYMLINKAT 1
#define HAVE_UNLINKAT 1
#define HAVE_UTIMENSAT 1
#define HAVE_STRUCT_STAT_ST_ATIM 1
#define HAVE_STRUCT_STAT_ST_CTIM 1
#define HAVE_STRUCT_STAT_ST_MTIM 1
EOF
cc -O2 -D_GNU_SOURCE -I"$P" -o "$P/pjdfstest" "$P/pjdfstest.c" >"$T/cc.log" 2>&1 ||
	{ cat "$T/cc.log"; fail "cannot build pjdfstest"; }

gs_mount
dirs=()
for g in ${PJDFSTEST_TESTS:-$(ls "$P/tests")}; do
	[[ -d $P/tests/$g ]] && dirs+=("$P/tests/$g")
done
[[ ${#dirs[@]} -gt 0 ]] || fail "no pjdfstest groups match '${PJDFSTEST_TESTS:-}'"
# the cases mostly wait out timestamps: four at a time
(cd "$MNT/arrays" && prove -j4 -r "${dirs[@]}") >"$T/prove.log" 2>&1
rc=$?
sed -n '/^Test Summary/,$p' "$T/prove.log"
tail -2 "$T/prove.log"
[[ $rc -eq 0 ]] || fail "pjdfstest failed (summary above)"
ok "pjdfstest: $(grep -Eo 'Tests=[0-9]+' "$T/prove.log" | tail -1) all pass"
gs_umount
"$GSTORE" fsck -n -f "$IMG" >"$T/fsck.log" 2>&1 || { cat "$T/fsck.log"; fail "fsck after pjdfstest"; }
ok "fsck clean after pjdfstest"
