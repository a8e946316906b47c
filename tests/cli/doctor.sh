#!/usr/bin/env bash
# softrdma doctor reports its four checks, names the library it found with
# softrdma0, exits with the status its findings call for (0 ok, 1 warnings,
# 3 failures), and its verdict on softrdma run matches what run really does.
set -euo pipefail
# shellcheck source-path=SCRIPTDIR source=cli_lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/cli_lib.sh"
cli_init cli_doctor

out="$SR_TMP/out"
cli_run "$out" doctor
for check in library "shared memory" "cross-memory attach" "softrdma run"; do
  grep -Eq "^\[(ok|warning|FAILED)\] +$check: " "$out" || sr_fail "no '$check' line"
done
grep -E '^\[ok\] +library: ' "$out" | grep -q "$SR_LIB_DIR: softrdma0, port 1 ACTIVE" ||
  sr_fail "the library line does not show $SR_LIB_DIR with softrdma0 port 1 ACTIVE"
expected=0
grep -q '^\[warning\]' "$out" && expected=1
grep -q '^\[FAILED\]' "$out" && expected=3
((CLI_RC == expected)) || sr_fail "doctor exited with $CLI_RC, its findings call for $expected"

run_out="$SR_TMP/run.out"
cli_run "$run_out" run true
if grep -Eq '^\[ok\] +softrdma run: ' "$out"; then
  ((CLI_RC == 0)) || sr_fail "doctor says softrdma run works, but it exited with $CLI_RC"
else
  ((CLI_RC == 124 || CLI_RC == 125)) || sr_fail "doctor says softrdma run fails, but it exited with $CLI_RC"
fi
# A library that cannot open its device (an incompatible registry in
# /dev/shm): a failure, and exit 3.
bad_ns="$SR_NS-bad"  # removed with the test's namespace (softrdma-$SR_NS-*)
head -c 4096 /dev/urandom >"/dev/shm/softrdma-$bad_ns-$(id -u)-registry"
SOFTRDMA_NAMESPACE=$bad_ns cli_run "$out" doctor
grep -Eq '^\[FAILED\] +library: .*lists no usable device' "$out" || sr_fail "an unusable device is not a failure"
((CLI_RC == 3)) || sr_fail "doctor with an unusable device exited with $CLI_RC, expected 3"
sr_log "PASS: four checks reported, exit $expected as the findings say, run verdict confirmed; an unusable device fails with exit 3"
