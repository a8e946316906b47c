#!/usr/bin/env bash
# netns.three_hosts: three hosts on a bridge, each pair at once: a->b, b->c
# and c->a run unmodified ibv_rc_pingpong -s 4096 concurrently, so every host
# has two processes sharing UDP 4791 on its address (one group, SO_REUSEPORT)
# and datagrams the kernel gives to the wrong one are forwarded to the
# owner of their QPN. All three pairs must pass.
#   three_hosts.sh LIBDIR
source "$(dirname "$0")/lib.sh"
libdir=$1
command -v ibv_rc_pingpong >/dev/null 2>&1 || sr_skip "ibv_rc_pingpong is not installed (Debian: ibverbs-utils)"
sr_hosts_three

tcp_port=$((20000 + $$ % 20000))
servers=()
for server in b c a; do
  sr_on_bg "$server" env LD_LIBRARY_PATH="$libdir" timeout 60 ibv_rc_pingpong -g 0 -s 4096 -n 300 \
    -p $tcp_port >"$SR_DIR/server-$server.out" 2>&1
  servers+=("$SR_PID")
done
for server in b c a; do
  sr_wait_tcp_port "$server" $tcp_port
done
clients=()
declare -A target=([a]=b [b]=c [c]=a)
for client in a b c; do
  sr_on_bg "$client" env LD_LIBRARY_PATH="$libdir" timeout 60 ibv_rc_pingpong -g 0 -s 4096 -n 300 \
    -p $tcp_port "$(sr_ipv4 "${target[$client]}")" >"$SR_DIR/client-$client.out" 2>&1
  clients+=("$SR_PID")
done
failed=0
i=0
for client in a b c; do
  if ! sr_wait "${clients[$i]}"; then
    echo "client on $client -> ${target[$client]} failed:" >&2
    cat "$SR_DIR/client-$client.out" >&2
    failed=1
  else
    echo "ok: $client -> ${target[$client]}: $(grep 'iters in' "$SR_DIR/client-$client.out")"
  fi
  i=$((i + 1))
done
i=0
for server in b c a; do
  if ! sr_wait "${servers[$i]}"; then
    echo "server on $server failed:" >&2
    cat "$SR_DIR/server-$server.out" >&2
    failed=1
  fi
  i=$((i + 1))
done
((failed == 0)) || sr_fail "a pair failed"
echo "PASS"
