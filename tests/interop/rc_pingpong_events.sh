#!/usr/bin/env bash
# ibv_rc_pingpong -e (sleep on completion events) with -g <loopback GID index>:
# both exit 0 and report the transfer.
# Argument "cma0": the same over the two-copy data path (SOFTRDMA_CMA=0).
set -euo pipefail
# shellcheck source-path=SCRIPTDIR source=lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
sr_init rc_pingpong_events "$@"
sr_need_tool ibv_rc_pingpong ibverbs-utils
sr_gid_index
sr_pingpong -g "$SR_GID" -e
sr_expect_transfer 4096 1000
