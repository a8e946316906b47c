#!/usr/bin/env bash
# Issue 12's checksummed transfer at full size: softrdma_rc_transfer moves
# SIZE (default 1 GiB) over RC between two namespace hosts under each loss
# condition of tests/netns/rc_loss.sh (none, 5% and 10% injected drop,
# duplication + reordering + delay, nftables dropping 5% of UDP 4791), one
# run each, and prints one line per condition: MB/s and the client's
# retransmission counters. Needs root. Run under the bench lock
# (flock LOCKFILE ...); at 10% loss 1 GiB takes several minutes.
#   bench/roce_loss.sh BUILD_DIR [SIZE] [CONDITION...]
set -uo pipefail
build=$(cd "${1:-build}" && pwd)
size=${2:-1G}
shift 2 2>/dev/null || shift $#
conditions=("$@")
((${#conditions[@]})) || conditions=(none drop5 drop10 dup_reorder_delay nft_drop5)
here=$(dirname "$0")
printf '%-18s %8s %10s %12s %9s %10s %s\n' condition size "MB/s" tx_packets timeouts seq_naks status
for c in "${conditions[@]}"; do
  out=$(bash "$here/../tests/netns/rc_loss.sh" "$build/lib" "$build/bin/softrdma_rc_transfer" "$c" "$size" 1800 2>&1)
  status=$?
  client=$(sed -n '/^--- client/,/^--- server/p' <<<"$out")
  mbs=$(grep -o '[0-9.]* MB/s' <<<"$client" | cut -d' ' -f1)
  field() { grep -o "$1=[0-9]*" <<<"$client" | head -1 | cut -d= -f2; }
  printf '%-18s %8s %10s %12s %9s %10s %s\n' "$c" "$size" "${mbs:--}" "$(field tx_packets)" \
    "$(field timeouts)" "$(field seq_naks_received)" "$([[ $status == 0 ]] && echo ok || echo "FAIL($status)")"
  ((status == 0)) || tail -20 <<<"$out" >&2
done
