#!/usr/bin/env bash
# softrdma benchmark suite: one command, one machine, one go.
#
#   bench/run.sh [--quick] [--repeat N] [--target-repeat N] [--out DIR] [--only LIST] [--lib DIR]
#
# Runs, each --repeat times:
#   perftest  unmodified perftest (ib_{send,write,read}_{lat,bw}, ib_atomic_{lat,bw}) over
#             softrdma's libibverbs.so.1, 8 B .. 4 MiB, unpinned and (target sizes) pinned
#             with `taskset -c 0` (server) / `taskset -c 1` (client)
#   ucx       ucx_perftest tag_lat / tag_bw with UCX_TLS=posix,cma (system UCX), same sizes
#   ucx_verbs ucx_perftest tag_lat / tag_bw at 8 B, 4 KiB, 1 MiB over softrdma (rc_verbs,
#             ud_verbs, under `softrdma run`) and over UCX_TLS=posix, back to back
#             (bench/ucx_verbs.sh)
#   tcp       qperf tcp_lat / tcp_bw on loopback
#   limits    softrdma_bench_limits: memcpy by size, cross-core cache-line round trip,
#             process_vm_writev by size
#   idle      CPU used by an idle process holding a QP (ibv_rc_pingpong server waiting)
#   scale     softrdma_bench_scale: 10,000 RC QPs in one process (create, modify, destroy
#             times, memory per QP), queues of 128 and of 1 WR; ib_write_bw -q 64 against
#             -q 1; four ib_write_bw pairs at once (8 B and 64 KiB)
#   callgrind instructions per iteration of the client of ib_send_lat, ib_write_lat and
#             ib_write_bw -s 8 under valgrind --tool=callgrind (server native, pinned apart)
#   apps      what applications see (issue 15), unpinned and pinned: ibv_rc_pingpong and
#             ibv_ud_pingpong -s 1024 (per iteration), ib_send_lat -e -s 8 (blocking on the
#             completion channel) against qperf tcp_lat 8 B, UCX tag_lat 1 KiB; and the latency
#             distribution of ib_send_lat -s 64 (-H: every iteration) against UCX tag_lat 64 B
#             percentiles (-R), drawn as a CDF. The message-rate and average-latency rows
#             (ib_send_bw -s 8/-s 64 vs tag_bw, ib_send_lat -s 64 average and p99 vs tag_lat)
#             come from the perftest and ucx suites, which run those sizes pinned as well.
# then bench/report.py writes DIR/report.md and DIR/*.png. Raw outputs stay in DIR/raw,
# one row per measurement in DIR/runs.tsv. A failed measurement is a row with its error;
# the suite keeps going and exits 0 (a bench reports, it does not fail CI).
#
# Machine state: the cross-core cache-line round trip of this kind of VM moves between
# states over minutes (e.g. ~160 ns and ~420 ns), and small-message latency with it.
# Immediately before and after every latency measurement (perftest *_lat, UCX tag_lat,
# every size and repetition) a short softrdma_bench_limits --tests rtt (3 x 20,000 round
# trips on CPU 0 and 1, a few tens of ms) records it: runs.tsv columns rtt_before_ns and
# rtt_after_ns (median of the 3, in ns; empty for other measurements or when it could not
# run). The report shows the round trip of both sides of every latency target and flags
# "states differ" when their medians are more than 1.5x apart.
# The paired targets run first, softrdma's and UCX's runs of each repetition back to back,
# so that their ratio compares runs taken in the same state: the 8 B latency targets
# (ib_send_lat, ib_write_lat, UCX tag_lat), issue 15's 64 B average (ib_send_lat against
# UCX tag_lat) and its message rates (ib_send_bw -s 8 and -s 64 against UCX tag_bw), each
# unpinned and pinned, --target-repeat times.
#
# Options:
#   --quick       smoke run: 3 sizes, short runs, --repeat 2 unless given
#   --repeat N    repetitions of every measurement (default 3)
#   --target-repeat N
#                 repetitions of the paired targets (default 5, or --repeat when that is
#                 larger or --quick is given): a message rate swings by a quarter from run
#                 to run on both sides, so their medians need more runs than the others
#   --out DIR     results directory (default bench/results/<date>-<time>)
#   --only LIST   comma-separated subset of: perftest,ucx,ucx_verbs,tcp,limits,idle,scale,
#                 callgrind,apps
#   --lib DIR     directory holding softrdma's libibverbs.so.1 (default build/lib;
#                 built with cmake when missing)
# Environment: BENCH_JOBS (build parallelism, default 2), BENCH_TIMEOUT (seconds per
# process; default 60, 30 with --quick; 4x that under valgrind). A perftest test that
# times out twice is skipped for the rest of the run (rows "skipped").
set -uo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(cd "$HERE/.." && pwd)
# shellcheck source=../scripts/lib/procs.sh
source "$ROOT/scripts/lib/procs.sh"
# shellcheck source=ucx_verbs.sh
source "$HERE/ucx_verbs.sh"

