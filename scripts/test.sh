#!/usr/bin/env bash
# Install what is missing, build, and run every test (unit and interop) with ctest.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

bash scripts/install-deps.sh
bash scripts/build.sh
# -j1: the interop tests busy-poll two processes each and one of them measures
# idle CPU time; they also carry RESOURCE_LOCK / RUN_SERIAL so -jN stays safe.
ctest --test-dir build --output-on-failure -j1
