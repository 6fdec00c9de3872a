#!/usr/bin/env bash
# Is a kernels/ change free of device-code changes? Compiles each CUDA file of kernels/ to an sm_90a cubin (no line
# info, so moved lines do not count) from REV and from the working tree, both at one scratch path (nvcc names an
# anonymous namespace after its file's path), and says which differ. A refactor whose cubins are identical needs no
# GPU run to keep the measured figures; one that changes them does. Needs nvcc only (no GPU).
# Usage: tools/same-cubin.sh [REV] [FILE.cu ...]   (default: HEAD, every kernels/*.cu); exit 1 when any differs.
set -euo pipefail
cd "$(dirname "$0")/.."
rev=${1:-HEAD}
shift $(( $# > 0 ? 1 : 0 ))
files=("$@")
[ ${#files[@]} -gt 0 ] || files=(kernels/*.cu)
NVCC=${NVCC:-$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
flags=(-DTASP_HAVE_CUDA=1 -O3 -DNDEBUG -arch=sm_90a --use_fast_math -std=c++17 -cubin -I.)
# compile TREE SUFFIX: the tree's kernels/ files at $tmp/src, each cubin to $tmp/NAME.SUFFIX.
compile() {
  rm -rf "$tmp/src" && mkdir -p "$tmp/src"
  if [ "$1" = work ]; then git ls-files -co --exclude-standard | tar -cf - -T - | tar -xf - -C "$tmp/src"
  else git archive "$1" | tar -x -C "$tmp/src"; fi
  for f in "${files[@]}"; do (cd "$tmp/src" && "$NVCC" "${flags[@]}" "$f" -o "$tmp/$(basename "$f").$2"); done
}
compile "$rev" old
compile work new
differ=0
for f in "${files[@]}"; do
  b=$(basename "$f")
  if cmp -s "$tmp/$b.old" "$tmp/$b.new"; then echo "same: $f"; else echo "DIFFERENT: $f"; differ=1; fi
done
exit $differ
