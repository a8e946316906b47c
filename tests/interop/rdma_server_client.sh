#!/usr/bin/env bash
# rdma_server / rdma_client (rdmacm-utils): the synchronous rdma_create_ep /
# rdma_get_request / rdma_accept path with the rdma_verbs.h helpers
# (rdma_post_send/recv, rdma_get_send/recv_comp) on 127.0.0.1, on a free port (sr_cm_free_port).
# Both exit 0 and print "<name>: end 0".
set -euo pipefail
# shellcheck source-path=SCRIPTDIR source=cm_lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/cm_lib.sh"
sr_init rdma_server_client "$@"
sr_need_tool rdma_server rdmacm-utils
sr_need_tool rdma_client rdmacm-utils
sr_cm_free_port
sr_cm_pair "$SR_CM_PORT" -- rdma_server -p "$SR_CM_PORT" -- rdma_client -s 127.0.0.1 -p "$SR_CM_PORT"
sr_cm_expect_both_exit_0
sr_cm_expect_line server out '^rdma_server: end 0$' "'rdma_server: end 0'"
sr_cm_expect_line client out '^rdma_client: end 0$' "'rdma_client: end 0'"
sr_log "PASS: rdma_server/rdma_client; client $SR_CLIENT_SECS s, server $SR_SERVER_SECS s"
