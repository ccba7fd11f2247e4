#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# gstorefs permissions: default_permissions makes the kernel enforce modes
# and ownership; another uid (nobody) gets EACCES/EPERM where it should.
# timeout: 60
. "$(dirname "$0")/../helpers/gsmount.sh"
gs_need_root "to run commands as another uid"
command -v setpriv >/dev/null || skip "no setpriv"
gs_init 256M
gs_mount
A=$MNT/arrays
as_nobody() { setpriv --reuid=65534 --regid=65534 --clear-groups "$@"; }
denied() {	# denied CMD...: must fail with "Permission denied" or "not permitted"
	local out
	out=$(as_nobody "$@" 2>&1) && fail "as nobody, '$*' succeeded"
	[[ $out == *"Permission denied"* || $out == *"not permitted"* ]] ||
		fail "as nobody, '$*': $out"
}

echo secret >"$A/s"
chmod 600 "$A/s"
echo public >"$A/p"
chmod 644 "$A/p"
mkdir -m 700 "$A/priv"
mkdir -m 777 "$A/open"

[[ $(as_nobody cat "$A/p") == public ]] || fail "nobody cannot read a 644 file"
denied cat "$A/s"
denied sh -c "echo x >>'$A/p'"
denied truncate -s 0 "$A/p"
denied ls "$A/priv"
denied touch "$A/priv/x"
denied chmod 666 "$A/p"
denied chown 65534 "$A/p"
denied rm "$A/p"	# arrays/ is not writable by nobody
as_nobody touch "$A/open/mine" || fail "nobody cannot create in a 777 dir"
[[ $(stat -c %u:%g "$A/open/mine") == 65534:65534 ]] || fail "owner of a new file: $(stat -c %u:%g "$A/open/mine")"
as_nobody chmod 600 "$A/open/mine" || fail "owner cannot chmod"
as_nobody sh -c "echo mine >'$A/open/mine'" || fail "owner cannot write"
chown 65534 "$A/p"
as_nobody sh -c "echo more >>'$A/p'" || fail "owner cannot append"
[[ $(cat "$A/p") == "public
more" ]] || fail "appended contents"
ok "permissions enforced for another uid"
gs_umount
