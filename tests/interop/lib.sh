# shellcheck shell=bash
# Shared helpers for the interop tests: unmodified rdma-core programs run
# against softrdma's drop-in libibverbs.so.1.
#
# Usage in a test script:
#   source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
#   sr_init <test-name> "$@"      # "$@" may be "cma0": run with SOFTRDMA_CMA=0
#
# Environment:
#   SOFTRDMA_TEST_LIB_DIR  directory holding softrdma's libibverbs.so.1
#                          (ctest passes it; default: <repo>/build/lib)
#   SR_TIMEOUT             seconds allowed to every client/server command (60)
#
# Only the programs under test get LD_LIBRARY_PATH (see sr_run); bash and the
# helpers here run on the system libraries.
#
# Exit codes: 0 pass, 1 fail, 77 skip (a tool is missing and cannot be installed).

# shellcheck source=../../scripts/lib/procs.sh
source "$(dirname "${BASH_SOURCE[0]}")/../../scripts/lib/procs.sh"

SR_TIMEOUT=${SR_TIMEOUT:-60}
SR_DEVICE=softrdma0
SR_LOOPBACK_GID=::ffff:127.0.0.1
SR_SKIP=77
# The pingpong program sr_start_server / sr_pingpong run (ibv_uc_pingpong,
# ibv_ud_pingpong and ibv_srq_pingpong take the same options and print the
# same lines as ibv_rc_pingpong).
SR_PINGPONG=${SR_PINGPONG:-ibv_rc_pingpong}

SR_PIDS=()     # process groups we started (timeout's PID == its process group)
SR_TMP=""
SR_NS=""

sr_log() { printf '%s: %s\n' "${SR_NAME:-interop}" "$*"; }
sr_fail() {
  printf '%s: FAIL: %s\n' "${SR_NAME:-interop}" "$*" >&2
  exit 1
}
sr_skip() {
  printf '%s: SKIP: %s\n' "${SR_NAME:-interop}" "$*"
  exit "$SR_SKIP"
}

# sr_init NAME [cma0|roce|inherit]: tests run the default data path unless
# given "cma0" (the two-copy path: SOFTRDMA_CMA=0 SOFTRDMA_MAP_MR=0) or "roce"
# (the RoCEv2 wire between the two local processes, UDP over the loopback:
# SOFTRDMA_WIRE=roce; each process prints its RoCE counters at exit, which
# sr_expect_roce_traffic checks); "inherit" keeps SOFTRDMA_CMA,
# SOFTRDMA_MAP_MR and SOFTRDMA_WIRE from the environment.
# Removes what runs killed before their cleanup left in /dev/shm (ctest's
# timeout kills with SIGKILL, which no trap sees): this user's objects of
# namespaces t<pid>-* whose script no longer runs. ~15 MB of tmpfs each.
sr_remove_dead_runs() {
  local f pid
  for f in /dev/shm/softrdma-t[0-9]*; do
    [[ -O $f ]] || continue
    pid=${f#/dev/shm/softrdma-t}
    pid=${pid%%-*}
    [[ $pid =~ ^[0-9]+$ ]] || continue
    kill -0 "$pid" 2>/dev/null || rm -f -- "$f"
  done
}

sr_init() {
  sr_remove_dead_runs
  SR_NAME=$1
  shift
  SR_VARIANT=${1:-}
  case "$SR_VARIANT" in
    "") unset SOFTRDMA_CMA SOFTRDMA_MAP_MR SOFTRDMA_WIRE ;;
    inherit) ;;
    cma0)
      unset SOFTRDMA_WIRE
      export SOFTRDMA_CMA=0 SOFTRDMA_MAP_MR=0
      SR_NAME="$SR_NAME-cma0"
      ;;
    roce)
      unset SOFTRDMA_CMA SOFTRDMA_MAP_MR
      export SOFTRDMA_WIRE=roce SOFTRDMA_ROCE_STATS=1
      SR_NAME="$SR_NAME-roce"
      ;;
    *) sr_fail "unknown variant '$1' (expected nothing, 'cma0' or 'roce')" ;;
  esac

  local here
  here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
  SR_LIB_DIR=${SOFTRDMA_TEST_LIB_DIR:-$here/../../build/lib}
  [[ -e "$SR_LIB_DIR/libibverbs.so.1" ]] ||
    sr_fail "no libibverbs.so.1 in '$SR_LIB_DIR': build softrdma first (bash scripts/build.sh)"
  SR_LIB_DIR=$(cd "$SR_LIB_DIR" && pwd)

  SR_NS="t$$-$SR_NAME"
  export SOFTRDMA_NAMESPACE=$SR_NS
  SR_TMP=$(mktemp -d "${TMPDIR:-/tmp}/softrdma-$SR_NAME.XXXXXX")
  trap sr_cleanup EXIT
  trap 'exit 130' INT
  trap 'exit 143' TERM

  sr_log "namespace $SR_NS, library $SR_LIB_DIR, data path:" \
    "$([[ -n "${SOFTRDMA_CMA:-}" ]] && echo "SOFTRDMA_CMA=$SOFTRDMA_CMA" || echo default)" \
    "$([[ -n "${SOFTRDMA_MAP_MR:-}" ]] && echo "SOFTRDMA_MAP_MR=$SOFTRDMA_MAP_MR")" \
    "$([[ -n "${SOFTRDMA_WIRE:-}" ]] && echo "SOFTRDMA_WIRE=$SOFTRDMA_WIRE")"
}

