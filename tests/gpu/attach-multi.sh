#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Two CUDA processes (t_attach) and shell `cat`s on one mounted gstore at once
# (run by run-all.sh with the mount up).
#
#   attach-multi.sh BUILD FILE SRC LOGDIR
#
# FILE is an array on the mount, a copy of SRC (mkimage's pattern).  Each
# t_attach process checks its own reads on the GPU and writes its own blocks
# at the file's end; three cats of FILE run meanwhile and must equal SRC
# below those blocks; afterwards the written blocks are checked through the
# mount (`t_attach check`).  Exit 0 if all agree.
set -u
B=$1 FILE=$2 SRC=$3 LOG=$4
size=$(stat -c %s "$SRC")
ncmp=$((size - 8 * 64 * 4096))	# t_attach writes only above this
pids=()
for id in 0 1; do
	"$B/t_attach" "$FILE" $id 32 128 8 >"$LOG/attach$id.log" 2>&1 &
	pids+=($!)
done
fail=0
# cats back to back while either process runs (at least 2), each compared
ncat=0 during=0
while ((ncat < 2)) || kill -0 "${pids[@]}" 2>/dev/null; do
	alive=$(ps -o pid= -p "${pids[0]},${pids[1]}" | wc -l)
	if ! cat "$FILE" | cmp -n $ncmp - "$SRC"; then
		echo "cat $ncat: differs from the source"
		fail=1
	fi
	((ncat++))
	((alive > 0)) && ((during++))
	((ncat >= 20)) && break
done
echo "$ncat cats of $size bytes, $during started while t_attach ran: $([[ $fail == 0 ]] && echo all equal)"
((during > 0)) || { echo "no cat overlapped the CUDA processes"; fail=1; }
for k in 0 1; do
	wait "${pids[$k]}" || { echo "t_attach $k failed"; fail=1; }
	grep -h "t_attach\[" "$LOG/attach$k.log"
done
"$B/t_attach" check "$FILE" 2 || fail=1
exit $fail
