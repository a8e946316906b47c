#!/usr/bin/env bash
# UCX's ucx_info -d under softrdma run lists rc_verbs and ud_verbs on
# softrdma0:1 (UCX keeps an RDMA device only when /dev/infiniband/<node> is a
# character device it may read and write).
set -euo pipefail
# shellcheck source-path=SCRIPTDIR source=cli_lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/cli_lib.sh"
cli_init cli_run_ucx_info
sr_need_tool ucx_info ucx-utils
cli_need_run

out="$SR_TMP/out"
cli_run "$out" run ucx_info -d
((CLI_RC == 0)) || sr_fail "ucx_info -d exited with $CLI_RC"
pairs=$(awk '/# +Transport:/ {t=$3} /# +Device:/ {print t "@" $3}' "$out")
for transport in rc_verbs ud_verbs; do
  grep -qx "$transport@softrdma0:1" <<<"$pairs" || sr_fail "ucx_info -d lists no $transport on softrdma0:1"
done
sr_log "PASS: ucx_info -d lists rc_verbs and ud_verbs on softrdma0:1"