# sr_expect_roce_traffic: with the "roce" variant, both sides' outputs
# (SR_SERVER_OUT, SR_CLIENT_OUT) must show RoCE packets sent and received
# (SOFTRDMA_ROCE_STATS' line at exit): the data did not go over shared
# memory. Nothing to check otherwise.
sr_expect_roce_traffic() {
  [[ "${SR_VARIANT:-}" == roce ]] || return 0
  local side f line tx rx
  for side in server client; do
    if [[ $side == server ]]; then f=$SR_SERVER_OUT; else f=$SR_CLIENT_OUT; fi
    line=$(grep -E 'softrdma\[[0-9]+\] roce: ' "$f" | tail -n 1 || true)
    [[ -n "$line" ]] || sr_fail "$side printed no RoCE counters (SOFTRDMA_ROCE_STATS=1)"
    tx=$(sed -nE 's/.* tx_packets=([0-9]+).*/\1/p' <<<"$line")
    rx=$(sed -nE 's/.* rx_packets=([0-9]+).*/\1/p' <<<"$line")
    ((${tx:-0} > 0 && ${rx:-0} > 0)) ||
      sr_fail "$side sent $tx and received $rx RoCE packets: not over the RoCE wire"
    sr_log "$side over RoCE: $line"
  done
}

