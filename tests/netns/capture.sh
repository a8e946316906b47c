#!/usr/bin/env bash
# netns.capture: a capture on the veth of one host, taken while the other
# host acknowledges RoCEv2 packets sent through the real UDP port (IPv4 and
# IPv6, windows of 32: sendmmsg, GSO), reads in tshark as InfiniBand over
# UDP 4791 with the opcodes and PSN sequences sent and no malformed packet,
# and softrdma_roce_icrc finds every ICRC good (so the IPv4 ID on the wire is
# the 0 the ICRC was computed with). The veth segments GSO batches before
# the capture point (gso_max_segs 1), as a NIC puts them on the wire.
# Skipped without tshark/dumpcap (Debian: tshark).
#   capture.sh PROBE ICRC_TOOL
source "$(dirname "$0")/lib.sh"
probe=$1
icrc_tool=$2
for tool in tshark dumpcap; do
  command -v "$tool" >/dev/null 2>&1 || sr_skip "$tool is not installed (Debian package tshark)"
done
sr_hosts_two
ip -n "$(sr_netns a)" link set a0 gso_max_segs 1

capture=$SR_DIR/a0.pcap
sr_on_bg a dumpcap -q -i a0 -B 64 -P -f "udp port 4791" -w "$capture"
dumpcap_pid=$SR_PID
for ((i = 0; i < 100; i++)); do
  [[ -s $capture ]] && break
  sleep 0.05
done
[[ -s $capture ]] || sr_fail "dumpcap did not start capturing on a0"
sleep 0.2

count=300
for family in 4 6; do
  if [[ $family == 4 ]]; then server=$(sr_ipv4 b) client=$(sr_ipv4 a); else server=$(sr_ipv6 b) client=$(sr_ipv6 a); fi
  sr_on_bg b "$probe" serve --bind "$server" --count "$count"
  server_pid=$SR_PID
  sr_wait_udp_port b 4791
  sr_on a "$probe" ping --bind "$client" --to "$server" --count "$count" --size 1024 --window 32 ||
    sr_fail "IPv$family exchange"
  sr_wait "$server_pid" || sr_fail "IPv$family server"
done
sleep 0.3
kill -TERM "$dumpcap_pid"  # dumpcap ends its file cleanly
sr_wait "$dumpcap_pid" || true

packets=$((4 * count))
out=$("$icrc_tool" -q "$capture") || sr_fail "softrdma_roce_icrc: $out"
echo "$out"
grep -q "^$packets RoCEv2 packets: $packets ICRC ok, 0 bad ICRC, 0 malformed, 0 cut by the snap length" <<<"$out" ||
  sr_fail "expected $packets packets, all with a good ICRC"

tshark_read() { tshark -r "$capture" --disable-protocol rpcordma "$@" 2>/dev/null; }
malformed=$(tshark_read -Y _ws.malformed -T fields -e frame.number)
[[ -z $malformed ]] || sr_fail "tshark: malformed frames: $malformed"
decoded=$(tshark_read -Y 'udp.dstport == 4791 && infiniband' -T fields -E separator=' ' \
  -e ip.version -e infiniband.bth.opcode -e infiniband.bth.psn)
[[ $(wc -l <<<"$decoded") -eq $packets ]] || sr_fail "tshark decoded $(wc -l <<<"$decoded") of $packets frames as InfiniBand over UDP 4791"
# Per family and opcode (4 = RC SEND only, 17 = RC Acknowledge): PSNs 0..count-1 in order.
expected=$(seq 0 $((count - 1)))
for version in 4 6; do
  for opcode in 4 17; do
    psns=$(awk -v v="$version" -v o="$opcode" '$1 == v && $2 == o { print $3 }' <<<"$decoded")
    [[ $psns == "$expected" ]] || sr_fail "IPv$version opcode $opcode: PSNs not 0..$((count - 1)) in order"
  done
done
echo "tshark: $packets frames decoded as InfiniBand over UDP 4791 (RC SEND only and ACK, IPv4 and IPv6), PSNs in order, none malformed"
echo "PASS"
