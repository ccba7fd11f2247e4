#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Power-cut cycles on pools: the I/O-layer power-cut harness (fs_powercut.sh:
# a volatile write cache lost after N writes, dead=eio after the cut, crash
# writers, kill -9, remount, every acknowledged byte and name present, no
# foreign data, fsck -n clean) on a 2-member stripe pool and a 4-member
# stripe+mirror pool (16 KiB stripe unit, so requests cross members).  The
# members share one power domain (gs_q_fault(3) power=ID, added by the pool):
# the cut hits all of them at the same write, as on one machine.
# timeout: 400
. "$(dirname "$0")/../helpers/poolrun.sh"
pool_harness fs_powercut.sh "power-cut cycles" "2 stripe 16K" "4 stripe+mirror 16K"
