#!/usr/bin/env bash
# netns.rc_transfer.*: our checksummed transfer (softrdma_rc_transfer) over
# RC between two hosts under one loss condition: every byte checked, every
# WQE completed once and in order on both sides (rc_transfer.cpp). The
# conditions: drop5 and drop10 (SOFTRDMA_ROCE_FAULT_SEND_DROP 5% / 10% on
# both hosts), dup_reorder_delay (5% duplicated and 5% reordered on send, 5%
# reordered and 5% delayed 2 ms on receive), nft_drop5 (nftables drops 5%
# of the UDP 4791 datagrams each host receives, ACKs and NAKs too). Nothing
# is spared: the program ends only when both sides have all their
# completions, so no ACK is left to be lost. Prints MB/s and both sides'
# transport counters (SOFTRDMA_ROCE_STATS). bench/roce_loss.sh runs 1 GiB.
#   rc_loss.sh LIBDIR PROGRAM CONDITION SIZE [TIMEOUT_S]
source "$(dirname "$0")/lib.sh"
libdir=$1 program=$2 condition=$3 size=$4 limit=${5:-150}
faults=()
case $condition in
  none) ;;
  drop5) faults=(SOFTRDMA_ROCE_FAULT_SEND_DROP=0.05) ;;
  drop10) faults=(SOFTRDMA_ROCE_FAULT_SEND_DROP=0.10) ;;
  dup_reorder_delay)
    faults=(SOFTRDMA_ROCE_FAULT_SEND_DUP=0.05 SOFTRDMA_ROCE_FAULT_SEND_REORDER=0.05
      SOFTRDMA_ROCE_FAULT_RECV_REORDER=0.05 SOFTRDMA_ROCE_FAULT_RECV_DELAY=0.05
      SOFTRDMA_ROCE_FAULT_DELAY_US=2000)
    ;;
  nft_drop5)
    command -v nft >/dev/null 2>&1 || sr_skip "nft is not installed (Debian: nftables)"
    ;;
  *) sr_fail "unknown condition $condition" ;;
esac
sr_hosts_two
if [[ $condition == nft_drop5 ]]; then
  for h in a b; do
    # The input hook: a drop in the output hook is no loss (sendmmsg
    # reports it and the datagram is sent again at once).
    sr_on "$h" nft -f - <<'NFT'
table inet softrdma_loss {
  chain in {
    type filter hook input priority 0; policy accept;
    udp dport 4791 numgen random mod 100 < 5 counter drop
  }
}
NFT
  done
fi

tcp_port=$((20000 + $$ % 20000))
common=(env LD_LIBRARY_PATH="$libdir" SOFTRDMA_ROCE_STATS=1 "${faults[@]}")
sr_on_bg b "${common[@]}" SOFTRDMA_ROCE_FAULT_SEED=21 timeout "$limit" \
  "$program" -p $tcp_port -s "$size" >"$SR_DIR/server.out" 2>&1
server=$SR_PID
sr_wait_tcp_port b $tcp_port
client_status=0 server_status=0
sr_on a "${common[@]}" SOFTRDMA_ROCE_FAULT_SEED=22 timeout "$limit" \
  "$program" -p $tcp_port -s "$size" "$(sr_ipv4 b)" >"$SR_DIR/client.out" 2>&1 || client_status=$?
sr_wait "$server" || server_status=$?
echo "--- client (host a):"
cat "$SR_DIR/client.out"
echo "--- server (host b):"
cat "$SR_DIR/server.out"
((client_status == 0 && server_status == 0)) ||
  sr_fail "$condition: client exit $client_status, server exit $server_status"
grep -q '^ok: ' "$SR_DIR/client.out" || sr_fail "$condition: the client printed no result"
grep -q '^ok: ' "$SR_DIR/server.out" || sr_fail "$condition: the server printed no result"
if [[ $condition == nft_drop5 ]]; then
  dropped=0
  for h in a b; do
    n=$(sr_on "$h" nft list table inet softrdma_loss | sed -n 's/.*counter packets \([0-9]*\).*/\1/p')
    echo "host $h: nftables dropped $n datagrams"
    dropped=$((dropped + n))
  done
  ((dropped > 0)) || sr_fail "nftables dropped nothing: the loss was not applied"
elif [[ $condition != none ]]; then
  grep -q 'retransmits=[1-9]' "$SR_DIR/client.out" || sr_fail "$condition: no retransmission: the faults were not applied"
fi
echo "PASS: $condition"
