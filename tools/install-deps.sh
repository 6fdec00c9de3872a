#!/usr/bin/env bash
# Installs what tasp needs on Debian 12 / Ubuntu 24.04 (idempotent). The CUDA toolkit and NCCL are
# expected to be on the machine already when the GPU parts are wanted; the CPU build works without them.
set -euo pipefail
pkgs=(build-essential cmake ninja-build libboost-dev libyaml-cpp-dev libcli11-dev libeigen3-dev
      nlohmann-json3-dev libgtest-dev clang libclang-rt-dev python3-venv)
missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi
