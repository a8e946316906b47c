#!/usr/bin/env bash
# netns.capture_rc_pingpong: a capture on host a's veth while unmodified
# ibv_rc_pingpong -s 65536 runs between two hosts over the RoCE wire reads in
# tshark as InfiniBand over UDP 4791 with no malformed packet: RC SEND
# FIRST/MIDDLE/LAST and ACKs, and in each direction the request PSNs in
# sequence (each the next new one, or an earlier one sent again: never a jump
# ahead) and all there; softrdma_roce_icrc finds every ICRC good. A message's
# packets leave in UDP GSO sends, which the veths segment before the capture
# point (gso_max_segs 1), as a NIC puts them on the wire: the kernel numbers
# the segments' IPv4 IDs 0, 1, 2..., so good ICRCs on packets with IDs other
# than 0 (required) show that the sender fixed each segment's ICRC for the
# ID it got. dumpcap gets a 64 MiB buffer (-B): with its default 2 MiB it
# dropped a few packets of a 64 KiB burst now and then (fresh-clone CI:
# "received/dropped 2632/8"), which read as a PSN jump. Skipped without
# tshark/dumpcap.
#   capture_rc_pingpong.sh LIBDIR ICRC_TOOL
source "$(dirname "$0")/lib.sh"
libdir=$1
icrc_tool=$2
for tool in tshark dumpcap ibv_rc_pingpong; do
  command -v "$tool" >/dev/null 2>&1 || sr_skip "$tool is not installed (Debian: tshark, ibverbs-utils)"
done
sr_hosts_two
ip -n "$(sr_netns a)" link set a0 gso_max_segs 1
ip -n "$(sr_netns b)" link set b0 gso_max_segs 1
capture=$SR_DIR/a0.pcap
sr_on_bg a dumpcap -q -i a0 -B 64 -P -f "udp port 4791" -w "$capture"
dumpcap_pid=$SR_PID
for ((i = 0; i < 100; i++)); do
  [[ -s $capture ]] && break
  sleep 0.05
done
[[ -s $capture ]] || sr_fail "dumpcap did not start capturing on a0"
sleep 0.2

iters=20
tcp_port=$((20000 + $$ % 20000))
sr_on_bg b env LD_LIBRARY_PATH="$libdir" timeout 30 ibv_rc_pingpong -g 0 -s 65536 -n $iters -p $tcp_port \
  >"$SR_DIR/server.out" 2>&1
server=$SR_PID
sr_wait_tcp_port b $tcp_port
sr_on a env LD_LIBRARY_PATH="$libdir" timeout 30 ibv_rc_pingpong -g 0 -s 65536 -n $iters -p $tcp_port \
  "$(sr_ipv4 b)" || sr_fail "ibv_rc_pingpong client"
sr_wait "$server" || sr_fail "ibv_rc_pingpong server: $(cat "$SR_DIR/server.out")"
sleep 0.3
kill -TERM "$dumpcap_pid"
sr_wait "$dumpcap_pid" || true

out=$("$icrc_tool" -q "$capture") || sr_fail "softrdma_roce_icrc: $out"
echo "$out"
grep -qE '^([0-9]+) RoCEv2 packets: \1 ICRC ok, 0 bad ICRC, 0 malformed, 0 cut by the snap length' <<<"$out" ||
  sr_fail "not every packet has a good ICRC"

tshark_read() { tshark -r "$capture" --disable-protocol rpcordma "$@" 2>/dev/null; }
ids=$(tshark_read -Y 'udp.dstport == 4791' -T fields -e ip.id | sort -u | wc -l)
((ids > 1)) || sr_fail "every packet has the same IPv4 ID: no GSO send was segmented"
echo "IPv4 IDs: $ids distinct (GSO segments), every ICRC good"
malformed=$(tshark_read -Y _ws.malformed -T fields -e frame.number)
[[ -z $malformed ]] || sr_fail "tshark: malformed frames: $malformed"
decoded=$(tshark_read -Y 'udp.dstport == 4791 && infiniband' -T fields -E separator=' ' \
  -e ip.src -e infiniband.bth.opcode -e infiniband.bth.psn)
total=$(tshark_read -Y 'udp.dstport == 4791' -T fields -e frame.number | wc -l)
[[ $(wc -l <<<"$decoded") -eq $total ]] || sr_fail "tshark decoded $(wc -l <<<"$decoded") of $total frames as InfiniBand"
# 65536 B at path MTU 1024 (ibv_rc_pingpong's default): FIRST, 62 MIDDLE, LAST per message.
for opcode in 0 1 2 17; do
  grep -q " $opcode " <<<"$decoded" || sr_fail "no packet of opcode $opcode (SEND FIRST/MIDDLE/LAST, ACK)"
done
expected_requests=$((2 * iters * 64))
# Each request PSN is the next new one or, after a loss (a busy host may
# overflow a socket buffer), an earlier one sent again (go-back-N): never a
# jump ahead; every PSN of the transfer appears.
for source in "$(sr_ipv4 a)" "$(sr_ipv4 b)"; do
  verdict=$(awk -v s="$source" '$1 == s && $2 <= 5 {
      if (n == 0) first = $3
      rel = ($3 - first + 16777216) % 16777216
      if (n > 0 && rel > top + 1) jumps++
      if (n == 0 || rel > top) top = rel
      if (!(rel in seen)) { seen[rel] = 1; distinct++ } else again++
      n++ }
    END { printf "%d %d %d", distinct, jumps, again }' <<<"$decoded")
  read -r distinct jumps again <<<"$verdict"
  ((jumps == 0)) || sr_fail "requests from $source: $jumps PSN jumps ahead"
  ((distinct == expected_requests / 2)) || sr_fail "requests from $source: $distinct PSNs, expected $((expected_requests / 2))"
  echo "requests from $source: $distinct PSNs in sequence, $again sent again"
done
echo "tshark: $total frames decoded as InfiniBand over UDP 4791 (SEND FIRST/MIDDLE/LAST, ACK), request PSNs in sequence each way, none malformed"
echo "PASS"