# Stop whatever we started (by the process groups we created), then remove the
# namespace's shared-memory objects and our temp files. Runs on every exit.
sr_cleanup() {
  local rc=$? pid alive=()
  trap - EXIT
  for pid in "${SR_PIDS[@]}"; do
    if sr_alive "$pid"; then
      kill -TERM -- "-$pid" 2>/dev/null || kill -TERM "$pid" 2>/dev/null || true
      alive+=("$pid")
    fi
  done
  if ((${#alive[@]})); then
    sleep 1
    for pid in "${alive[@]}"; do
      kill -KILL -- "-$pid" 2>/dev/null || true
    done
  fi
  for pid in "${SR_PIDS[@]}"; do
    wait "$pid" 2>/dev/null || true
  done
  if [[ -n "$SR_NS" ]]; then
    rm -f -- /dev/shm/softrdma-"$SR_NS"-*
  fi
  if [[ -n "$SR_TMP" ]]; then
    rm -rf -- "$SR_TMP"
  fi
  exit "$rc"
}

# sr_need_tool TOOL DEBIAN_PACKAGE: install the package if the tool is missing
# and we are root with apt-get; otherwise skip the test.
sr_need_tool() {
  local tool=$1 pkg=$2
  command -v "$tool" >/dev/null 2>&1 && return 0
  if [[ "$(id -u)" -eq 0 ]] && command -v apt-get >/dev/null 2>&1; then
    sr_log "$tool missing: apt-get install -y $pkg"
    DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \
      -o DPkg::Lock::Timeout=300 "$pkg" ||
      { apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y \
          --no-install-recommends -o DPkg::Lock::Timeout=300 "$pkg"; } || true
    command -v "$tool" >/dev/null 2>&1 && return 0
  fi
  sr_skip "$tool not found and Debian package '$pkg' cannot be installed here" \
    "(needs root and apt-get); install it with: apt-get install $pkg"
}

# sr_run CMD ARGS...: run a program under test against softrdma, with a
# deadline (SIGTERM after SR_TIMEOUT seconds, SIGKILL 5 s later).
sr_run() {
  timeout -k 5 "$SR_TIMEOUT" env LD_LIBRARY_PATH="$SR_LIB_DIR" "$@" </dev/null
}

# sr_run_ok OUTFILE CMD ARGS...: sr_run, output to OUTFILE and shown; fail
# unless the program exits 0.
sr_run_ok() {
  local out=$1 rc=0
  shift
  sr_run "$@" >"$out" 2>&1 || rc=$?
  sed 's/^/  | /' "$out"
  ((rc == 0)) || sr_fail "$* exited with $rc"
}

# sr_start OUTFILE CMD ARGS...: like sr_run, in the background; sets
# SR_LAST_PID to the PID of `timeout`, which puts itself and the program in a
# new process group whose id is that PID (so sr_kill_group reaches both).
sr_start() {
  local out=$1
  shift
  timeout -k 5 "$SR_TIMEOUT" env LD_LIBRARY_PATH="$SR_LIB_DIR" "$@" </dev/null >"$out" 2>&1 &
  SR_LAST_PID=$!
  SR_PIDS+=("$SR_LAST_PID")
}

# sr_wait PID: wait for a process we started; sets SR_RC to its exit code and
# forgets the PID (it may be reused once reaped).
sr_wait() {
  local p keep=()
  SR_RC=0
  wait "$1" || SR_RC=$?
  for p in "${SR_PIDS[@]}"; do
    [[ "$p" == "$1" ]] || keep+=("$p")
  done
  SR_PIDS=("${keep[@]}")
}

# sr_kill_group PID SIGNAL: signal a process group we started (by its PID).
sr_kill_group() {
  kill "-$2" -- "-$1" 2>/dev/null || true
}

# sr_alive PID: the process exists and is not a zombie.
sr_alive() { proc_alive "$1"; }

# sr_stat_field PID INDEX: field of /proc/PID/stat counted from the state
# field (index 0 = field 3 "state"; 1 = ppid; 11 = utime; 12 = stime).
sr_stat_field() {
  local stat fields
  read -r stat 2>/dev/null <"/proc/$1/stat" || return 1
  read -r -a fields <<<"${stat##*) }"
  printf '%s\n' "${fields[$2]}"
}

# sr_child_of PID: the PID of the (single) child of PID, i.e. the program that
# our `timeout` wrapper runs. Scans /proc, no procps needed.
sr_child_of() {
  local d ppid
  for d in /proc/[0-9]*; do
    ppid=$(sr_stat_field "${d#/proc/}" 1) || continue
    if [[ "$ppid" == "$1" ]]; then
      printf '%s\n' "${d#/proc/}"
      return 0
    fi
  done
  return 1
}

# sr_free_port: set SR_PORT to a TCP port nobody uses now.
sr_free_port() {
  SR_PORT=$(free_port) || sr_fail "no free TCP port found"
}

# sr_gid_index: set SR_GID to the index of the ::ffff:127.0.0.1 GID of
# softrdma0's port 1, parsed from `ibv_devinfo -v` (RoCE v2 preferred).
sr_gid_index() {
  local out="$SR_TMP/devinfo-gid.txt" idx
  sr_need_tool ibv_devinfo ibverbs-utils
  sr_run ibv_devinfo -v -d "$SR_DEVICE" -i 1 >"$out" 2>&1 ||
    { cat "$out" >&2; sr_fail "ibv_devinfo -v exited non-zero"; }
  idx=$(sr_first "$out" '^[[:space:]]*GID\[ *([0-9]+)\]:[[:space:]]*::ffff:127\.0\.0\.1, RoCE v2[[:space:]]*$')
  [[ -n "$idx" ]] ||
    idx=$(sr_first "$out" '^[[:space:]]*GID\[ *([0-9]+)\]:[[:space:]]*::ffff:127\.0\.0\.1([,[:space:]].*)?$')
  [[ -n "$idx" ]] || { cat "$out" >&2; sr_fail "no $SR_LOOPBACK_GID GID in ibv_devinfo -v output"; }
  SR_GID=$idx
  sr_log "GID index of $SR_LOOPBACK_GID: $SR_GID"
}

# sr_start_server OUTFILE [ibv_rc_pingpong options...]: start an
# ibv_rc_pingpong server on a free port and wait (20 s deadline) until it
# listens. Sets SR_PORT, SR_SERVER_OUT and SR_SERVER_PID (the timeout
# wrapper's PID).
sr_start_server() {
  local out=$1 attempt deadline
  shift
  SR_SERVER_OUT=$out
  sr_need_tool "$SR_PINGPONG" ibverbs-utils
  for attempt in 1 2 3; do
    sr_free_port
    sr_start "$out" "$SR_PINGPONG" -d "$SR_DEVICE" -p "$SR_PORT" "$@"
    SR_SERVER_PID=$SR_LAST_PID
    deadline=$((SECONDS + 20))
    while ((SECONDS < deadline)); do
      if port_in_use "$SR_PORT" listen; then
        sr_log "server listening on port $SR_PORT: $SR_PINGPONG -d $SR_DEVICE -p $SR_PORT $*"
        return 0
      fi
      sr_alive "$SR_SERVER_PID" || break
      sleep 0.1
    done
    if sr_alive "$SR_SERVER_PID"; then
      sr_kill_group "$SR_SERVER_PID" KILL
      sr_wait "$SR_SERVER_PID"
      cat "$out" >&2
      sr_fail "server did not listen on port $SR_PORT within 20 s"
    fi
    sr_wait "$SR_SERVER_PID"
    if grep -q "Couldn't listen to port" "$out" && ((attempt < 3)); then
      sr_log "port $SR_PORT was taken, retrying on another port"
      continue
    fi
    cat "$out" >&2
    sr_fail "server exited (code $SR_RC) before listening on port $SR_PORT"
  done
}

# sr_pingpong [ibv_rc_pingpong options...]: one server and one client on this
# host with the same options. Sets SR_SERVER_RC, SR_CLIENT_RC and the output
# files SR_SERVER_OUT, SR_CLIENT_OUT; prints both outputs. Never fails itself
# once the server listens.
sr_pingpong() {
  SR_SERVER_OUT="$SR_TMP/server.out"
  sr_start_server "$SR_SERVER_OUT" "$@"
  sr_pingpong_client "$@"
}

# sr_pingpong_client [options...]: the client half of sr_pingpong, against the
# server that sr_start_server started (output in SR_SERVER_OUT).
sr_pingpong_client() {
  SR_CLIENT_OUT="$SR_TMP/client.out"
  sr_start "$SR_CLIENT_OUT" "$SR_PINGPONG" -d "$SR_DEVICE" -p "$SR_PORT" "$@" 127.0.0.1
  sr_wait "$SR_LAST_PID"
  SR_CLIENT_RC=$SR_RC
  if ((SR_CLIENT_RC != 0)); then
    # The server may still wait for a peer that will never come: give it a
    # moment to finish on its own, then stop it.
    local deadline=$((SECONDS + 5))
    while sr_alive "$SR_SERVER_PID" && ((SECONDS < deadline)); do sleep 0.1; done
    sr_kill_group "$SR_SERVER_PID" TERM
  fi
  sr_wait "$SR_SERVER_PID"
  SR_SERVER_RC=$SR_RC
  sr_show_pair_outputs
}

# Logs both sides' exit codes (SR_SERVER_RC, SR_CLIENT_RC) and outputs.
sr_show_pair_outputs() {
  sr_log "server exit code $SR_SERVER_RC; output:"
  sed 's/^/  server| /' "$SR_SERVER_OUT"
  sr_log "client exit code $SR_CLIENT_RC; output:"
  sed 's/^/  client| /' "$SR_CLIENT_OUT"
}

# sr_first FILE ERE: the first group \1 of the first line of FILE matching ERE.
sr_first() {
  local m
  m=$(sed -nE "s|$2|\\1|p" "$1")
  printf '%s\n' "${m%%$'\n'*}"
}

# sr_qpn FILE local|remote: QPN printed on ibv_rc_pingpong's address line.
sr_qpn() {
  sr_first "$1" "^ *$2 address: .*QPN (0x[0-9a-fA-F]+),.*"
}

# sr_expect_transfer SIZE ITERS: both sides exited 0, each reports the
# transfer ("<2*SIZE*ITERS> bytes in ..." and "<ITERS> iters in ..."), used the
# loopback GID, and each side's remote QPN is the other side's local QPN.
sr_expect_transfer() {
  local size=$1 iters=$2 bytes side f sq cq q
  bytes=$((size * iters * 2))
  ((SR_SERVER_RC == 0)) || sr_fail "server exited with $SR_SERVER_RC"
  ((SR_CLIENT_RC == 0)) || sr_fail "client exited with $SR_CLIENT_RC"
  for side in server client; do
    if [[ $side == server ]]; then f=$SR_SERVER_OUT; else f=$SR_CLIENT_OUT; fi
    grep -Eq "^$bytes bytes in [0-9][0-9.]* seconds = [^ ]+ Mbit/sec$" "$f" ||
      sr_fail "$side does not report '$bytes bytes in ... seconds'"
    grep -Eq "^$iters iters in [0-9][0-9.]* seconds = [^ ]+ usec/iter$" "$f" ||
      sr_fail "$side does not report '$iters iters in ... seconds'"
    grep -Eq "^ *local address: .*GID $SR_LOOPBACK_GID$" "$f" ||
      sr_fail "$side did not use GID $SR_LOOPBACK_GID"
  done
  sq=$(sr_qpn "$SR_SERVER_OUT" local)
  cq=$(sr_qpn "$SR_CLIENT_OUT" local)
  [[ -n "$sq" && -n "$cq" ]] || sr_fail "missing local QPN line"
  [[ "$sq" != "$cq" ]] || sr_fail "server and client share QPN $sq"
  for q in "$sq" "$cq"; do
    ((q > 1)) || sr_fail "QPN $q is reserved (0 and 1 are QP0/QP1)"
  done
  [[ "$(sr_qpn "$SR_SERVER_OUT" remote)" == "$cq" ]] || sr_fail "server's remote QPN is not the client's QPN $cq"
  [[ "$(sr_qpn "$SR_CLIENT_OUT" remote)" == "$sq" ]] || sr_fail "client's remote QPN is not the server's QPN $sq"
  sr_expect_roce_traffic
  sr_log "PASS: $bytes bytes / $iters iterations each way, QPN $sq <-> $cq"
}

# sr_shm_files: the namespace's shared-memory objects, one per line.
sr_shm_files() {
  local f
  for f in /dev/shm/softrdma-"$SR_NS"-*; do
    [[ -e "$f" ]] && printf '%s\n' "$f"
  done
  return 0
}

# sr_expect_only_registry "FILES": the list (one per line, from sr_shm_files)
# is empty or a single host-registry object (its name contains "registry").
sr_expect_only_registry() {
  local f registries=0 extra=()
  while IFS= read -r f; do
    [[ -n "$f" ]] || continue
    if [[ "${f##*/}" == *registry* ]]; then
      registries=$((registries + 1))
    else
      extra+=("$f")
    fi
  done <<<"$1"
  ((${#extra[@]} == 0)) || sr_fail "left behind besides the registry: ${extra[*]}"
  ((registries <= 1)) || sr_fail "more than one registry object: $1"
}

# sr_server_segment: SR_SEGMENT = the one process segment of the namespace
# (the server's, when only a server runs).
sr_server_segment() {
  SR_SEGMENT=$(sr_shm_files | grep -- '-proc-' || true)
  [[ -n "$SR_SEGMENT" && "$SR_SEGMENT" != *$'\n'* ]] ||
    sr_fail "expected one process segment of the server, found: ${SR_SEGMENT:-(none)}"
}

# sr_expect_one_softrdma_line FILE TEXT...: FILE holds exactly one line from
# softrdma ("softrdma[<pid>] ..."), and FILE contains each TEXT.
sr_expect_one_softrdma_line() {
  local file=$1 lines part
  shift
  lines=$(grep -c '^softrdma\[' "$file" || true)
  ((lines == 1)) || { cat "$file" >&2; sr_fail "$lines lines from softrdma in $file, expected one"; }
  for part in "$@"; do
    grep -qF -- "$part" "$file" || { cat "$file" >&2; sr_fail "$file does not say '$part'"; }
  done
}
