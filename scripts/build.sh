#!/usr/bin/env bash
# Configure and build softrdma into build/ (the drop-in libraries land in build/lib).
# CMAKE_BUILD_TYPE may be overridden from the environment (default RelWithDebInfo).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

cmake -S . -B build -DCMAKE_BUILD_TYPE="${CMAKE_BUILD_TYPE:-RelWithDebInfo}"
cmake --build build -j"$(nproc)"
