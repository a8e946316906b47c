#!/usr/bin/env bash
# udaddy (rdmacm-utils): UD QPs set up through rdma_cm's SIDR exchange
# (RDMA_PS_UDP, port 7174: udaddy has no option for the port, so this test
# alone keeps a fixed one) on 127.0.0.1. Server `udaddy`, client `udaddy -s
# 127.0.0.1`: both exit 0, report "data transfers complete", "test complete"
# and "return status 0".
set -euo pipefail
# shellcheck source-path=SCRIPTDIR source=cm_lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/cm_lib.sh"
sr_init udaddy_loopback "$@"
sr_need_tool udaddy rdmacm-utils
sr_cm_pair 7174 -- udaddy -- udaddy -s 127.0.0.1
sr_cm_expect_both_exit_0
for side in server client; do
  sr_cm_expect_line "$side" out '^data transfers complete$' "'data transfers complete'"
  sr_cm_expect_line "$side" out '^test complete$' "'test complete'"
  sr_cm_expect_line "$side" out '^return status 0$' "'return status 0'"
done
sr_log "PASS: udaddy over SIDR; client $SR_CLIENT_SECS s, server $SR_SERVER_SECS s"
