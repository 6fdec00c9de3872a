#!/usr/bin/env bash
# The base of a source change, built beside the change for an A/B on one GPU (the device tool has the working
# tree but no git history): copies the tree without its build folders, applies PATCH in reverse there and builds
# tasp into build-base/ (its tools/tasp is what ab.sh's and ab-run.sh's BIN= variant takes). Make PATCH with
# `git diff BASE -- kernels/ > base.patch` (or executor/, ...) before the run.
# Usage: tools/gpu/lib/build-base.sh PATCH
set -uo pipefail
cd "$(dirname "$0")/../../.."
patch_file=$(realpath "$1")
src=/tmp/tasp-base
rm -rf "$src" && mkdir -p "$src"
tar --exclude='./build*' --exclude=./.git -cf - . | tar -xf - -C "$src"
(cd "$src" && patch -s -p1 -R < "$patch_file") || { echo "build-base: $1 does not reverse-apply"; exit 1; }
OUT=${OUT:-/tmp/tasp-out} BUILD_DIR="$PWD/build-base" "$src/tools/gpu/lib/build.sh" tasp
