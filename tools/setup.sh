#!/usr/bin/env bash
# One command on a fresh machine: dependencies, build, and the main job on an embedded default.
set -euo pipefail
cd "$(dirname "$0")/.."
tools/install-deps.sh
tools/build.sh
build/tools/tasp plan --topology topologies/h200-hgx-8.yaml --scheme hamilton --causal -o build/plan.json
exec build/tools/tasp verify build/plan.json --topology topologies/h200-hgx-8.yaml
