# SPDX-License-Identifier: MIT
# Sourced by tests/integration/fs_*.sh: a fresh image in a temp dir, mount /
# unmount / crash helpers, and cleanup in an EXIT trap.  Not a test itself.
#
#   gs_init [SIZE] [MKFS ARGS...]   temp dir $T, image $IMG (mkfs'ed), mount point $MNT
#                                   GS_POOL="N LAYOUT SU": a pool of N members of SIZE
#                                   ($T/m0.., $IMG is $T/m0) instead of one image
#   gs_mount [-o OPTS]              start gstorefs in the foreground (pid $GS_PID)
#   gs_umount                       unmount and wait for the daemon; fails if it failed
#   gs_detach                       unmount only: the daemon goes on exiting
#   gs_kill9                        kill -9 the daemon, detach the dead mount
#   gs_wait_exit                    a daemon mount(8) started for $IMG has exited
#   fail MSG / ok MSG / expect WANT CMD...
#
# GS_TRANSPORT (tests/run.sh sets it per leg of the test matrix): "fuse" mounts
# with -o uring=off, "uring" with -o uring=on (FUSE over io_uring; enables the
# fuse module's enable_uring as root, and skips where the kernel lacks it);
# unset: gstorefs's default (auto).
set -u
GS_BUILD=${GS_BUILD:-$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)/build}
GS_ROOT=${GS_ROOT:-$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)}
GSTORE=$GS_BUILD/bin/gstore
GSTOREFS=$GS_BUILD/bin/gstorefs
FSOPS=$GS_BUILD/tests/helpers/fsops
GS_PID=
GS_MOUNTED=0
GS_EVER_MOUNTED=0
GS_MNT_OPTS=
GS_URING_OPT=
# python3 with numpy (Debian's, not a pyenv shim without it)
PY=python3
for p in /usr/bin/python3 python3; do
	if command -v "$p" >/dev/null && "$p" -c 'import numpy' 2>/dev/null; then
		PY=$p
		break
	fi
done

fail() { echo "FAIL: $*" >&2; exit 1; }
skip() { echo "skip: $*"; exit 77; }
ok() { echo "ok: $*"; }

# expect WANT CMD...: CMD's stdout (trimmed) must be WANT
expect() {
	local want=$1 got
	shift
	got=$("$@" 2>&1) || true
	[[ $got == "$want" ]] || fail "$*: got '$got', want '$want'"
}

gs_need_fuse() {
	[[ -x $GSTOREFS && -x $GSTORE && -x $FSOPS ]] || skip "build first (no $GSTOREFS)"
	[[ -c /dev/fuse ]] || skip "no /dev/fuse"
	if [[ $(id -u) -ne 0 ]]; then
		[[ -r /dev/fuse && -w /dev/fuse ]] || skip "/dev/fuse not usable by $(id -un)"
		command -v fusermount3 >/dev/null || skip "no fusermount3 for a non-root mount"
	fi
}

# the FUSE transport of this leg (see the top)
gs_transport() {
	local p=/sys/module/fuse/parameters/enable_uring
	case ${GS_TRANSPORT:-} in
	"") ;;
	fuse) GS_URING_OPT=uring=off ;;
	uring)
		[[ -e $p ]] || skip "FUSE over io_uring: kernel $(uname -r) has none (CONFIG_FUSE_IO_URING)"
		if [[ $(cat $p) != Y ]]; then
			[[ $(id -u) -eq 0 ]] || skip "FUSE over io_uring: fuse.enable_uring is off, root may set it"
			echo 1 >$p 2>/dev/null || skip "FUSE over io_uring: cannot set fuse.enable_uring"
		fi
		GS_URING_OPT=uring=on ;;
	*) fail "GS_TRANSPORT=$GS_TRANSPORT: fuse or uring" ;;
	esac
}

gs_need_root() {
	[[ $(id -u) -eq 0 ]] || skip "needs root ($*)"
}

gs_cleanup() {
	if [[ $GS_MOUNTED == 1 ]]; then
		fusermount3 -u -z "$MNT" 2>/dev/null || umount -l "$MNT" 2>/dev/null
	fi
	if [[ -n $GS_PID ]] && kill -0 "$GS_PID" 2>/dev/null; then
		kill -9 "$GS_PID" 2>/dev/null
		wait "$GS_PID" 2>/dev/null
	fi
	[[ -n ${T:-} ]] && rm -rf "$T"
}

