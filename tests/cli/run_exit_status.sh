#!/usr/bin/env bash
# softrdma run returns its command's exit status, 128+N for a command killed
# by signal N, 127 for a command not found, 126 for one not executable, 125
# when the library cannot open its device; and `--` lets a command start
# with '-'.
set -euo pipefail
# shellcheck source-path=SCRIPTDIR source=cli_lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/cli_lib.sh"
cli_init cli_run_exit_status
cli_need_run

out="$SR_TMP/out"
for status in 0 1 7 200 255; do
  cli_run "$out" run sh -c "exit $status"
  ((CLI_RC == status)) || sr_fail "sh -c 'exit $status' under softrdma run gave $CLI_RC"
done
cli_run "$out" run -- sh -c 'exit 3'
((CLI_RC == 3)) || sr_fail "run -- sh -c 'exit 3' gave $CLI_RC"

# The command replaces softrdma: a signal that kills it kills "softrdma run",
# which the calling shell reports as 128+N.
cli_run "$out" run sh -c 'kill -TERM $$'
((CLI_RC == 128 + 15)) || sr_fail "a command killed by SIGTERM gave $CLI_RC, expected 143"
cli_run "$out" run sh -c 'kill -KILL $$'
((CLI_RC == 128 + 9)) || sr_fail "a command killed by SIGKILL gave $CLI_RC, expected 137"

cli_run "$out" run softrdma-no-such-command-$$
((CLI_RC == 127)) || sr_fail "a missing command gave $CLI_RC, expected 127"
grep -q 'No such file or directory' "$out" || sr_fail "a missing command is not explained"
touch "$SR_TMP/not-executable"
cli_run "$out" run "$SR_TMP/not-executable"
((CLI_RC == 126)) || sr_fail "a non-executable file gave $CLI_RC, expected 126"

# A library that cannot open its device (an incompatible registry in
# /dev/shm, as left by another softrdma version): 125, the command not run.
bad_ns="$SR_NS-bad"  # removed with the test's namespace (softrdma-$SR_NS-*)
head -c 4096 /dev/urandom >"/dev/shm/softrdma-$bad_ns-$(id -u)-registry"
SOFTRDMA_NAMESPACE=$bad_ns cli_run "$out" run echo ran
((CLI_RC == 125)) || sr_fail "a device the library cannot open gave $CLI_RC, expected 125"
grep -q '^ran$' "$out" && sr_fail "the command ran although the device could not be read"
grep -q 'could not read the RDMA devices' "$out" || sr_fail "the failure is not explained"

# Arguments reach the command unchanged, spaces and all.
cli_run "$out" run printf '[%s]' 'a b' '' '-c'
[[ "$(cat "$out")" == '[a b][][-c]' ]] || sr_fail "arguments changed on the way"
sr_log "PASS: statuses 0 1 7 200 255, 128+signal, 125 (device unreadable), 126, 127, arguments intact"