QUICK=0
REPEAT=""
TARGET_REPEAT=""
OUT=""
ONLY="perftest,ucx,ucx_verbs,tcp,limits,idle,scale,callgrind,apps"
LIB_DIR=""
usage() { sed -n '2,/^set -uo/p' "${BASH_SOURCE[0]}" | sed '$d; s/^# \{0,1\}//'; }
while (($#)); do
  case "$1" in
    --quick) QUICK=1 ;;
    --repeat) REPEAT=${2:?--repeat needs a number}; shift ;;
    --target-repeat) TARGET_REPEAT=${2:?--target-repeat needs a number}; shift ;;
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
if [[ -z "$TARGET_REPEAT" ]]; then
  TARGET_REPEAT=$REPEAT
  ((!QUICK && TARGET_REPEAT < 5)) && TARGET_REPEAT=5
fi
[[ "$TARGET_REPEAT" =~ ^[1-9][0-9]*$ ]] || { echo "run.sh: --target-repeat must be a positive integer" >&2; exit 2; }
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
  SCALE_DURATION=1 # seconds of each perftest -D run of the scale suite
else
  SIZES=(8 64 512 4096 32768 65536 262144 1048576 4194304)
  # Up to 100,000 iterations (at most 20,000 until session 6): a 20,000-iteration run of a
  # small message lasts ~25 ms, so one descheduling of either process decided its average,
  # and it never left the first lap of the rings. Same count for UCX's tag_lat.
  lat_iters() { clamp $((268435456 / $1)) 200 100000; }
  # Up to 5,000,000 messages (1,000,000 until session 8): a run of 1,000,000 small SENDs
  # lasts 0.12-0.2 s and its rate includes the start (the first lap of the rings, the
  # scheduler placing two busy processes), which ucx_perftest's warm-up (-w, 10 %) leaves
  # out of UCX's figure. Same count for UCX's tag_bw.
  bw_iters() { clamp $((4294967296 / $1)) 200 5000000; }
  QPERF_TIME=2
  IDLE_WINDOW=5
  LIMITS_ARGS=(--min-time 0.2 --rtt-iters 200000)
  SCALE_DURATION=2
fi
clamp() {
  local v=$1
  ((v < $2)) && v=$2
  ((v > $3)) && v=$3
  echo "$v"
}
# The machine-state probe around each latency measurement (machine_rtt): repetitions and
# round trips of each, short enough to add well under a second per measurement.
STATE_RTT_ARGS=(--tests rtt --repeat 3 --rtt-iters 20000)
# Pinned runs: the sizes the targets are evaluated at.
PINNED_PERFTEST=("send_lat 8" "write_lat 8" "write_bw 8" "send_bw 65536" "write_bw 1048576" "read_bw 1048576"
  "send_bw 8" "send_bw 64" "send_lat 64")