gs_init() {
	local size=${1:-1G}
	shift || true
	gs_need_fuse
	gs_transport
	T=$(mktemp -d "${GS_TMP:-${TMPDIR:-/tmp}}/gstore-test.XXXXXX")
	chmod 755 "$T"
	trap gs_cleanup EXIT
	IMG=$T/img
	MNT=$T/mnt
	mkdir -p "$MNT" "$T/bin"
	# Private copies: a rebuild of the shared build tree while a long test
	# runs must not pull the binaries out from under it.
	cp "$GSTORE" "$GSTOREFS" "$FSOPS" "$T/bin/" || fail "copy the binaries"
	GSTORE=$T/bin/gstore
	GSTOREFS=$T/bin/gstorefs
	FSOPS=$T/bin/fsops
	ln -s gstore "$T/bin/mkfs.gstore"
	ln -s gstore "$T/bin/fsck.gstore"
	if [[ -n ${GS_POOL:-} ]]; then
		local n layout su i
		read -r n layout su <<<"$GS_POOL"
		POOL_MEMBERS=()
		for ((i = 0; i < n; i++)); do POOL_MEMBERS+=("$T/m$i"); done
		IMG=$T/m0
		"$GSTORE" mkfs --size "$size" --layout "$layout" --stripe-unit "$su" "$@" \
			"${POOL_MEMBERS[@]}" >/dev/null || fail "mkfs of a $GS_POOL pool"
	else
		"$GSTORE" mkfs --size "$size" "$@" "$IMG" >/dev/null || fail "mkfs"
	fi
	# O_DIRECT on the image needs a file system that has it (not old tmpfs)
	if ! dd if=/dev/zero of="$T/odirect" bs=4096 count=1 oflag=direct status=none 2>/dev/null
	then
		GS_MNT_OPTS=buffered
	fi
	rm -f "$T/odirect"
}

# gs_try_mount [-o OPTS]: 0 when mounted, 1 when gstorefs gave up (its
# messages are in $T/gstorefs.log)
gs_try_mount() {
	local opts=$GS_MNT_OPTS i
	[[ -n $GS_URING_OPT ]] && opts=${opts:+$opts,}$GS_URING_OPT
	if [[ ${1:-} == -o ]]; then
		opts=${opts:+$opts,}$2
	fi
	: >"$T/gstorefs.log"
	"$GSTOREFS" -f "$IMG" "$MNT" ${opts:+-o "$opts"} 2>>"$T/gstorefs.log" &
	GS_PID=$!
	for ((i = 0; i < 200; i++)); do
		if [[ -f $MNT/.gstore/info ]]; then
			GS_MOUNTED=1
			return 0
		fi
		kill -0 "$GS_PID" 2>/dev/null || break
		sleep 0.05
	done
	kill -9 "$GS_PID" 2>/dev/null
	wait "$GS_PID" 2>/dev/null
	GS_PID=
	return 1
}

# gs_mount [-o OPTS]
gs_mount() {
	gs_try_mount "$@" && { GS_EVER_MOUNTED=1; return 0; }
	cat "$T/gstorefs.log" >&2
	# The first mount of a test failing in FUSE itself: this machine cannot mount
	if [[ $GS_EVER_MOUNTED == 0 ]] && grep -qiE "fuse: device not found|/dev/fuse|fusermount|\
operation not permitted|permission denied" "$T/gstorefs.log"; then
		skip "cannot mount FUSE here: $(grep -m1 -iE 'fuse|permi' "$T/gstorefs.log")"
	fi
	fail "gstorefs did not mount $IMG"
}

# gs_detach: the umount alone; the daemon ($GS_PID) goes on exiting
gs_detach() {
	local i
	for ((i = 0; i < 50; i++)); do
		fusermount3 -u "$MNT" 2>/dev/null && break
		sleep 0.1
	done
	[[ $i -lt 50 ]] || fail "cannot unmount $MNT"
	GS_MOUNTED=0
}

gs_umount() {
	local rc
	gs_detach
	wait "$GS_PID"
	rc=$?
	GS_PID=
	[[ $rc -eq 0 ]] || { cat "$T/gstorefs.log" >&2; fail "gstorefs exited $rc"; }
}

gs_kill9() {
	kill -9 "$GS_PID" 2>/dev/null
	wait "$GS_PID" 2>/dev/null
	GS_PID=
	fusermount3 -u -z "$MNT" 2>/dev/null || umount -l "$MNT"
	GS_MOUNTED=0
}

# gs_wait_exit: a daemon of $IMG started by mount(8) (no $GS_PID) has exited
# after the last umount (it writes back first)
gs_wait_exit() {
	local i
	for ((i = 0; i < 200; i++)); do
		pgrep -f -- "gstorefs.* $IMG( |$)" >/dev/null || return 0
		sleep 0.1
	done
	fail "the daemon of $IMG still runs after the last unmount"
}

# gs_alive: the daemon still runs and the mount answers
gs_alive() {
	kill -0 "$GS_PID" 2>/dev/null && [[ -f $MNT/.gstore/info ]]
}
