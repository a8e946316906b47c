#!/usr/bin/env bash
# softrdma benchmark suite: one command, one machine, one go.
#
#   bench/run.sh [--quick] [--repeat N] [--out DIR] [--only LIST] [--lib DIR]
#
# Runs, each --repeat times:
#   perftest  unmodified perftest (ib_{send,write,read}_{lat,bw}, ib_atomic_{lat,bw}) over
#             softrdma's libibverbs.so.1, 8 B .. 4 MiB, unpinned and (target sizes) pinned
#             with `taskset -c 0` (server) / `taskset -c 1` (client)
#   ucx       ucx_perftest tag_lat / tag_bw with UCX_TLS=posix,cma (system UCX), same sizes
#   tcp       qperf tcp_lat / tcp_bw on loopback
#   limits    softrdma_bench_limits: memcpy by size, cross-core cache-line round trip,
#             process_vm_writev by size
#   idle      CPU used by an idle process holding a QP (ibv_rc_pingpong server waiting)
# then bench/report.py writes DIR/report.md and DIR/*.png. Raw outputs stay in DIR/raw,
# one row per measurement in DIR/runs.tsv. A failed measurement is a row with its error;
# the suite keeps going and exits 0 (a bench reports, it does not fail CI).
#
# Options:
#   --quick       smoke run: 3 sizes, short runs, --repeat 2 unless given
#   --repeat N    repetitions of every measurement (default 3)
#   --out DIR     results directory (default bench/results/<date>-<time>)
#   --only LIST   comma-separated subset of: perftest,ucx,tcp,limits,idle
#   --lib DIR     directory holding softrdma's libibverbs.so.1 (default build/lib;
#                 built with cmake when missing)
# Environment: BENCH_JOBS (build parallelism, default 2), BENCH_TIMEOUT (seconds per
# process; default 60, 30 with --quick). A perftest test that times out twice is skipped
# for the rest of the run (rows "skipped").
set -uo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(cd "$HERE/.." && pwd)
# shellcheck source=../scripts/lib/procs.sh
source "$ROOT/scripts/lib/procs.sh"

QUICK=0
REPEAT=""
OUT=""
ONLY="perftest,ucx,tcp,limits,idle"
LIB_DIR=""
usage() { sed -n '2,/^set -uo/p' "${BASH_SOURCE[0]}" | sed '$d; s/^# \{0,1\}//'; }
while (($#)); do
  case "$1" in
    --quick) QUICK=1 ;;
    --repeat) REPEAT=${2:?--repeat needs a number}; shift ;;
    --out) OUT=${2:?--out needs a directory}; shift ;;
    --only) ONLY=${2:?--only needs a list}; shift ;;
    --lib) LIB_DIR=${2:?--lib needs a directory}; shift ;;
    -h | --help) usage; exit 0 ;;
    *) echo "run.sh: unknown option '$1'" >&2; usage >&2; exit 2 ;;
  esac
  shift
done
[[ -z "$REPEAT" ]] && REPEAT=$((QUICK ? 2 : 3))
[[ "$REPEAT" =~ ^[1-9][0-9]*$ ]] || { echo "run.sh: --repeat must be a positive integer" >&2; exit 2; }
OUT=${OUT:-$ROOT/bench/results/$(date +%Y-%m-%d-%H%M%S)}
mkdir -p "$OUT/raw" || exit 1
OUT=$(cd "$OUT" && pwd)
RAW=$OUT/raw
TIMEOUT=${BENCH_TIMEOUT:-$((QUICK ? 30 : 60))}
want() { [[ ",$ONLY," == *",$1,"* ]]; }

