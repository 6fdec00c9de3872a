#!/usr/bin/env bash
# Dependencies, build, and the whole test suite (GPU tests skip cleanly without a GPU); then the CPU build a machine
# without CUDA gets, under ASan+UBSan, running the CPU tests again (tools/cpu-check.sh), and a short fuzzing of the
# loaders from that build.
set -euo pipefail
cd "$(dirname "$0")/.."
tools/install-deps.sh
tools/install-python.sh   # PyTorch and pytest in .venv, for tests/python (registered when .venv exists)
tools/build.sh
ctest --test-dir build -j "$(nproc)" --output-on-failure --timeout 600 | grep -vE "^ *Start +[0-9]+:|^ *[0-9]+/[0-9]+ Test +#[0-9]+: .* (Passed|Skipped)"
tools/cpu-check.sh
# The loaders under libFuzzer (clang, sanitizers): a fixed number of inputs from a fixed seed.
tools/fuzz.sh --ci