PINNED_UCX=("tag_lat 8" "tag_bw 8" "tag_bw 65536" "tag_bw 1048576" "tag_bw 64" "tag_lat 64")
# apps: the ping-pong message size (and UCX tag_lat at it, unpinned and pinned), the
# percentile ranks of UCX tag_lat 64 B drawn in the latency CDF.
APP_PINGPONG_SIZE=1024
CDF_UCX_RANKS=(1 10 25 50 75 90 95 99 99.9)
# scale: QPs of one process, the queue sizes of each configuration ("label send_wr recv_wr"),
# the message sizes of the -q 64 / four-pair perftest runs.
SCALE_QPS=10000
SCALE_CONFIGS=("wr128 128 128" "wr1 1 1")
SCALE_SIZES=(8 65536)
SCALE_PAIRS=4
# callgrind: the client's iteration counts (the difference cancels setup and teardown).
CALLGRIND_ITERS=(2000 6000)
CALLGRIND_TESTS=(send_lat write_lat write_bw)

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
  # taskset lives in util-linux.
  bash "$ROOT/bench/install_tools.sh" "$OUT/run.log" \
    perftest qperf ucx-utils python3-matplotlib ibverbs-utils valgrind util-linux 2>&1 |
    while IFS= read -r line; do log "${line#bench: }"; done
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
# Built once (LIMITS_BUILT): the limits suite and the machine-state probe share it.
LIMITS_BIN=""
LIMITS_BUILT=0
build_limits() {
  ((LIMITS_BUILT)) && return
  LIMITS_BUILT=1
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

# The scale program: the CMake target when a build tree exists, else g++ against the system's
# verbs headers, linked with the libibverbs.so.1 in LIB_DIR.
build_scale() {
  SCALE_BIN=""
  if [[ -f "$ROOT/build/CMakeCache.txt" ]] &&
    cmake --build "$ROOT/build" -j"${BENCH_JOBS:-2}" --target softrdma_bench_scale >>"$OUT/run.log" 2>&1 &&
    [[ -x "$ROOT/build/bin/softrdma_bench_scale" ]]; then
    SCALE_BIN=$ROOT/build/bin/softrdma_bench_scale
  elif [[ -e "$LIB_DIR/libibverbs.so.1" ]] &&
    g++ -std=c++20 -O2 -Wall -Wextra -Werror -o "$OUT/softrdma_bench_scale" "$HERE/scale/scale.cpp" \
      "$LIB_DIR/libibverbs.so.1" >>"$OUT/run.log" 2>&1; then
    SCALE_BIN=$OUT/softrdma_bench_scale
  else
    log "could not build the scale program (see run.log)"
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

# machine_rtt: the cross-core cache-line round trip now, in ns (the median of
# STATE_RTT_ARGS' repetitions, one decimal); prints nothing when it cannot be measured.
machine_rtt() {
  [[ -n "$LIMITS_BIN" ]] || return 0
  timeout -k 1 10 "$LIMITS_BIN" "${STATE_RTT_ARGS[@]}" 2>/dev/null |
    sed -n 's/.*"test":"cacheline_rtt".*"values":\[\([^]]*\)\].*/\1/p' | tr ',' '\n' | sort -g |
    awk 'NF { v[++n] = $1 } END { if (n) printf "%.1f\n", v[int((n + 1) / 2)] }'
}

# ---------------------------------------------------------------- one measurement
# record SUITE TEST SIZE PINNED REP RC CLIENT_FILE SERVER_FILE CMD [RTT_BEFORE RTT_AFTER]
# (committed with the results: the repository's path is written as <repo>)
record() {
  local row
  row=$(printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s' "$@")
  printf '%s\n' "${row//"$ROOT"/<repo>}" >>"$OUT/runs.tsv"
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
# PAIR_RTT=1 (a latency measurement): the machine's cache-line round trip is measured just
# before the server starts and just after it stopped, and recorded with the row.
run_pair() {
  local suite=$1 test=$2 size=$3 pinned=$4 rep=$5
  local base="$suite-$test-$size-p$pinned-r$rep"
  local cli="$RAW/$base.client.txt" srv="$RAW/$base.server.txt"
  local ns="b$$-$RANDOM$RANDOM" attempt port port2 spid rc=0 srv_rc deadline
  local pin_s=() pin_c=() s_cmd=() c_cmd=() w rtt_b="" rtt_a="" rtt_note=""
  if ((pinned)); then pin_s=(taskset -c 0); pin_c=(taskset -c 1); fi
  LAST_RC=-2
  NAMESPACES+=("$ns")
  ((PAIR_RTT && STATE_RTT)) && rtt_b=$(machine_rtt)
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
        "server did not listen: ${s_cmd[*]}" "$rtt_b" ""
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
  if ((PAIR_RTT && STATE_RTT)); then
    rtt_a=$(machine_rtt)
    rtt_note=" (cache-line rtt ${rtt_b:-?} / ${rtt_a:-?} ns)"
  fi
  record "$suite" "$test" "$size" "$pinned" "$rep" "$rc" "raw/${cli##*/}" "raw/${srv##*/}" \
    "${pin_c[*]} ${c_cmd[*]} (server rc $srv_rc: ${pin_s[*]} ${s_cmd[*]})" "$rtt_b" "$rtt_a"
  LAST_RC=$rc
  printf '  %-9s %-16s %8s %s rep %s: %s%s\n' "$suite" "$test" "$size" "$( ((pinned)) && echo pinned || echo '      ')" \
    "$rep" "$( ((rc == 0)) && echo ok || echo "FAILED (rc $rc)")" "$rtt_note" | tee -a "$OUT/run.log"
}

# ---------------------------------------------------------------- suites
# perftest_ready: perftest and softrdma's library are there and the loopback GID is known
# (GID); otherwise false with REASON set.
perftest_ready() {
  REASON=""
  if ! command -v ib_send_lat >/dev/null 2>&1; then
    REASON="perftest not installed"
  elif [[ ! -e "$LIB_DIR/libibverbs.so.1" ]]; then
    REASON="no softrdma libibverbs.so.1 in $LIB_DIR"
  elif [[ -z "${GID:-}" ]] && ! gid_index; then
    REASON="no ::ffff:127.0.0.1 GID in ibv_devinfo -v (raw/ibv_devinfo.txt)"
  fi
  [[ -z "$REASON" ]]
}

# The paired targets (8 B latency; issue 15's 64 B average and its 8 B and 64 B message
# rates; unpinned and pinned): softrdma's and UCX's runs of one repetition follow each other
# (run_paired_targets) instead of being minutes apart in their suites, so that a ratio
# compares runs taken in the same machine state.
PAIRED_TARGETS=("perftest send_lat 8" "perftest write_lat 8" "ucx tag_lat 8"
  "perftest send_lat 64" "ucx tag_lat 64"
  "perftest send_bw 8" "ucx tag_bw 8" "perftest send_bw 64" "ucx tag_bw 64")
is_paired_target() { # SUITE TEST SIZE
  local spec
  for spec in "${PAIRED_TARGETS[@]}"; do [[ "$spec" == "$1 $2 $3" ]] && return 0; done
  return 1
}

PERFTEST_HAVE=-1 # -1: not checked yet; then 1 or 0 (with PERFTEST_REASON)
PERFTEST_REASON=""
declare -A PERFTEST_TIMEOUTS=()
perftest_check() {
  ((PERFTEST_HAVE >= 0)) && return
  PERFTEST_HAVE=1
  perftest_ready || PERFTEST_HAVE=0
  PERFTEST_REASON=$REASON
  ((PERFTEST_HAVE)) && log "perftest over softrdma0, GID index $GID ($LIB_DIR)"
}

# perftest_one TEST SIZE PINNED REP (TEST without the ib_ prefix)
perftest_one() {
  local t=$1 size=$2 pinned=$3 rep=$4 n args
  perftest_check
  if ((!PERFTEST_HAVE)); then record_error perftest "ib_$t" "$size" "$pinned" "$rep" "$PERFTEST_REASON"; return; fi
  if ((${PERFTEST_TIMEOUTS[$t]:-0} >= 2)); then
    record_error perftest "ib_$t" "$size" "$pinned" "$rep" "skipped: ib_$t timed out twice in this run"
    return
  fi
  if [[ $t == *_lat ]]; then n=$(lat_iters "$size"); else n=$(bw_iters "$size"); fi
  args=(-d softrdma0 -x "$GID" -p @PORT@ -n "$n" -F)
  [[ $t == atomic_* ]] || args+=(-s "$size")
  PAIR_ENV=(LD_LIBRARY_PATH="$LIB_DIR")
  SERVER_CMD=("ib_$t" "${args[@]}")
  CLIENT_CMD=("ib_$t" "${args[@]}" 127.0.0.1)
  PAIR_RTT=0
  [[ $t == *_lat ]] && PAIR_RTT=1
  run_pair perftest "ib_$t" "$size" "$pinned" "$rep"
  PAIR_RTT=0
  ((LAST_RC == 124 || LAST_RC == 137)) && PERFTEST_TIMEOUTS[$t]=$((${PERFTEST_TIMEOUTS[$t]:-0} + 1))
}

# ucx_one TEST SIZE PINNED REP
ucx_one() {
  local t=$1 size=$2 pinned=$3 rep=$4 n
  if ! command -v ucx_perftest >/dev/null 2>&1; then
    record_error ucx "$t" "$size" "$pinned" "$rep" "ucx_perftest not installed (Debian: ucx-utils)"
    return
  fi
  if [[ $t == tag_lat ]]; then n=$(lat_iters "$size"); else n=$(bw_iters "$size"); fi
  PAIR_ENV=("UCX_TLS=posix,cma")
  SERVER_CMD=(ucx_perftest -p @PORT@)
  CLIENT_CMD=(ucx_perftest 127.0.0.1 -p @PORT@ -t "$t" -s "$size" -n "$n" -w $((n / 10 + 1)) -v)
  PAIR_RTT=0
  [[ $t == tag_lat ]] && PAIR_RTT=1
  run_pair ucx "$t" "$size" "$pinned" "$rep"
  PAIR_RTT=0
}

run_paired_targets() {
  local rep pinned spec suite t size
  log "paired targets, softrdma and UCX back to back, $TARGET_REPEAT times: ${PAIRED_TARGETS[*]}"
  for rep in $(seq 0 $((TARGET_REPEAT - 1))); do
    for pinned in 0 1; do
      for spec in "${PAIRED_TARGETS[@]}"; do
        read -r suite t size <<<"$spec"
        want "$suite" || continue
        if [[ $suite == perftest ]]; then perftest_one "$t" "$size" "$pinned" "$rep"; else ucx_one "$t" "$size" "$pinned" "$rep"; fi
      done
    done
  done
}

run_perftest() {
  local t size pinned rep spec plan=()
  local tests=(send_lat write_lat read_lat send_bw write_bw read_bw atomic_lat atomic_bw)
  perftest_check
  for t in "${tests[@]}"; do
    if [[ $t == atomic_* ]]; then plan+=("$t 8 0"); continue; fi
    for size in "${SIZES[@]}"; do plan+=("$t $size 0"); done
  done
  for spec in "${PINNED_PERFTEST[@]}"; do plan+=("$spec 1"); done
  for rep in $(seq 0 $((REPEAT - 1))); do
    for spec in "${plan[@]}"; do
      read -r t size pinned <<<"$spec"
      is_paired_target perftest "$t" "$size" && continue # run_paired_targets
      perftest_one "$t" "$size" "$pinned" "$rep"
    done
  done
}

run_ucx() {
  local t size pinned rep spec plan=()
  for t in tag_lat tag_bw; do
    for size in "${SIZES[@]}"; do plan+=("$t $size 0"); done
  done
  for spec in "${PINNED_UCX[@]}"; do plan+=("$spec 1"); done
  log "UCX ucx_perftest, UCX_TLS=posix,cma"
  for rep in $(seq 0 $((REPEAT - 1))); do
    for spec in "${plan[@]}"; do
      read -r t size pinned <<<"$spec"
      is_paired_target ucx "$t" "$size" && continue # run_paired_targets
      ucx_one "$t" "$size" "$pinned" "$rep"
    done
  done
}

# pingpong_one TEST PINNED REP: ibv_rc_pingpong / ibv_ud_pingpong (rdma-core's examples,
# one CQ for sends and receives) at APP_PINGPONG_SIZE.
pingpong_one() {
  local t=$1 pinned=$2 rep=$3 n
  perftest_check
  if ((!PERFTEST_HAVE)); then record_error apps "ibv_$t" "$APP_PINGPONG_SIZE" "$pinned" "$rep" "$PERFTEST_REASON"; return; fi
  if ! command -v "ibv_$t" >/dev/null 2>&1; then
    record_error apps "ibv_$t" "$APP_PINGPONG_SIZE" "$pinned" "$rep" "ibv_$t not installed (Debian: ibverbs-utils)"
    return
  fi
  n=$( ((QUICK)) && echo 5000 || echo 50000)
  PAIR_ENV=(LD_LIBRARY_PATH="$LIB_DIR")
  SERVER_CMD=("ibv_$t" -d softrdma0 -g "$GID" -p @PORT@ -s "$APP_PINGPONG_SIZE" -n "$n")
  CLIENT_CMD=("${SERVER_CMD[@]}" 127.0.0.1)
  PAIR_RTT=1
  run_pair apps "ibv_$t" "$APP_PINGPONG_SIZE" "$pinned" "$rep"
  PAIR_RTT=0
}

# send_lat_events_one PINNED REP: ib_send_lat -e -s 8 (both sides block in the completion
# channel), and qperf tcp_lat 8 B pinned alike (the tcp suite runs it unpinned).
send_lat_events_one() {
  local pinned=$1 rep=$2 n
  perftest_check
  if ((!PERFTEST_HAVE)); then
    record_error apps ib_send_lat_events 8 "$pinned" "$rep" "$PERFTEST_REASON"
  else
    n=$( ((QUICK)) && echo 2000 || echo 20000)
    PAIR_ENV=(LD_LIBRARY_PATH="$LIB_DIR")
    SERVER_CMD=(ib_send_lat -d softrdma0 -x "$GID" -p @PORT@ -s 8 -n "$n" -F -e)
    CLIENT_CMD=("${SERVER_CMD[@]}" 127.0.0.1)
    PAIR_RTT=1
    run_pair apps ib_send_lat_events 8 "$pinned" "$rep"
    PAIR_RTT=0
  fi
  ((pinned)) || return 0
  if ! command -v qperf >/dev/null 2>&1; then record_error tcp tcp_lat 8 1 "$rep" "qperf not installed"; return; fi
  PAIR_ENV=()
  SERVER_CMD=(qperf -lp @PORT@)
  CLIENT_CMD=(qperf -lp @PORT@ -ip @PORT2@ -uu -t "$QPERF_TIME" -m 8 127.0.0.1 tcp_lat)
  run_pair tcp tcp_lat 8 1 "$rep"
}

# The latency distribution of ib_send_lat -s 64 (every iteration, -H; the histogram goes to
# raw/cdf-*.hist.txt.gz, the summary stays in the client file) and UCX tag_lat 64 B at
# CDF_UCX_RANKS (ucx_perftest prints one percentile per run), unpinned, one repetition.
run_cdf() {
  local n hist cli rank
  n=$(lat_iters 64)
  perftest_check
  if ((PERFTEST_HAVE)); then
    PAIR_ENV=(LD_LIBRARY_PATH="$LIB_DIR")
    SERVER_CMD=(ib_send_lat -d softrdma0 -x "$GID" -p @PORT@ -s 64 -n "$n" -F)
    CLIENT_CMD=("${SERVER_CMD[@]}" -H 127.0.0.1)
    run_pair cdf ib_send_lat 64 0 0
    cli="$RAW/cdf-ib_send_lat-64-p0-r0.client.txt"
    hist="$RAW/cdf-ib_send_lat-64-p0-r0.hist.txt"
    if [[ -f "$cli" ]]; then
      grep -E '^[0-9]+, [0-9.]+$' "$cli" >"$hist"
      grep -vE '^[0-9]+, [0-9.]+$' "$cli" >"$cli.tmp" && mv "$cli.tmp" "$cli"
      gzip -f "$hist"
    fi
  else
    record_error cdf ib_send_lat 64 0 0 "$PERFTEST_REASON"
  fi
  for rank in "${CDF_UCX_RANKS[@]}"; do
    if ! command -v ucx_perftest >/dev/null 2>&1; then
      record_error cdf "tag_lat_r$rank" 64 0 0 "ucx_perftest not installed (Debian: ucx-utils)"
      continue
    fi
    PAIR_ENV=("UCX_TLS=posix,cma")
    SERVER_CMD=(ucx_perftest -p @PORT@)
    CLIENT_CMD=(ucx_perftest 127.0.0.1 -p @PORT@ -t tag_lat -s 64 -n "$n" -w $((n / 10 + 1)) -v -R "$rank")
    run_pair cdf "tag_lat_r$rank" 64 0 0
  done
}

run_apps() {
  local rep pinned
  log "application patterns: ibv_{rc,ud}_pingpong -s $APP_PINGPONG_SIZE, ib_send_lat -e -s 8, qperf tcp_lat pinned, UCX tag_lat $APP_PINGPONG_SIZE B; latency CDF"
  for rep in $(seq 0 $((REPEAT - 1))); do
    for pinned in 0 1; do
      pingpong_one rc_pingpong "$pinned" "$rep"
      pingpong_one ud_pingpong "$pinned" "$rep"
      send_lat_events_one "$pinned" "$rep"
      ucx_one tag_lat "$APP_PINGPONG_SIZE" "$pinned" "$rep"
    done
  done
  run_cdf
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

# ---------------------------------------------------------------- scale
# run_pairs SUITE TEST SIZE REP N: N server/client pairs at once, one free port each, all
# in one SOFTRDMA_NAMESPACE. SERVER_CMD / CLIENT_CMD / PAIR_ENV as for run_pair. Every
# server listens before any client starts; one row per pair, test "TEST-pairI".
run_pairs() {
  local suite=$1 test=$2 size=$3 rep=$4 n=$5
  local ns="b$$-$RANDOM$RANDOM" i w p deadline listening rc srv_rc
  local -a ports=() spids=() cpids=() rcs=() clis=() srvs=() cmds=() s_cmd c_cmd
  NAMESPACES+=("$ns")
  for ((i = 0; i < n; i++)); do
    clis+=("$RAW/$suite-$test-pair$i-$size-p0-r$rep.client.txt")
    srvs+=("$RAW/$suite-$test-pair$i-$size-p0-r$rep.server.txt")
    while :; do
      p=$(free_port) || { record_error "$suite" "$test-pair$i" "$size" 0 "$rep" "no free TCP port"; return; }
      [[ " ${ports[*]} " == *" $p "* ]] || break
    done
    ports+=("$p")
  done
  for ((i = 0; i < n; i++)); do
    s_cmd=()
    for w in "${SERVER_CMD[@]}"; do s_cmd+=("${w//@PORT@/${ports[i]}}"); done
    timeout -k 5 "$TIMEOUT" env SOFTRDMA_NAMESPACE="$ns" "${PAIR_ENV[@]}" "${STDBUF[@]}" "${s_cmd[@]}" \
      </dev/null >"${srvs[i]}" 2>&1 &
    spids+=($!)
    PIDS+=($!)
  done
  deadline=$((SECONDS + 20))
  while :; do
    listening=0
    for ((i = 0; i < n; i++)); do port_in_use "${ports[i]}" listen && listening=$((listening + 1)); done
    ((listening == n || SECONDS >= deadline)) && break
    for ((i = 0; i < n; i++)); do alive "${spids[i]}" || break 2; done
    sleep 0.05
  done
  if ((listening == n)); then
    for ((i = 0; i < n; i++)); do
      c_cmd=()
      for w in "${CLIENT_CMD[@]}"; do c_cmd+=("${w//@PORT@/${ports[i]}}"); done
      cmds+=("${c_cmd[*]}")
      timeout -k 5 "$TIMEOUT" env SOFTRDMA_NAMESPACE="$ns" "${PAIR_ENV[@]}" "${STDBUF[@]}" "${c_cmd[@]}" \
        </dev/null >"${clis[i]}" 2>&1 &
      cpids+=($!)
      PIDS+=($!)
    done
    for ((i = 0; i < n; i++)); do
      rc=0
      wait "${cpids[i]}" || rc=$?
      forget_pid "${cpids[i]}"
      rcs+=("$rc")
    done
  fi
  deadline=$((SECONDS + 5))
  for ((i = 0; i < n; i++)); do
    while ((SECONDS < deadline)) && alive "${spids[i]}"; do sleep 0.05; done
    kill -TERM -- "-${spids[i]}" 2>/dev/null
    srv_rc=0
    wait "${spids[i]}" 2>/dev/null || srv_rc=$?
    forget_pid "${spids[i]}"
    if ((listening == n)); then
      record "$suite" "$test-pair$i" "$size" 0 "$rep" "${rcs[i]}" "raw/${clis[i]##*/}" "raw/${srvs[i]##*/}" \
        "${cmds[i]} (server rc $srv_rc, $n pairs at once)"
    else
      cp "${srvs[i]}" "${clis[i]}"
      record "$suite" "$test-pair$i" "$size" 0 "$rep" -2 "raw/${clis[i]##*/}" "raw/${srvs[i]##*/}" \
        "not all $n servers listened"
    fi
  done
  rm -f -- /dev/shm/softrdma-"$ns"-*
  if ((listening == n)); then
    printf '  %-9s %-16s %8s %d pairs  rep %s: exit codes %s\n' "$suite" "$test" "$size" "$n" "$rep" \
      "${rcs[*]}" | tee -a "$OUT/run.log"
  else
    log "  $suite $test $size rep $rep: only $listening of $n servers listened"
  fi
}

# Scale: the scale program (many QPs in one process), then perftest with many QPs
# (ib_write_bw -q 64 against -q 1) and with four process pairs at once.
run_scale() {
  local rep spec label swr rwr ns rc q size args have=1 i
  build_scale
  for rep in $(seq 0 $((REPEAT - 1))); do
    for spec in "${SCALE_CONFIGS[@]}"; do
      read -r label swr rwr <<<"$spec"
      if [[ -z "$SCALE_BIN" || ! -e "$LIB_DIR/libibverbs.so.1" ]]; then
        echo "{\"test\":\"scale\",\"config\":\"$label\",\"qps\":$SCALE_QPS,\"error\":\"the scale program or softrdma's library is missing (run.log)\"}" >>"$OUT/scale.jsonl"
        continue
      fi
      ns="b$$-scale-$label-r$rep"
      NAMESPACES+=("$ns")
      rc=0
      timeout -k 5 $((TIMEOUT * 2)) env SOFTRDMA_NAMESPACE="$ns" LD_LIBRARY_PATH="$LIB_DIR" "$SCALE_BIN" \
        --qps "$SCALE_QPS" --send-wr "$swr" --recv-wr "$rwr" --config "$label" ${GID:+--gid "$GID"} \
        </dev/null >"$RAW/scale-$label-r$rep.jsonl" 2>"$RAW/scale-$label-r$rep.stderr.txt" || rc=$?
      rm -f -- /dev/shm/softrdma-"$ns"-*
      cat "$RAW/scale-$label-r$rep.jsonl" >>"$OUT/scale.jsonl"
      if ((rc != 0)) && ! grep -q '"error"' "$RAW/scale-$label-r$rep.jsonl"; then
        printf '{"test":"scale","config":"%s","qps":%s,"error":"exit code %s%s"}\n' "$label" "$SCALE_QPS" "$rc" \
          "$( ((rc == 124 || rc == 137)) && echo ' (timed out)')" >>"$OUT/scale.jsonl"
      fi
      printf '  scale     %-16s %8s QPs rep %s: %s\n' "$label" "$SCALE_QPS" "$rep" \
        "$( ((rc == 0)) && echo ok || echo "FAILED (rc $rc)")" | tee -a "$OUT/run.log"
    done
  done

  perftest_ready || have=0
  ((have)) && log "scale: ib_write_bw -q 1 / -q 64 and $SCALE_PAIRS pairs at once, -D $SCALE_DURATION"
  PAIR_ENV=(LD_LIBRARY_PATH="$LIB_DIR")
  for rep in $(seq 0 $((REPEAT - 1))); do
    for size in "${SCALE_SIZES[@]}"; do
      for q in 1 64; do
        if ((!have)); then record_error qps "ib_write_bw-q$q" "$size" 0 "$rep" "$REASON"; continue; fi
        # Duration mode: the iteration count would be per QP, and perftest's peak
        # bandwidth is quadratic in the total.
        args=(-d softrdma0 -x "$GID" -p @PORT@ -s "$size" -D "$SCALE_DURATION" -F -q "$q")
        SERVER_CMD=(ib_write_bw "${args[@]}")
        CLIENT_CMD=(ib_write_bw "${args[@]}" 127.0.0.1)
        run_pair qps "ib_write_bw-q$q" "$size" 0 "$rep"
      done
      if ((!have)); then
        for ((i = 0; i < SCALE_PAIRS; i++)); do
          record_error pairs "ib_write_bw-pair$i" "$size" 0 "$rep" "$REASON"
        done
        continue
      fi
      args=(-d softrdma0 -x "$GID" -p @PORT@ -s "$size" -D "$SCALE_DURATION" -F)
      SERVER_CMD=(ib_write_bw "${args[@]}")
      CLIENT_CMD=(ib_write_bw "${args[@]}" 127.0.0.1)
      run_pairs pairs ib_write_bw "$size" "$rep" "$SCALE_PAIRS"
    done
  done
}

# Instructions per iteration: the client of each test under callgrind at two iteration
# counts (server native on CPU 0, valgrind on CPU 1); report.py takes the difference.
# The larger run's callgrind_annotate top functions go to raw/*.top.txt; every profile is
# kept as raw/*.callgrind.out.gz (call counts of the verbs).
run_callgrind() {
  local have=1 rep t n args base out top reason
  local TIMEOUT=$((TIMEOUT * 4)) # valgrind runs the client ~50x slower
  perftest_ready || have=0
  reason=$REASON
  if ((have)) && ! command -v valgrind >/dev/null 2>&1; then have=0; reason="valgrind not installed"; fi
  ((have)) && log "callgrind: clients of ${CALLGRIND_TESTS[*]} -s 8 at -n ${CALLGRIND_ITERS[*]}"
  PAIR_ENV=(LD_LIBRARY_PATH="$LIB_DIR")
  for rep in $(seq 0 $((REPEAT - 1))); do
    for t in "${CALLGRIND_TESTS[@]}"; do
      for n in "${CALLGRIND_ITERS[@]}"; do
        if ((!have)); then record_error callgrind "ib_$t-n$n" 8 1 "$rep" "$reason"; continue; fi
        base="callgrind-ib_$t-n$n-8-p1-r$rep"
        out="$RAW/$base.callgrind.out"
        args=(-d softrdma0 -x "$GID" -p @PORT@ -s 8 -n "$n" -F)
        [[ $t == *_bw ]] && args+=(-N) # the peak-bandwidth pass is quadratic in -n
        SERVER_CMD=("ib_$t" "${args[@]}")
        CLIENT_CMD=(valgrind --tool=callgrind "--callgrind-out-file=$out" "ib_$t" "${args[@]}" 127.0.0.1)
        rm -f -- "$out" "$out.gz"
        run_pair callgrind "ib_$t-n$n" 8 1 "$rep"
        [[ -s "$out" ]] || { rm -f -- "$out"; continue; }
        if [[ $n == "${CALLGRIND_ITERS[-1]}" ]] && command -v callgrind_annotate >/dev/null 2>&1; then
          top="$RAW/callgrind-ib_$t-8-p1-r$rep.top.txt"
          {
            echo "# ib_$t -s 8 -n $n, client under callgrind: top functions by self Ir"
            callgrind_annotate --inclusive=no --auto=no "$out" 2>&1 | cg_top 12
            echo
            echo "# the same by inclusive Ir"
            callgrind_annotate --inclusive=yes --auto=no "$out" 2>&1 | cg_top 12
          } | sed "s|$ROOT|<repo>|g" >"$top"
        fi
        gzip -f "$out"
      done
    done
  done
}

# cg_top N: the program total and the first N function lines of callgrind_annotate.
cg_top() {
  awk -v n="$1" '/PROGRAM TOTALS/ { print; next }
    /file:function/ { f = 1; next }
    f == 1 && /^-+$/ { f = 2; next }
    f == 2 && NF && c < n { print; c++ }'
}

# ---------------------------------------------------------------- main
log "softrdma bench: out $OUT, repeat $REPEAT (paired targets $TARGET_REPEAT)$( ((QUICK)) && echo ', quick'), suites $ONLY"
install_deps
build_softrdma
{
  echo "date: $(date -Is)"
  echo "git: $(git -C "$ROOT" describe --always --dirty 2>/dev/null)"
  echo "kernel: $(uname -sr)"
  echo "cpu: $(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -n1), $(nproc) online"
  echo "load: $(cut -d' ' -f1-3 /proc/loadavg)"
  echo "repeat: $REPEAT"
  echo "target_repeat: $TARGET_REPEAT"
  echo "quick: $QUICK"
  echo "sizes: ${SIZES[*]}"
  for p in perftest qperf ucx-utils python3-matplotlib valgrind; do
    echo "$p: $(dpkg-query -W -f='${Version}' "$p" 2>/dev/null)"
  done
} >"$OUT/meta.txt"
printf 'suite\ttest\tsize\tpinned\trep\trc\tclient\tserver\tcmd\trtt_before_ns\trtt_after_ns\n' >"$OUT/runs.tsv"

# The limits program measures the machine state around every latency measurement.
PAIR_RTT=0
STATE_RTT=0
if want perftest || want ucx || want ucx_verbs; then
  build_limits
  if [[ -n "$(machine_rtt)" ]]; then
    STATE_RTT=1
  else
    log "no cache-line round trip (the limits program did not build or run; run.log):" \
      "latency rows will not record the machine state"
  fi
fi
want limits && run_limits
if want perftest || want ucx; then run_paired_targets; fi
want perftest && run_perftest
want ucx && run_ucx
want ucx_verbs && run_ucx_verbs
want tcp && run_tcp
want idle && run_idle
want scale && run_scale
want callgrind && run_callgrind
want apps && run_apps

echo "load_end: $(cut -d' ' -f1-3 /proc/loadavg)" >>"$OUT/meta.txt"
log "writing the report"
if /usr/bin/python3 "$HERE/report.py" "$OUT"; then
  log "report: $OUT/report.md"
  sed -n '/^## Targets/,/^## /p' "$OUT/report.md" | sed '$d'
else
  log "report.py failed; raw results are in $OUT"
fi
exit 0
