#!/usr/bin/env bash
# netns.udp_exchange: RoCEv2 packets through the real UDP port between two
# hosts (network namespaces on a veth pair, each with its own /dev/shm), over
# IPv4 and IPv6: softrdma_roce_probe sends RC SEND packets one at a time and
# in windows of 32 (sendmmsg; GSO over IPv6), of 8 B and 1024 B (the RoCE MTU
# of a 1500-byte link), and the other host acknowledges each; both check
# every ICRC and PSN.
#   udp_exchange.sh PROBE
source "$(dirname "$0")/lib.sh"
probe=$1
sr_hosts_two

run_pair() {  # family count size window
  local family=$1 count=$2 size=$3 window=$4 server client out
  if [[ $family == 4 ]]; then server=$(sr_ipv4 b) client=$(sr_ipv4 a); else server=$(sr_ipv6 b) client=$(sr_ipv6 a); fi
  sr_on_bg b "$probe" serve --bind "$server" --count "$count"
  local server_pid=$SR_PID
  sr_wait_udp_port b 4791
  out=$(sr_on a "$probe" ping --bind "$client" --to "$server" --count "$count" --size "$size" \
    --window "$window") || sr_fail "IPv$family ping of $count x $size B (window $window): $out"
  sr_wait "$server_pid" || sr_fail "IPv$family server of $count x $size B (window $window) failed"
  echo "IPv$family: $out"
}

for family in 4 6; do
  run_pair "$family" 200 8 1
  run_pair "$family" 2048 1024 32
done
echo "PASS"
