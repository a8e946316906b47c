#!/usr/bin/env bash
# rping (rdmacm-utils) over rdma_cm on the host's own non-loopback IPv4
# address (the first in /proc/net/fib_trie's local table): server `rping -s -a
# <addr> -C 100`, client `rping -c -a <addr> -v -C 100`. Both exit 0; the
# client prints its 100 pings in order and both report the DISCONNECT event.
# Skips when the host has no IPv4 address besides 127.0.0.0/8.
set -euo pipefail
# shellcheck source-path=SCRIPTDIR source=cm_lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/cm_lib.sh"
sr_init rping_host_ipv4 "$@"
sr_need_tool rping rdmacm-utils
addr=$(sr_cm_host_ipv4) || sr_skip "this host has no IPv4 address outside 127.0.0.0/8"
sr_log "host IPv4 address: $addr"
sr_cm_rping "$addr"
