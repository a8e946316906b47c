#!/usr/bin/env bash
# rdma_xserver / rdma_xclient (rdmacm-utils) on 127.0.0.1, on a free port: the
# client sends one inline message that the server receives (rdma_create_ep,
# rdma_get_request, rdma_accept, rdma_get_recv_comp). Both exit 0 and print
# "<name>: end 0".
# Argument "xrc": with `-c x` on both sides, XRC: the server listens in
# RDMA_PS_IB with an XRC_RECV endpoint and an XRC SRQ whose number it returns
# in the accept's private data; the client connects an XRC_SEND QP and sends
# to that SRQ. Without it: RC (the programs' default).
set -euo pipefail
# shellcheck source-path=SCRIPTDIR source=cm_lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/cm_lib.sh"
mode=()
name=rdma_xserver_xclient
case "${1:-}" in
  "") ;;
  xrc) mode=(-c x) name=rdma_xserver_xclient-xrc ;;
  *) echo "usage: $0 [xrc]" >&2; exit 1 ;;
esac
sr_init "$name"
sr_need_tool rdma_xserver rdmacm-utils
sr_need_tool rdma_xclient rdmacm-utils
sr_cm_free_port
sr_cm_pair "$SR_CM_PORT" -- rdma_xserver -p "$SR_CM_PORT" "${mode[@]}" \
  -- rdma_xclient -s 127.0.0.1 -p "$SR_CM_PORT" "${mode[@]}"
sr_cm_expect_both_exit_0
sr_cm_expect_line server out '^rdma_xserver: end 0$' "'rdma_xserver: end 0'"
sr_cm_expect_line client out '^rdma_xclient: end 0$' "'rdma_xclient: end 0'"
sr_log "PASS: rdma_xserver/rdma_xclient ${mode[*]:-(RC)}; client $SR_CLIENT_SECS s, server $SR_SERVER_SECS s"
