#!/usr/bin/env bash
# ibv_ud_pingpong (UD: AHs, Q_Keys and the 40-byte GRH area): server and client
# with -g <loopback GID index>, default size (1024 bytes) and iterations
# (1000): both exit 0 and report the transfer.
# Argument "cma0": the same with SOFTRDMA_CMA=0.
set -euo pipefail
# shellcheck source-path=SCRIPTDIR source=lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
sr_init ud_pingpong_gid "$@"
SR_PINGPONG=ibv_ud_pingpong
sr_need_tool "$SR_PINGPONG" ibverbs-utils
sr_gid_index
sr_pingpong -g "$SR_GID"
sr_expect_transfer 1024 1000
