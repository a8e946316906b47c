#!/usr/bin/env bash
# --version, --help on the command and on each subcommand, and the usage
# errors with their documented exit codes.
set -euo pipefail
# shellcheck source-path=SCRIPTDIR source=cli_lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/cli_lib.sh"
cli_init cli_help_and_version

out="$SR_TMP/out"
cli_run "$out" --version
((CLI_RC == 0)) || sr_fail "--version exited with $CLI_RC"
grep -Eq '^softrdma [0-9]+\.[0-9]+\.[0-9]+ \(rdma-core 44 ABI: libibverbs\.so\.1\.14\.44, librdmacm\.so\.1\.3\.44\)$' "$out" ||
  sr_fail "unexpected --version output"

cli_run "$out" --help
((CLI_RC == 0)) || sr_fail "--help exited with $CLI_RC"
grep -q '^Usage: softrdma ' "$out" || sr_fail "--help shows no usage"
for sub in run doctor; do
  cli_run "$out" "$sub" --help
  ((CLI_RC == 0)) || sr_fail "$sub --help exited with $CLI_RC"
  grep -q "^Usage: softrdma $sub" "$out" || sr_fail "$sub --help shows no usage"
  grep -q '^Exit status:' "$out" || sr_fail "$sub --help documents no exit status"
  cli_run "$out" help "$sub"
  grep -q "^Usage: softrdma $sub" "$out" || sr_fail "help $sub shows no usage"
done

cli_run "$out"
((CLI_RC == 2)) || sr_fail "no arguments: exit $CLI_RC, expected 2"
cli_run "$out" frobnicate
((CLI_RC == 2)) || sr_fail "unknown subcommand: exit $CLI_RC, expected 2"
grep -q "unknown subcommand or option 'frobnicate'" "$out" || sr_fail "unknown subcommand not named"
cli_run "$out" doctor --bogus
((CLI_RC == 2)) || sr_fail "doctor --bogus: exit $CLI_RC, expected 2"
cli_run "$out" run
((CLI_RC == 125)) || sr_fail "run without a command: exit $CLI_RC, expected 125"
cli_run "$out" run --bogus
((CLI_RC == 125)) || sr_fail "run --bogus: exit $CLI_RC, expected 125"
sr_log "PASS: --version, --help of softrdma, run and doctor; usage errors exit 2 (125 for run)"
