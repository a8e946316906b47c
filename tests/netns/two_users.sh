#!/usr/bin/env bash
# netns.two_users: two users on one host, as on a machine with a RoCE NIC.
# On a host of its own (a network namespace with its own /dev/shm), a
# process of root and one of uid 65534 (nobody), each with its own registry
# and QPN range, talk over the RoCEv2 wire through the host's address:
# unmodified ibv_rc_pingpong -g 0 --chk both ways (root server, nobody
# client, then the reverse) and ib_write_bw (both ways); rdma_cm between
# them: rping with its data checked and ib_send_lat -R, both ways (the CM's
# sockets are the host's, not per user); then
# softrdma_cross_user_probe, run as nobody against a root server, finds
# root's shared memory and process memory closed, a WRITE and a READ with a
# wrong rkey (and a WRITE past the MR) ending in REM_ACCESS_ERR, and only
# the rkey root handed out opening its buffer. Root only; skipped without
# setpriv or where nobody cannot read the build tree.
#   two_users.sh LIBDIR PROBE
source "$(dirname "$0")/lib.sh"
libdir=$1
probe=$2
for tool in ibv_rc_pingpong ib_write_bw ib_send_lat rping setpriv; do
  command -v "$tool" >/dev/null 2>&1 ||
    sr_skip "$tool is not installed (Debian: ibverbs-utils, perftest, rdmacm-utils, util-linux)"
done
as_nobody=(setpriv --reuid=65534 --regid=65534 --clear-groups)
"${as_nobody[@]}" test -r "$libdir/libibverbs.so.1" -a -x "$probe" ||
  sr_skip "uid 65534 cannot read the build tree ($libdir): build where every user can read"
sr_host_one
address=$(sr_ipv4 a)

tcp_port=$((20000 + $$ % 20000))
# pair NAME SERVER_USER CLIENT_USER PORT_OPTION PROGRAM ARGS...: both on host a;
# USER is root or nobody.
pair() {
  local name=$1 server_user=$2 client_user=$3 port_option=$4
  shift 4
  tcp_port=$((tcp_port + 1))
  local server_as=() client_as=()
  [[ $server_user == nobody ]] && server_as=("${as_nobody[@]}")
  [[ $client_user == nobody ]] && client_as=("${as_nobody[@]}")
  sr_on_bg a "${server_as[@]}" env LD_LIBRARY_PATH="$libdir" timeout 30 "$@" \
    "$port_option" "$tcp_port" >"$SR_DIR/server.out" 2>&1
  local server=$SR_PID client_status=0
  sr_wait_tcp_port a "$tcp_port"
  sr_on a "${client_as[@]}" env LD_LIBRARY_PATH="$libdir" timeout 30 "$@" \
    "$port_option" "$tcp_port" "$address" >"$SR_DIR/client.out" 2>&1 || client_status=$?
  sr_finish_pair "$name (server $server_user, client $client_user)" "$client_status" "$server"
  echo "ok: $name, server $server_user, client $client_user:" \
    "$(grep -E 'iters in|^ [0-9]+ +[0-9]+' "$SR_DIR/client.out" | tail -1)"
}

for users in "root nobody" "nobody root"; do
  read -r server_user client_user <<<"$users"
  pair "ibv_rc_pingpong -g 0 --chk" "$server_user" "$client_user" \
    -p ibv_rc_pingpong -g 0 -n 100 -s 4096 --chk
  # Each user's QPs are of its registry's range (slot = uid mod 127: root
  # 0x00xxxx, nobody 65534 -> slot 2, 0x04xxxx), as ibv_rc_pingpong prints.
  for side in server client; do
    user=${side}_user
    want=0x00
    [[ ${!user} == nobody ]] && want=0x04
    grep -q "local address: .*QPN $want" "$SR_DIR/$side.out" ||
      sr_fail "the $side (${!user}) has a QPN outside its range $want: $(grep 'local address' "$SR_DIR/$side.out")"
  done
  pair "ib_write_bw 64 KiB" "$server_user" "$client_user" \
    -p ib_write_bw -x 0 -s 65536 -n 200
