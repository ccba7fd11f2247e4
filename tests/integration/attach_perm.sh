#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Who may attach (fs/fuse/attach_srv.c): an ordinary user, created here,
# attaches to a root-mounted gstorefs and reads through a ring the files it
# may read (by the others' bits, and by a supplementary group), getting what
# `cat` of the mounted file gives; it is refused (EACCES) a file of another
# user with mode 0600, a file in a directory it may not search, and a write
# ring on a file it may only read; it writes its own file through a ring.
# Before this change only root and the daemon's own user could attach.
# timeout: 120
. "$(dirname "$0")/../helpers/gsmount.sh"
gs_need_root "to create a user and run a client as it"
for c in setpriv useradd userdel groupadd groupdel; do
	command -v $c >/dev/null || skip "no $c"
done
ATT=$GS_BUILD/tests/helpers/attach_client
[[ -x $ATT ]] || skip "build first (no $ATT)"
gs_init 256M
cp "$ATT" "$T/bin/" && ATT=$T/bin/attach_client

U=gsatt$$
G=gsattg$$
groupadd "$G" || fail "groupadd $G"
useradd -M -N -g nogroup -G "$G" -s /usr/sbin/nologin "$U" ||
	{ groupdel "$G"; fail "useradd $U"; }
att_cleanup() {
	userdel "$U" 2>/dev/null
	groupdel "$G" 2>/dev/null
	gs_cleanup
}
trap att_cleanup EXIT
uid=$(id -u "$U")
# the user's own credentials, supplementary groups included (as a login has them)
as_user() { setpriv --reuid="$uid" --regid="$(id -g "$U")" --init-groups "$@"; }
denied() {	# denied CMD...: must fail with EACCES
	local out
	out=$(as_user "$@" 2>&1) && fail "as $U, '$*' succeeded: $out"
	[[ $out == *"Permission denied"* ]] || fail "as $U, '$*': $out"
}

O=$T/out	# the user's own outputs
mkdir -m 700 "$O" && chown "$U" "$O"
gs_mount
A=$MNT/arrays
SOCK=$(dirname "$MNT")/.$(basename "$MNT").gstore.sock
[[ $(stat -c %a "$SOCK") == 666 ]] || fail "socket mode $(stat -c %a "$SOCK"), want 666"

head -c $((3 * 1048576 + 100)) /dev/urandom >"$A/pub"
chmod 644 "$A/pub"
head -c $((1048576 + 4096)) /dev/urandom >"$A/grp"
chgrp "$G" "$A/grp"
chmod 640 "$A/grp"
echo secret >"$A/secret"
chmod 600 "$A/secret"
mkdir -m 700 "$A/priv"
echo hidden >"$A/priv/f"
chmod 644 "$A/priv/f"
mkdir -m 777 "$A/udir"

# reads it may do: the ring's bytes are cat's bytes
as_user cat "$A/pub" >"$O/cat-pub" || fail "$U cannot cat pub"
as_user "$ATT" read "$A/pub" "$O/ring-pub" >/dev/null || fail "$U cannot read pub through a ring"
cmp "$O/cat-pub" "$O/ring-pub" || fail "ring read of pub differs from cat"
as_user "$ATT" read "$A/grp" "$O/ring-grp" >/dev/null ||
	fail "$U cannot read grp (group $G) through a ring"
cmp "$A/grp" "$O/ring-grp" || fail "ring read of grp differs from the file"
ok "$U (uid $uid) reads what it may read through rings, as cat does"

# and is refused the rest
denied "$ATT" open "$A/secret" r
denied "$ATT" openat "$MNT" arrays/priv/f r
denied "$ATT" open "$A/pub" w
denied "$ATT" write "$A/pub" "$O/ring-pub" 0
cmp "$A/pub" "$O/cat-pub" || fail "pub changed"
"$ATT" openat "$MNT" arrays/priv/f r >/dev/null || fail "root cannot open priv/f"
ok "EACCES for a 0600 file of root's, an unsearchable directory, a write ring on a read-only file"

# its own file, written through a ring
as_user sh -c "head -c 65536 /dev/zero >'$A/udir/mine'" || fail "$U cannot create a file"
head -c 8192 /dev/urandom >"$T/w"
chmod 644 "$T/w"
as_user "$ATT" write "$A/udir/mine" "$T/w" 2 >/dev/null || fail "$U cannot write its file"
{ head -c 8192 /dev/zero; cat "$T/w"; head -c $((65536 - 16384)) /dev/zero; } >"$T/want"
as_user cat "$A/udir/mine" >"$T/got" || fail "$U cannot cat its file"
cmp "$T/want" "$T/got" || fail "$U's ring write is not what cat shows"
ok "$U writes its own file through a ring"
gs_umount
