#!/usr/bin/env bash
# roce.icrc_tool: softrdma_roce_icrc against captures built from roce-wire.md's
# vectors and from our encoder (make_captures.cpp), and tshark reading our
# packets as InfiniBand over UDP 4791 with the opcodes and PSNs we sent and
# no malformed packet (skipped, with a message, when tshark is not installed).
#   roce_icrc_test.sh TOOL MAKE_CAPTURES
set -euo pipefail
tool=$1
make_captures=$2
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
"$make_captures" "$dir"

fail() {
  echo "FAIL: $*" >&2
  exit 1
}

# The four vectors (one of them a real NIC's packet) all check; the UDP
# datagram to port 9999 and the ARP frame are skipped.
out=$("$tool" "$dir/vectors.pcap") || fail "vectors.pcap: exit $?: $out"
echo "$out"
grep -qx '4 RoCEv2 packets: 4 ICRC ok, 0 bad ICRC, 0 malformed, 0 cut by the snap length; 2 other packets skipped' <<<"$out" ||
  fail "vectors.pcap summary"
grep -q '^5: 10.0.17.1:0 -> 10.0.18.1 CNP qp 0x000118 psn 0 ICRC 0x2a00fd82 ok$' <<<"$out" ||
  fail "vector D line"

out=$("$tool" -q "$dir/vectors_sll2.pcap") || fail "vectors_sll2.pcap: exit $?: $out"
grep -q '^4 RoCEv2 packets: 4 ICRC ok' <<<"$out" || fail "cooked capture summary: $out"

opcodes=$(wc -l <"$dir/opcodes.txt")
out=$("$tool" -q "$dir/opcodes.pcap") || fail "opcodes.pcap: exit $?: $out"
grep -qx "$opcodes RoCEv2 packets: $opcodes ICRC ok, 0 bad ICRC, 0 malformed, 0 cut by the snap length; 0 other packets skipped" <<<"$out" ||
  fail "opcodes.pcap summary: $out"

# A flipped payload bit, a packet cut by the snap length, no RoCE at all.
set +e
out=$("$tool" "$dir/corrupt.pcap"); rc=$?
set -e
[[ $rc -eq 1 ]] || fail "corrupt.pcap: exit $rc"
grep -q '^1: .*RC SEND Only .* BAD: ICRC 0xe26850d9 received' <<<"$out" || fail "corrupt line: $out"
grep -q '3 ICRC ok, 1 bad ICRC' <<<"$out" || fail "corrupt summary: $out"
set +e
out=$("$tool" "$dir/truncated.pcap"); rc=$?
set -e
[[ $rc -eq 1 ]] || fail "truncated.pcap: exit $rc"
grep -q '1 cut by the snap length' <<<"$out" || fail "truncated summary: $out"
set +e
"$tool" "$dir/no_roce.pcap" >/dev/null; rc=$?
"$tool" "$dir/missing.pcap" 2>/dev/null; rc_missing=$?
"$tool" 2>/dev/null; rc_usage=$?
set -e
[[ $rc -eq 1 ]] || fail "no_roce.pcap: exit $rc"
[[ $rc_missing -eq 2 ]] || fail "missing file: exit $rc_missing"
[[ $rc_usage -eq 2 ]] || fail "no argument: exit $rc_usage"

if ! command -v tshark >/dev/null 2>&1; then
  echo "SKIP tshark checks: tshark is not installed (Debian package tshark)"
  exit 0
fi
# The SEND payloads would be grabbed by the RPC-over-RDMA heuristic
# (roce-wire.md §9), so it is disabled.
tshark_read() { tshark -r "$1" --disable-protocol rpcordma "${@:2}" 2>/dev/null; }
# RD opcodes (0x40-0x54, never used on RoCE) are left out of the malformed
# check: Wireshark 4.0.17 shows every RD packet's RDETH and DETH 8 bytes after
# where rxe and the IBTA put them (right after the BTH), so those with few
# bytes behind the headers end in an exception there.
malformed=$(tshark_read "$dir/opcodes.pcap" \
  -Y '_ws.malformed && !(infiniband.bth.opcode >= 64 && infiniband.bth.opcode <= 84)' \
  -T fields -e frame.number)
[[ -z $malformed ]] || fail "tshark: malformed frames: $malformed"
malformed=$(tshark_read "$dir/vectors.pcap" -Y _ws.malformed -T fields -e frame.number)
[[ -z $malformed ]] || fail "tshark: malformed vector frames: $malformed"
decoded=$(tshark_read "$dir/opcodes.pcap" -T fields -E separator=' ' -e infiniband.bth.opcode \
  -e infiniband.bth.psn)
diff <(echo "$decoded") "$dir/opcodes.txt" || fail "tshark decodes other opcodes or PSNs"
udp=$(tshark_read "$dir/opcodes.pcap" -Y 'udp.dstport == 4791 && infiniband' -T fields \
  -e frame.number | wc -l)
[[ $udp -eq $opcodes ]] || fail "tshark: $udp of $opcodes frames decoded as InfiniBand over UDP 4791"
echo "tshark: $opcodes frames decoded as InfiniBand over UDP 4791, opcodes and PSNs as sent, none malformed"
echo "PASS"
