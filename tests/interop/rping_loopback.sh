#!/usr/bin/env bash
# rping (rdmacm-utils) over rdma_cm on 127.0.0.1: server `rping -s -a
# 127.0.0.1 -C 100` (-C makes it exit after one client's 100 pings; without
# it the server loops forever), client `rping -c -a 127.0.0.1 -v -C 100`.
# Both exit 0; the client prints its 100 pings (rdma-ping-0 .. rdma-ping-99,
# in order) and both report the DISCONNECT event.
# Argument "cma0": the same over the two-copy data path (SOFTRDMA_CMA=0).
set -euo pipefail
# shellcheck source-path=SCRIPTDIR source=cm_lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/cm_lib.sh"
sr_init rping_loopback "$@"
sr_need_tool rping rdmacm-utils
sr_cm_rping 127.0.0.1