# The log is committed with the results: the repository's path is written as <repo>.
log() {
  local msg=$*
  msg=${msg//"$ROOT"/<repo>}
  printf '[bench %s] %s\n' "$(date +%H:%M:%S)" "$msg" | tee -a "$OUT/run.log"
}

# ---------------------------------------------------------------- sizes, iterations
if ((QUICK)); then
  SIZES=(8 65536 1048576)
  lat_iters() { clamp $((16777216 / $1)) 20 2000; }
  bw_iters() { clamp $((134217728 / $1)) 20 20000; }
  QPERF_TIME=1
  IDLE_WINDOW=2
  LIMITS_ARGS=(--min-time 0.02 --rtt-iters 20000)
else
  SIZES=(8 64 512 4096 32768 65536 262144 1048576 4194304)
  lat_iters() { clamp $((268435456 / $1)) 200 20000; }
  bw_iters() { clamp $((4294967296 / $1)) 200 1000000; }
  QPERF_TIME=2
  IDLE_WINDOW=5
  LIMITS_ARGS=(--min-time 0.2 --rtt-iters 200000)
fi
clamp() {
  local v=$1
  ((v < $2)) && v=$2
  ((v > $3)) && v=$3
  echo "$v"
}
# Pinned runs: the sizes the targets are evaluated at.
PINNED_PERFTEST=("send_lat 8" "write_lat 8" "write_bw 8" "send_bw 65536" "write_bw 1048576" "read_bw 1048576")
PINNED_UCX=("tag_lat 8" "tag_bw 8" "tag_bw 65536" "tag_bw 1048576")

# Line-buffered output (coreutils' stdbuf), so that a run killed by `timeout` still shows
# how far it got.
STDBUF=()
command -v stdbuf >/dev/null 2>&1 && STDBUF=(stdbuf -oL -eL)

# ---------------------------------------------------------------- processes we start
PIDS=()     # `timeout` wrappers we started; each leads its own process group
NAMESPACES=()
cleanup() {
  local pid ns
  for pid in "${PIDS[@]}"; do
    kill -TERM -- "-$pid" 2>/dev/null || true
  done
  for pid in "${PIDS[@]}"; do
    wait "$pid" 2>/dev/null || true
  done
  for ns in "${NAMESPACES[@]}"; do
    rm -f -- /dev/shm/softrdma-"$ns"-*
  done
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

forget_pid() {
  local p keep=()
  for p in "${PIDS[@]}"; do [[ "$p" == "$1" ]] || keep+=("$p"); done
  PIDS=("${keep[@]}")
}

alive() { proc_alive "$1"; }

# ---------------------------------------------------------------- setup
install_deps() {
  local pkgs=(perftest qperf ucx-utils python3-matplotlib ibverbs-utils taskset) missing=() p st
  # taskset lives in util-linux; check the command rather than the package.
  pkgs=("${pkgs[@]/taskset/util-linux}")
  for p in "${pkgs[@]}"; do
    st=$(dpkg-query -W -f='${Status}' "$p" 2>/dev/null || true)
    [[ "$st" == "install ok installed" ]] || missing+=("$p")
  done
  ((${#missing[@]})) || return 0
  log "installing missing Debian packages: ${missing[*]}"
  local as_root=()
  if [[ "$(id -u)" -ne 0 ]]; then
    command -v sudo >/dev/null 2>&1 || { log "not root and no sudo: install ${missing[*]} yourself"; return 0; }
    as_root=(sudo)
  fi
  export DEBIAN_FRONTEND=noninteractive
  "${as_root[@]}" apt-get install -y --no-install-recommends -o DPkg::Lock::Timeout=300 "${missing[@]}" >>"$OUT/run.log" 2>&1 ||
    { "${as_root[@]}" apt-get update >>"$OUT/run.log" 2>&1 &&
      "${as_root[@]}" apt-get install -y --no-install-recommends -o DPkg::Lock::Timeout=300 "${missing[@]}" >>"$OUT/run.log" 2>&1; } ||
    log "apt-get failed (see run.log); the measurements needing ${missing[*]} will be errors"
}

build_softrdma() {
  LIB_DIR=${LIB_DIR:-$ROOT/build/lib}
  if [[ ! -e "$LIB_DIR/libibverbs.so.1" && "$LIB_DIR" == "$ROOT/build/lib" ]]; then
    log "building softrdma into $ROOT/build (-j${BENCH_JOBS:-2})"
    { cmake -S "$ROOT" -B "$ROOT/build" -DCMAKE_BUILD_TYPE=RelWithDebInfo &&
      cmake --build "$ROOT/build" -j"${BENCH_JOBS:-2}" --target ibverbs; } >>"$OUT/run.log" 2>&1 ||
      log "build failed (see run.log)"
  fi
  if [[ -e "$LIB_DIR/libibverbs.so.1" ]]; then
    LIB_DIR=$(cd "$LIB_DIR" && pwd)
  fi
}

# The limits program: the CMake target when a build tree exists, else g++ straight.
build_limits() {
  LIMITS_BIN=""
  if [[ -f "$ROOT/build/CMakeCache.txt" ]] &&
    cmake --build "$ROOT/build" -j"${BENCH_JOBS:-2}" --target softrdma_bench_limits >>"$OUT/run.log" 2>&1 &&
    [[ -x "$ROOT/build/bin/softrdma_bench_limits" ]]; then
    LIMITS_BIN=$ROOT/build/bin/softrdma_bench_limits
  elif g++ -std=c++20 -O2 -Wall -Wextra -Werror -pthread -o "$OUT/softrdma_bench_limits" \
    "$HERE/limits/limits.cpp" >>"$OUT/run.log" 2>&1; then
    LIMITS_BIN=$OUT/softrdma_bench_limits
  else
    log "could not build the limits program (see run.log)"
  fi
}

# gid_index: the index of softrdma0's ::ffff:127.0.0.1 GID, parsed from ibv_devinfo -v.
gid_index() {
  local ns="b$$-devinfo" out="$RAW/ibv_devinfo.txt"
  NAMESPACES+=("$ns")
  SOFTRDMA_NAMESPACE=$ns LD_LIBRARY_PATH=$LIB_DIR timeout 20 ibv_devinfo -v -d softrdma0 -i 1 >"$out" 2>&1
  rm -f -- /dev/shm/softrdma-"$ns"-*
  GID=$(sed -nE 's/^[[:space:]]*GID\[ *([0-9]+)\]:[[:space:]]*::ffff:127\.0\.0\.1, RoCE v2[[:space:]]*$/\1/p' "$out" | head -n1)
  [[ -n "$GID" ]] ||
    GID=$(sed -nE 's/^[[:space:]]*GID\[ *([0-9]+)\]:[[:space:]]*::ffff:127\.0\.0\.1([,[:space:]].*)?$/\1/p' "$out" | head -n1)
  [[ -n "$GID" ]]
}

# ---------------------------------------------------------------- one measurement
# record SUITE TEST SIZE PINNED REP RC CLIENT_FILE SERVER_FILE CMD
record() {
  printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$@" >>"$OUT/runs.tsv"
}

# record_error SUITE TEST SIZE PINNED REP MESSAGE: a measurement that could not run.
record_error() {
  local f="$RAW/$1-$2-$3-p$4-r$5.client.txt"
  printf 'bench: %s\n' "$6" >"$f"
  record "$1" "$2" "$3" "$4" "$5" -1 "raw/${f##*/}" "" "(not run)"
}

# run_pair SUITE TEST SIZE PINNED REP: runs SERVER_CMD in the background, waits until it
# listens on @PORT@, runs CLIENT_CMD, then stops the server. The arrays SERVER_CMD,
# CLIENT_CMD and PAIR_ENV (VAR=value words) are set by the caller; @PORT@ and @PORT2@
# in them are replaced by free TCP ports. Pinned: server on CPU 0, client on CPU 1.
run_pair() {
  local suite=$1 test=$2 size=$3 pinned=$4 rep=$5
  local base="$suite-$test-$size-p$pinned-r$rep"
  local cli="$RAW/$base.client.txt" srv="$RAW/$base.server.txt"
  local ns="b$$-$RANDOM$RANDOM" attempt port port2 spid rc=0 srv_rc deadline
  local pin_s=() pin_c=() s_cmd=() c_cmd=() w
  if ((pinned)); then pin_s=(taskset -c 0); pin_c=(taskset -c 1); fi
  LAST_RC=-2
  NAMESPACES+=("$ns")
  for attempt in 1 2 3; do
    if ! port=$(free_port) || ! port2=$(free_port); then
      record_error "$suite" "$test" "$size" "$pinned" "$rep" "no free TCP port"
      return
    fi
    s_cmd=() c_cmd=()
    for w in "${SERVER_CMD[@]}"; do w=${w//@PORT2@/$port2}; s_cmd+=("${w//@PORT@/$port}"); done
    for w in "${CLIENT_CMD[@]}"; do w=${w//@PORT2@/$port2}; c_cmd+=("${w//@PORT@/$port}"); done
    timeout -k 5 "$TIMEOUT" env SOFTRDMA_NAMESPACE="$ns" "${PAIR_ENV[@]}" "${pin_s[@]}" "${STDBUF[@]}" "${s_cmd[@]}" \
      </dev/null >"$srv" 2>&1 &
    spid=$!
    PIDS+=("$spid")
    deadline=$((SECONDS + 20))
    while ((SECONDS < deadline)) && alive "$spid" && ! port_in_use "$port" listen; do sleep 0.05; done
    if port_in_use "$port" listen; then break; fi
    # The server died or never listened: retry on other ports (taken port), then give up.
    kill -TERM -- "-$spid" 2>/dev/null
    wait "$spid" 2>/dev/null
    forget_pid "$spid"
    if ((attempt == 3)); then
      cp "$srv" "$cli"
      record "$suite" "$test" "$size" "$pinned" "$rep" -2 "raw/${cli##*/}" "raw/${srv##*/}" \
        "server did not listen: ${s_cmd[*]}"
      rm -f -- /dev/shm/softrdma-"$ns"-*
      return
    fi
  done
  timeout -k 5 "$TIMEOUT" env SOFTRDMA_NAMESPACE="$ns" "${PAIR_ENV[@]}" "${pin_c[@]}" "${STDBUF[@]}" "${c_cmd[@]}" \
    </dev/null >"$cli" 2>&1 || rc=$?
  # Let the server finish on its own (perftest, ucx_perftest), then stop it (qperf serves forever).
  deadline=$((SECONDS + (rc == 0 ? 5 : 2)))
  while ((SECONDS < deadline)) && alive "$spid"; do sleep 0.05; done
  kill -TERM -- "-$spid" 2>/dev/null
  srv_rc=0
  wait "$spid" 2>/dev/null || srv_rc=$?
  forget_pid "$spid"
  rm -f -- /dev/shm/softrdma-"$ns"-*
  record "$suite" "$test" "$size" "$pinned" "$rep" "$rc" "raw/${cli##*/}" "raw/${srv##*/}" \
    "${pin_c[*]} ${c_cmd[*]} (server rc $srv_rc: ${pin_s[*]} ${s_cmd[*]})"
  LAST_RC=$rc
  printf '  %-9s %-16s %8s %s rep %s: %s\n' "$suite" "$test" "$size" "$( ((pinned)) && echo pinned || echo '      ')" \
    "$rep" "$( ((rc == 0)) && echo ok || echo "FAILED (rc $rc)")" | tee -a "$OUT/run.log"
}

# ---------------------------------------------------------------- suites
run_perftest() {
  local have=1 t size pinned rep n args spec
  local tests=(send_lat write_lat read_lat send_bw write_bw read_bw atomic_lat atomic_bw)
  local -A timeouts=()
  command -v ib_send_lat >/dev/null 2>&1 || have=0
  if ((have)) && [[ ! -e "$LIB_DIR/libibverbs.so.1" ]]; then have=0; fi
  local reason="perftest not installed"
  [[ -e "$LIB_DIR/libibverbs.so.1" ]] || reason="no softrdma libibverbs.so.1 in $LIB_DIR"
  if ((have)) && ! gid_index; then have=0; reason="no ::ffff:127.0.0.1 GID in ibv_devinfo -v (raw/ibv_devinfo.txt)"; fi
  ((have)) && log "perftest over softrdma0, GID index $GID ($LIB_DIR)"
  PAIR_ENV=(LD_LIBRARY_PATH="$LIB_DIR")
  local plan=()
  for t in "${tests[@]}"; do
    if [[ $t == atomic_* ]]; then plan+=("$t 8 0"); continue; fi
    for size in "${SIZES[@]}"; do plan+=("$t $size 0"); done
  done
  for spec in "${PINNED_PERFTEST[@]}"; do plan+=("$spec 1"); done
  for rep in $(seq 0 $((REPEAT - 1))); do
    for spec in "${plan[@]}"; do
      read -r t size pinned <<<"$spec"
      if ((!have)); then record_error perftest "ib_$t" "$size" "$pinned" "$rep" "$reason"; continue; fi
      if ((${timeouts[$t]:-0} >= 2)); then
        record_error perftest "ib_$t" "$size" "$pinned" "$rep" "skipped: ib_$t timed out twice in this run"
        continue
      fi
      if [[ $t == *_lat ]]; then n=$(lat_iters "$size"); else n=$(bw_iters "$size"); fi
      args=(-d softrdma0 -x "$GID" -p @PORT@ -n "$n" -F)
      [[ $t == atomic_* ]] || args+=(-s "$size")
      SERVER_CMD=("ib_$t" "${args[@]}")
      CLIENT_CMD=("ib_$t" "${args[@]}" 127.0.0.1)
      run_pair perftest "ib_$t" "$size" "$pinned" "$rep"
      ((LAST_RC == 124 || LAST_RC == 137)) && timeouts[$t]=$((${timeouts[$t]:-0} + 1))
    done
  done
}

run_ucx() {
  local t size pinned rep n spec plan=()
  PAIR_ENV=("UCX_TLS=posix,cma")
  for t in tag_lat tag_bw; do
    for size in "${SIZES[@]}"; do plan+=("$t $size 0"); done
  done
  for spec in "${PINNED_UCX[@]}"; do plan+=("$spec 1"); done
  log "UCX ucx_perftest, UCX_TLS=posix,cma"
  for rep in $(seq 0 $((REPEAT - 1))); do
    for spec in "${plan[@]}"; do
      read -r t size pinned <<<"$spec"
      if ! command -v ucx_perftest >/dev/null 2>&1; then
        record_error ucx "$t" "$size" "$pinned" "$rep" "ucx_perftest not installed (Debian: ucx-utils)"
        continue
      fi
      if [[ $t == tag_lat ]]; then n=$(lat_iters "$size"); else n=$(bw_iters "$size"); fi
      SERVER_CMD=(ucx_perftest -p @PORT@)
      CLIENT_CMD=(ucx_perftest 127.0.0.1 -p @PORT@ -t "$t" -s "$size" -n "$n" -w $((n / 10 + 1)) -v)
      run_pair ucx "$t" "$size" "$pinned" "$rep"
    done
  done
}

run_tcp() {
  local t size rep
  PAIR_ENV=()
  log "kernel TCP on loopback: qperf tcp_lat / tcp_bw, $QPERF_TIME s each"
  for rep in $(seq 0 $((REPEAT - 1))); do
    for t in tcp_lat tcp_bw; do
      for size in "${SIZES[@]}"; do
        if ! command -v qperf >/dev/null 2>&1; then
          record_error tcp "$t" "$size" 0 "$rep" "qperf not installed"
          continue
        fi
        SERVER_CMD=(qperf -lp @PORT@)
        CLIENT_CMD=(qperf -lp @PORT@ -ip @PORT2@ -uu -t "$QPERF_TIME" -m "$size" 127.0.0.1 "$t")
        run_pair tcp "$t" "$size" 0 "$rep"
      done
    done
  done
}

run_limits() {
  local sizes_csv
  sizes_csv=$(IFS=,; echo "${SIZES[*]}")
  build_limits
  if [[ -z "$LIMITS_BIN" ]]; then
    echo '{"test":"limits","size":0,"error":"the limits program did not build (run.log)"}' >"$OUT/limits.jsonl"
    return
  fi
  log "machine limits: $LIMITS_BIN --sizes $sizes_csv --repeat $REPEAT ${LIMITS_ARGS[*]}"
  timeout -k 5 $((TIMEOUT * 5)) "$LIMITS_BIN" --sizes "$sizes_csv" --repeat "$REPEAT" "${LIMITS_ARGS[@]}" \
    >"$OUT/limits.jsonl" 2>>"$OUT/run.log" ||
    echo "{\"test\":\"limits\",\"size\":0,\"error\":\"exit code $?\"}" >>"$OUT/limits.jsonl"
}

idle_ready() {
  [[ -e "$LIB_DIR/libibverbs.so.1" ]] && command -v ibv_rc_pingpong >/dev/null 2>&1 || return 1
  [[ -n "${GID:-}" ]] || gid_index
}

# proc_cpu_ticks PID: utime + stime of PID, in clock ticks.
proc_cpu_ticks() {
  local s a
  read -r s <"/proc/$1/stat" || return 1
  s=${s##*) }
  read -r -a a <<<"$s"
  echo $((a[11] + a[12]))
}

# Idle CPU: an ibv_rc_pingpong server has opened softrdma0 and created its QP, and waits
# for a client that never comes. Its utime+stime over IDLE_WINDOW seconds, in % of a core.
run_idle() {
  local rep port ns spid child t0 t1 f ticks d st fl
  log "idle CPU of a process holding a QP, ${IDLE_WINDOW} s window"
  ticks=$(getconf CLK_TCK)
  for rep in $(seq 0 $((REPEAT - 1))); do
    f="$RAW/idle-idle_cpu-0-p0-r$rep.client.txt"
    if ! idle_ready; then
      record_error idle idle_cpu 0 0 "$rep" "softrdma library, ibv_rc_pingpong or the loopback GID missing"
      continue
    fi
    port=$(free_port)
    ns="b$$-idle$rep"
    NAMESPACES+=("$ns")
    timeout -k 5 $((IDLE_WINDOW + 30)) env SOFTRDMA_NAMESPACE="$ns" LD_LIBRARY_PATH="$LIB_DIR" \
      ibv_rc_pingpong -d softrdma0 -g "$GID" -p "$port" </dev/null >"$f.server" 2>&1 &
    spid=$!
    PIDS+=("$spid")
    local deadline=$((SECONDS + 20))
    while ((SECONDS < deadline)) && alive "$spid" && ! port_in_use "$port" listen; do sleep 0.05; done
    child=""
    for d in /proc/[0-9]*; do
      read -r st 2>/dev/null <"$d/stat" || continue
      st=${st##*) }
      read -r -a fl <<<"$st"
      [[ "${fl[1]}" == "$spid" ]] && { child=${d#/proc/}; break; }
    done
    if [[ -z "$child" ]] || ! port_in_use "$port" listen; then
      { echo "bench: the ibv_rc_pingpong server did not start listening"; cat "$f.server"; } >"$f"
      record idle idle_cpu 0 0 "$rep" 1 "raw/${f##*/}" "" "ibv_rc_pingpong -g $GID -p $port"
    else
      sleep 1 # let it settle after setup
      t0=$(proc_cpu_ticks "$child")
      sleep "$IDLE_WINDOW"
      t1=$(proc_cpu_ticks "$child")
      printf 'idle_cpu_ticks: %s\nclk_tck: %s\nwindow_s: %s\nthreads: %s\n' "$((t1 - t0))" "$ticks" \
        "$IDLE_WINDOW" "$(find "/proc/$child/task" -mindepth 1 -maxdepth 1 | wc -l)" >"$f"
      record idle idle_cpu 0 0 "$rep" 0 "raw/${f##*/}" "" "ibv_rc_pingpong -d softrdma0 -g $GID -p $port (server, no client)"
      printf '  idle      idle_cpu: %s ticks in %s s\n' "$((t1 - t0))" "$IDLE_WINDOW" | tee -a "$OUT/run.log"
    fi
    kill -TERM -- "-$spid" 2>/dev/null
    wait "$spid" 2>/dev/null
    forget_pid "$spid"
    rm -f -- /dev/shm/softrdma-"$ns"-*
  done
}

# ---------------------------------------------------------------- main
log "softrdma bench: out $OUT, repeat $REPEAT$( ((QUICK)) && echo ', quick'), suites $ONLY"
install_deps
build_softrdma
{
  echo "date: $(date -Is)"
  echo "git: $(git -C "$ROOT" describe --always --dirty 2>/dev/null)"
  echo "kernel: $(uname -sr)"
  echo "cpu: $(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -n1), $(nproc) online"
  echo "load: $(cut -d' ' -f1-3 /proc/loadavg)"
  echo "repeat: $REPEAT"
  echo "quick: $QUICK"
  echo "sizes: ${SIZES[*]}"
  for p in perftest qperf ucx-utils python3-matplotlib; do
    echo "$p: $(dpkg-query -W -f='${Version}' "$p" 2>/dev/null)"
  done
} >"$OUT/meta.txt"
printf 'suite\ttest\tsize\tpinned\trep\trc\tclient\tserver\tcmd\n' >"$OUT/runs.tsv"

want limits && run_limits
want perftest && run_perftest
want ucx && run_ucx
want tcp && run_tcp
want idle && run_idle

echo "load_end: $(cut -d' ' -f1-3 /proc/loadavg)" >>"$OUT/meta.txt"
log "writing the report"
if /usr/bin/python3 "$HERE/report.py" "$OUT"; then
  log "report: $OUT/report.md"
  sed -n '/^## Targets/,/^## /p' "$OUT/report.md" | sed '$d'
else
  log "report.py failed; raw results are in $OUT"
fi
exit 0
