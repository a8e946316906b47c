#!/usr/bin/env bash
# netns.rdma_cm.*: rdma_cm between two hosts (network namespaces on a veth
# pair, each with its own /dev/shm): the connection manager's messages go as
# UD SENDs to QP1 of the other host's address over the RoCE wire, the GSI
# forwarder of the receiving host hands them to the listener and to each
# side's CM (docs/design.md, "Other hosts: CM messages through QP1"), and the
# data over RC. Unmodified programs against the build's libraries:
#   rdma_cm.sh LIBDIR rping      rping -s on b, rping -c -v -C 20 on a: both exit 0,
#                                20 pings echoed intact, the server sees the disconnect
#   rdma_cm.sh LIBDIR TOOL ARGS  perftest TOOL -R ARGS, server on b: both exit 0,
#                                "Data ex. method : rdma_cm" and a result row
# Each side must say (SOFTRDMA_LOG=info) that a MAD reached it through QP1.
# Skips (77) without root (lib.sh).
source "$(dirname "$0")/lib.sh"
lib=$(cd "$1" && pwd)
shift
[[ -e "$lib/librdmacm.so.1" && -e "$lib/libibverbs.so.1" ]] || sr_fail "no libraries in '$lib'"
command -v "$1" >/dev/null 2>&1 ||
  sr_skip "$1 is not installed (Debian: $([[ $1 == rping ]] && echo rdmacm-utils || echo perftest))"
sr_hosts_two
export LD_LIBRARY_PATH=$lib SOFTRDMA_LOG=${SOFTRDMA_LOG:-info}
out=$SR_DIR

if [[ $1 == rping ]]; then
  count=20
  server=(rping -s -a "$(sr_ipv4 b)" -C "$count")
  client=(rping -c -a "$(sr_ipv4 b)" -v -C "$count")
else
  tool=$1
  shift
  server=("$tool" -d softrdma0 -R -p 18515 "$@")
  client=("$tool" -d softrdma0 -R -p 18515 "$@" "$(sr_ipv4 b)")
fi

sr_on_bg b timeout -k 2 60 "${server[@]}" >"$out/server.out" 2>"$out/server.err"
server_pid=$SR_PID
# The server is listening once its rdma_cm port's socket is bound.
for ((i = 0; i < 200; i++)); do
  sr_on b grep -q -- '-cm-0\(106\|111\)-' /proc/net/unix && break
  sleep 0.05
done
sleep 0.2
client_rc=0
sr_on a timeout -k 2 50 "${client[@]}" >"$out/client.out" 2>"$out/client.err" || client_rc=$?
server_rc=0
sr_wait "$server_pid" || server_rc=$?
for side in server client; do
  for f in out err; do sed "s/^/  $side std$f| /" "$out/$side.$f" | head -40; done
done
((client_rc == 0)) || sr_fail "client exited with $client_rc: ${client[*]}"
((server_rc == 0)) || sr_fail "server exited with $server_rc: ${server[*]}"
for side in server client; do
  grep -q 'cm: first MAD through QP1 (the GSI)' "$out/$side.err" ||
    sr_fail "the $side's CM got no MAD through QP1"
done
if [[ ${server[0]} == rping ]]; then
  got=$(grep -c '^ping data: rdma-ping-' "$out/client.out" || true)
  ((got == count)) || sr_fail "the client printed $got pings of $count"
  for ((n = 0; n < count; n++)); do
    grep -q "^ping data: rdma-ping-$n: " "$out/client.out" || sr_fail "ping $n missing"
  done
  grep -q '^server DISCONNECT EVENT' "$out/server.err" || sr_fail "the server saw no disconnect"
else
  for side in server client; do
    grep -Eq '^ *Data ex\. method *: *rdma_cm' "$out/$side.out" || sr_fail "$side: not rdma_cm"
  done
  grep -Eq '^[[:space:]]+[0-9]+[[:space:]]+[0-9]+[[:space:]]+[0-9.]+' "$out/client.out" ||
    sr_fail "the client's result table has no rows"
fi
echo "PASS: ${client[*]} from host a to host b"
