#!/usr/bin/env bash
# ibv_rc_pingpong --chk (the receiver checks every byte) at sizes below one
# packet, not a multiple of the MTU, one page and 64 KiB (64 packets of 1 KiB
# on the RoCE wire): both sides exit 0 and report the transfer each time.
# With -e (each process sleeps until its completion event): two processes
# that busy-poll at nice 19 next to nice-0 work were descheduled for longer
# than ibv_rc_pingpong's retry budget (8 x 67 ms) and ended in RETRY_EXC_ERR
# over the RoCE wire (1 run in 3 at load 11; 5/5 with -e). A busy-polled
# ibv_rc_pingpong is covered by rc_pingpong_gid.
# Argument: the data path variant (lib.sh sr_init: nothing, cma0 or roce).
set -euo pipefail
# shellcheck source-path=SCRIPTDIR source=lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
sr_init rc_pingpong_chk_sizes "$@"
sr_need_tool ibv_rc_pingpong ibverbs-utils
sr_gid_index
for size_iters in 1:100 1000:100 4096:100 65536:50; do
  size=${size_iters%:*}
  iters=${size_iters#*:}
  sr_pingpong -g "$SR_GID" -e --chk -s "$size" -n "$iters"
  sr_expect_transfer "$size" "$iters"
done
