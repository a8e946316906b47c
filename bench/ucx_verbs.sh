# shellcheck shell=bash
# bench/run.sh's "ucx_verbs" suite (sourced by run.sh; uses its run_pair, lat_iters,
# bw_iters, log, record_error and LIB_DIR): the same UCP program, Debian's ucx_perftest,
# over softrdma against over UCX's own shared memory, in the same run:
#   ucx_verbs  UCX_TLS=rc_verbs,ud_verbs on softrdma0:1, each process under
#              `softrdma run` (UCP's wire-up needs ud_verbs beside rc_verbs;
#              docs/middleware.md)
#   ucx_posix  UCX_TLS=posix: UCX's shared-memory transport alone (no cma: the
#              "ucx" suite measures posix,cma)
# tag_lat and tag_bw at UCX_VERBS_SIZES; for each size and repetition the two run back
# to back, so that their ratio compares runs taken in the same machine state. Latency
# runs record the cache-line round trip around them as run.sh's other latency runs do.

UCX_VERBS_SIZES=(8 4096 1048576)
# tag_bw moves at most this much per run (and at most 100,000 messages): run.sh's
# bw_iters (up to 4 GiB, 10^6 messages) outlasts the 60 s timeout when other work shares
# the CPUs (UCX posix tag_bw 4 KiB timed out at 10^6 messages on the 2-vCPU VM).
UCX_VERBS_BW_BYTES=1073741824
UCX_VERBS_BW_MAX_ITERS=100000
ucx_verbs_bw_iters() {
  local n
  n=$(bw_iters "$1")
  ((n * $1 > UCX_VERBS_BW_BYTES)) && n=$((UCX_VERBS_BW_BYTES / $1))
  clamp "$n" 20 "$UCX_VERBS_BW_MAX_ITERS"
}

# The softrdma command next to the library (build/lib -> build/bin/softrdma).
ucx_verbs_softrdma_bin() {
  local bin
  for bin in "$LIB_DIR/../bin/softrdma" "$ROOT/build/bin/softrdma"; do
    [[ -x "$bin" ]] && { (cd "$(dirname "$bin")" && echo "$PWD/softrdma"); return 0; }
  done
  return 1
}

# ucx_verbs_one SUITE TEST SIZE REP
ucx_verbs_one() {
  local suite=$1 t=$2 size=$3 rep=$4 n softrdma run=()
  if ! command -v ucx_perftest >/dev/null 2>&1; then
    record_error "$suite" "$t" "$size" 0 "$rep" "ucx_perftest not installed (Debian: ucx-utils)"
    return
  fi
  if [[ $t == tag_lat ]]; then n=$(lat_iters "$size"); else n=$(ucx_verbs_bw_iters "$size"); fi
  if [[ $suite == ucx_verbs ]]; then
    if ! softrdma=$(ucx_verbs_softrdma_bin); then
      record_error "$suite" "$t" "$size" 0 "$rep" "no softrdma command next to $LIB_DIR (build it: cmake --build build --target softrdma)"
      return
    fi
    run=("$softrdma" run --)
    PAIR_ENV=(UCX_NET_DEVICES=softrdma0:1 UCX_TLS=rc_verbs,ud_verbs UCX_WARN_UNUSED_ENV_VARS=n)
  else
    PAIR_ENV=(UCX_TLS=posix UCX_WARN_UNUSED_ENV_VARS=n)
  fi
  SERVER_CMD=("${run[@]}" ucx_perftest -p @PORT@)
  CLIENT_CMD=("${run[@]}" ucx_perftest 127.0.0.1 -p @PORT@ -t "$t" -s "$size" -n "$n" -w $((n / 10 + 1)) -v)
  PAIR_RTT=0
  [[ $t == tag_lat ]] && PAIR_RTT=1
  run_pair "$suite" "$t" "$size" 0 "$rep"
  PAIR_RTT=0
}

run_ucx_verbs() {
  local rep t size suite
  if ! ucx_verbs_softrdma_bin >/dev/null && [[ -f "$ROOT/build/CMakeCache.txt" ]]; then
    log "building the softrdma command (-j${BENCH_JOBS:-2})"
    cmake --build "$ROOT/build" -j"${BENCH_JOBS:-2}" --target softrdma >>"$OUT/run.log" 2>&1 ||
      log "build of the softrdma command failed (see run.log)"
  fi
  log "UCX over softrdma (rc_verbs,ud_verbs under softrdma run) against UCX over posix, back to back: tag_lat, tag_bw at ${UCX_VERBS_SIZES[*]} B"
  for rep in $(seq 0 $((REPEAT - 1))); do
    for t in tag_lat tag_bw; do
      for size in "${UCX_VERBS_SIZES[@]}"; do
        for suite in ucx_verbs ucx_posix; do ucx_verbs_one "$suite" "$t" "$size" "$rep"; done
      done
    done
  done
}
