#!/usr/bin/env bash
# ibv_srq_pingpong (RC QPs sharing one SRQ): server and client
# with -g <loopback GID index>, default size (4096 bytes) and iterations
# (1000): both exit 0 and report the transfer.
# Argument "cma0": the same with SOFTRDMA_CMA=0.
set -euo pipefail
# shellcheck source-path=SCRIPTDIR source=lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
sr_init srq_pingpong_gid "$@"
SR_PINGPONG=ibv_srq_pingpong
sr_need_tool "$SR_PINGPONG" ibverbs-utils
sr_gid_index
sr_pingpong -g "$SR_GID"
sr_expect_transfer 4096 1000
