#!/usr/bin/env bash
# One command on a fresh machine: dependencies, build, and the main job on an embedded default.
set -euo pipefail
cd "$(dirname "$0")/.."
tools/install-deps.sh
tools/build.sh
tools/install-python.sh --package-only   # .venv/bin/python: import tasp (PyTorch for tasp.torch: tools/install-python.sh)
# Main job: simulate every scheme on 8x H200 (built-in topology and fitted profile), a Llama-3-8B-like
# layer at 128K tokens, causal; prints the table and names the fastest.
exec build/tools/tasp simulate
