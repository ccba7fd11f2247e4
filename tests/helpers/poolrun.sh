# SPDX-License-Identifier: MIT
# Sourced by tests/integration/pool_*.sh: run a single-device harness on pools.
#
#   pool_harness SCRIPT WHAT POOL...   tests/integration/SCRIPT once per POOL
#                                      ("N LAYOUT SU", gsmount.sh's GS_POOL),
#                                      GS_CRASH_CYCLES (default 4) cycles each
pool_harness() {
	local script=$1 what=$2 pool
	shift 2
	for pool in "$@"; do
		GS_POOL=$pool GS_CRASH_CYCLES=${GS_CRASH_CYCLES:-4} \
			bash "$(dirname "${BASH_SOURCE[0]}")/../integration/$script" ||
			{ echo "FAIL: $what on a $pool pool" >&2; exit 1; }
		echo "ok: $what on a $pool pool"
	done
}
