#!/usr/bin/env bash
# `fi_info -p verbs` (Debian's libfabric-bin) under `softrdma run` lists
# softrdma0 in the three endpoint types of libfabric's verbs provider: MSG
# (verbs RC over rdma_cm), RDM (ofi_rxm layered on it) and DGRAM (verbs UD,
# domain softrdma0-dgram), with an IPv4 source address for MSG (libfabric
# takes it from rdma_cm's view of the device).
set -euo pipefail
# shellcheck source-path=SCRIPTDIR source=../cli/cli_lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/../cli/cli_lib.sh"
cli_init libfabric_fi_info
sr_need_tool fi_info libfabric-bin
cli_need_run

out="$SR_TMP/fi_info.out"
rc=0
timeout -k 5 "$SR_TIMEOUT" "$SOFTRDMA_BIN" run -- fi_info -p verbs -v </dev/null >"$out" 2>&1 || rc=$?
((rc == 0)) || { cat "$out"; sr_fail "fi_info -p verbs -v exited with $rc (124: timed out)"; }

# One line per fi_info entry: provider, domain, endpoint type.
entries=$(awk '
  function flush() { if (prov != "") print prov, dom, type; prov = dom = type = "" }
  /^fi_info:/ { flush() }
  /^[[:space:]]*fi_domain_attr:/ { in_domain = 1 }
  /^[[:space:]]*name:/ && in_domain { dom = $2; in_domain = 0 }
  /^[[:space:]]*prov_name:/ { prov = $2 }
  /^[[:space:]]*type:[[:space:]]*FI_EP_/ { type = $2 }
  END { flush() }' "$out")
sr_log "entries (provider domain type):"
sed 's/^/  | /' <<<"$entries"
for want in "verbs softrdma0 FI_EP_MSG" "verbs;ofi_rxm softrdma0 FI_EP_RDM" \
  "verbs softrdma0-dgram FI_EP_DGRAM"; do
  grep -qxF "$want" <<<"$entries" || sr_fail "fi_info lists no '$want'"
done
grep -qE '^[[:space:]]*src_addr: fi_sockaddr_in://' "$out" ||
  sr_fail "no IPv4 source address (rdma_cm) in any entry"
sr_log "PASS: fi_info -p verbs lists softrdma0 as MSG, RDM and DGRAM"