done

# cm_pair NAME SERVER_USER CLIENT_USER: rdma_cm between the two users, the
# server bound to the host's address (no TCP port: it is ready once its
# rdma_cm port's socket is bound, /proc/net/unix); NAME is rping or
# ib_send_lat.
cm_pair() {
  local name=$1 server_user=$2 client_user=$3 server_as=() client_as=()
  [[ $server_user == nobody ]] && server_as=("${as_nobody[@]}")
  [[ $client_user == nobody ]] && client_as=("${as_nobody[@]}")
  local server_cmd client_cmd
  tcp_port=$((tcp_port + 1))
  if [[ $name == rping ]]; then
    server_cmd=(rping -s -a "$address" -p "$tcp_port" -C 10)
    client_cmd=(rping -c -a "$address" -p "$tcp_port" -C 10 -v)
  else
    server_cmd=(ib_send_lat -d softrdma0 -R -p "$tcp_port" -n 200)
    client_cmd=(ib_send_lat -d softrdma0 -R -p "$tcp_port" -n 200 "$address")
  fi
  sr_on_bg a "${server_as[@]}" env LD_LIBRARY_PATH="$libdir" timeout 30 "${server_cmd[@]}" \
    >"$SR_DIR/server.out" 2>&1
  local server=$SR_PID client_status=0 i
  for ((i = 0; i < 200; i++)); do
    sr_on a grep -q -- "-cm-0\(106\|111\)-$tcp_port\$" /proc/net/unix && break
    sleep 0.05
  done
  sr_on a "${client_as[@]}" env LD_LIBRARY_PATH="$libdir" timeout 30 "${client_cmd[@]}" \
    >"$SR_DIR/client.out" 2>&1 || client_status=$?
  sr_finish_pair "$name over rdma_cm (server $server_user, client $client_user)" \
    "$client_status" "$server"
  if [[ $name == rping ]]; then
    local got
    got=$(grep -c '^ping data: rdma-ping-' "$SR_DIR/client.out" || true)
    ((got == 10)) || sr_fail "rping: the client ($client_user) printed $got pings of 10"
  else
    grep -Eq '^ *Data ex\. method *: *rdma_cm' "$SR_DIR/client.out" ||
      sr_fail "ib_send_lat -R: not rdma_cm"
    grep -Eq '^[[:space:]]+[0-9]+[[:space:]]+[0-9]+[[:space:]]+[0-9.]+' "$SR_DIR/client.out" ||
      sr_fail "ib_send_lat -R: the client's result table has no rows"
  fi
  echo "ok: $name over rdma_cm, server $server_user, client $client_user"
}
for users in "root nobody" "nobody root"; do
  read -r server_user client_user <<<"$users"
  cm_pair rping "$server_user" "$client_user"
  cm_pair ib_send_lat "$server_user" "$client_user"
done

tcp_port=$((tcp_port + 1))
sr_on_bg a timeout 60 "$probe" server "$tcp_port" >"$SR_DIR/server.out" 2>&1
server=$SR_PID
sr_wait_tcp_port a "$tcp_port"
client_status=0 server_status=0
sr_on a "${as_nobody[@]}" env LD_LIBRARY_PATH="$libdir" timeout 60 "$probe" client "$address" \
  "$tcp_port" >"$SR_DIR/client.out" 2>&1 || client_status=$?
sr_wait "$server" || server_status=$?
sed 's/^/  nobody: /' "$SR_DIR/client.out"
sed 's/^/  root: /' "$SR_DIR/server.out"
((client_status == 0 && server_status == 0)) ||
  sr_fail "cross_user_probe: client (nobody) exit $client_status, server (root) exit $server_status"

# Both users' registries were made on this host's /dev/shm; they go with it
# (the trap unmounts it), and nothing of theirs may be left running.
sr_on a sh -c 'rm -f /dev/shm/softrdma-*'
echo "PASS"
