#!/usr/bin/env bash
# Dependencies, build, and the whole test suite (GPU tests skip cleanly without a GPU).
set -euo pipefail
cd "$(dirname "$0")/.."
tools/install-deps.sh
tools/build.sh
ctest --test-dir build -j "$(nproc)" --output-on-failure --timeout 600
# The loaders under libFuzzer (clang, sanitizers): a fixed number of inputs from a fixed seed.
tools/fuzz.sh --ci
