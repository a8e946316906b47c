#!/usr/bin/env bash
# ibv_rc_pingpong -s 65536 -n 1000 with -g <loopback GID index>: 64 KiB
# messages (bigger than the path MTU and any inline limit), both exit 0 and
# report the transfer.
# Argument "cma0": the same over the two-copy data path (SOFTRDMA_CMA=0).
set -euo pipefail
# shellcheck source-path=SCRIPTDIR source=lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
sr_init rc_pingpong_64k_1000 "$@"
sr_need_tool ibv_rc_pingpong ibverbs-utils
sr_gid_index
sr_pingpong -g "$SR_GID" -s 65536 -n 1000
sr_expect_transfer 65536 1000
