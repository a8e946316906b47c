#!/usr/bin/env bash
# netns.port_mtu: the port's active MTU follows the MTU of the interfaces the
# RoCE wire uses, as on a NIC (docs/design.md "The port's MTU"), between two
# hosts on a veth pair:
#   - links of MTU 1500, the wire on the veth's address only
#     (SOFTRDMA_ROCE_ADDRS): active_mtu 1024; ibv_ud_pingpong -s 1024 passes,
#     -s 2048 gets the tool's own refusal ("Requested size larger than port
#     MTU (1024)");
#   - the same with every address (lo's 65536 among them): active_mtu 4096,
#     and an RC QP with path MTU 4096 over the 1500-byte link sends
#     1024-byte packets (ibv_rc_pingpong -m 4096 --chk 64 KiB passes: no
#     datagram the kernel refuses with EMSGSIZE);
#   - links of MTU 9000, the wire on the veth only: active_mtu 4096.
#   port_mtu.sh LIBDIR
source "$(dirname "$0")/lib.sh"
libdir=$1
for tool in ibv_devinfo ibv_ud_pingpong ibv_rc_pingpong; do
  command -v "$tool" >/dev/null 2>&1 || sr_skip "$tool is not installed (Debian: ibverbs-utils)"
done
SR_MTU=1500
sr_hosts_two

# active_mtu HOST [ENV...]: the port's active MTU as ibv_devinfo prints it.
active_mtu() {
  local h=$1
  shift
  sr_on "$h" env LD_LIBRARY_PATH="$libdir" "$@" ibv_devinfo -v -d softrdma0 |
    awk '$1 == "active_mtu:" { print $2; exit }'
}
only_veth() { echo "SOFTRDMA_ROCE_ADDRS=$(sr_ipv4 "$1")"; }

tcp_port=$((20000 + $$ % 20000))
# pair NAME EXPECT PROGRAM ARGS...: server on b, client on a, each with the
# wire on its veth address only when WIRE_ONLY_VETH=1. EXPECT: pass, or the
# text the client must print when it refuses.
pair() {
  local name=$1 expect=$2
  shift 2
  tcp_port=$((tcp_port + 1))
  local env_a=() env_b=()
  if [[ ${WIRE_ONLY_VETH:-0} == 1 ]]; then
    env_a=("$(only_veth a)")
    env_b=("$(only_veth b)")
  fi
  sr_on_bg b env LD_LIBRARY_PATH="$libdir" "${env_b[@]}" timeout 30 "$@" -p "$tcp_port" \
    >"$SR_DIR/server.out" 2>&1
  local server=$SR_PID client_status=0 server_status=0
  if [[ $expect != pass ]]; then
    sleep 0.3  # the server refuses too, before it listens: nothing to wait for
    sr_on a env LD_LIBRARY_PATH="$libdir" "${env_a[@]}" timeout 30 "$@" -p "$tcp_port" \
      "$(sr_ipv4 b)" >"$SR_DIR/client.out" 2>&1 || client_status=$?
    sr_wait "$server" || server_status=$?
    ((client_status != 0)) || sr_fail "$name: the client passed, expected a refusal"
    grep -qF "$expect" "$SR_DIR/client.out" ||
      sr_fail "$name: expected '$expect', got: $(cat "$SR_DIR/client.out")"
    echo "ok: $name refused: $expect"
    return
  fi
  sr_wait_tcp_port b "$tcp_port"
  sr_on a env LD_LIBRARY_PATH="$libdir" "${env_a[@]}" timeout 30 "$@" -p "$tcp_port" "$(sr_ipv4 b)" \
    >"$SR_DIR/client.out" 2>&1 || client_status=$?
  sr_finish_pair "$name" "$client_status" "$server"
  echo "ok: $name: $(grep -E 'iters in' "$SR_DIR/client.out" | tail -1)"
}

# MTU 1500, the wire on the veth only: 1024, as a NIC on that link.
mtu=$(active_mtu a "$(only_veth a)")
[[ $mtu == 1024 ]] || sr_fail "link MTU 1500, wire on the veth: active_mtu '$mtu', expected 1024"
echo "ok: link MTU 1500, wire on the veth only: active_mtu $mtu"
WIRE_ONLY_VETH=1 pair "ibv_ud_pingpong -s 1024" pass ibv_ud_pingpong -g 0 -n 100 -s 1024
WIRE_ONLY_VETH=1 pair "ibv_ud_pingpong -s 2048" "Requested size larger than port MTU (1024)" \
  ibv_ud_pingpong -g 0 -n 100 -s 2048

# Every address: lo's among them, so 4096; an RC QP still fits its link.
mtu=$(active_mtu a)
[[ $mtu == 4096 ]] || sr_fail "link MTU 1500, wire on every address: active_mtu '$mtu', expected 4096"
echo "ok: link MTU 1500, wire on every address (lo too): active_mtu $mtu"
pair "ibv_rc_pingpong -m 4096 --chk -s 65536 over a 1500-byte link" pass \
  ibv_rc_pingpong -g 0 -m 4096 -n 50 -s 65536 --chk

# MTU 9000: 4096.
for h in a b; do ip -n "$(sr_netns "$h")" link set "${h}0" mtu 9000; done
mtu=$(active_mtu a "$(only_veth a)")
[[ $mtu == 4096 ]] || sr_fail "link MTU 9000, wire on the veth: active_mtu '$mtu', expected 4096"
echo "ok: link MTU 9000, wire on the veth only: active_mtu $mtu"
echo PASS
