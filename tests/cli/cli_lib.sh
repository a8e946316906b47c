# shellcheck shell=bash
# Helpers for the tests of the softrdma command, on top of the interop
# helpers (sr_init, sr_fail, sr_skip, sr_need_tool, cleanup on exit).
#
# Environment (ctest passes both):
#   SOFTRDMA_TEST_BIN      the softrdma executable (default: <repo>/build/bin/softrdma)
#   SOFTRDMA_TEST_LIB_DIR  directory of softrdma's libraries (see ../interop/lib.sh)
#
# The programs under test get no LD_LIBRARY_PATH from here: `softrdma run`
# must provide it.

# shellcheck source=../interop/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/../interop/lib.sh"

cli_init() {
  sr_init "$@"
  local here
  here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
  SOFTRDMA_BIN=${SOFTRDMA_TEST_BIN:-$here/../../build/bin/softrdma}
  [[ -x "$SOFTRDMA_BIN" ]] || sr_fail "no softrdma command at '$SOFTRDMA_BIN': build it first"
  unset LD_LIBRARY_PATH
}

# cli_run OUTFILE ARGS...: `softrdma ARGS...` bounded by SR_TIMEOUT, stdout
# and stderr to OUTFILE; sets CLI_RC to its exit status.
cli_run() {
  local out=$1
  shift
  CLI_RC=0
  timeout -k 5 "$SR_TIMEOUT" "$SOFTRDMA_BIN" "$@" </dev/null >"$out" 2>&1 || CLI_RC=$?
  sed 's/^/  | /' "$out"
}

# Skips the test when this system refuses the namespaces `softrdma run`
# needs (exit 124), with softrdma's own explanation.
cli_need_run() {
  local out="$SR_TMP/need_run.out"
  cli_run "$out" run true
  ((CLI_RC == 124)) && sr_skip "softrdma run is refused here: $(head -1 "$out")"
  ((CLI_RC == 0)) || sr_fail "softrdma run true exited with $CLI_RC"
}
