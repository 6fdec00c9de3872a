#!/usr/bin/env bash
# Turns the shared measurement tables (NCCL steps, SDPA kernels) into the CSV that
# `tasp calibrate --fit` reads. Usage: tools/measurements-to-csv.sh NCCL_STEPS.txt [SDPA.txt] > OUT.csv
# Kernel rows are taken from the FlashAttention-2 lines (the kernel class our executor runs).
set -euo pipefail
[[ $# -ge 1 ]] || { echo "usage: $0 NCCL_STEPS.txt [SDPA.txt]" >&2; exit 2; }
echo "kind,ranks,bytes,B,H,S,D,causal,ms"
awk '/^n=/ {
  n = substr($1, 3); mib = $2; sub("B=", "", mib); if (mib == "") mib = $3;
  line = $0; sub(/^[^|]*MiB */, "", line);
  split(line, parts, "|");
  for (i in parts) {
    split(parts[i], f, " ");
    kind = f[1]; sub(/\(.*/, "", kind);
    for (j = 2; j <= length(f); j++) if (f[j] == "ms") ms = f[j-1];
    printf "%s,%d,%d,,,,,,%s\n", kind, n, mib * 1048576, ms;
  }
}' "$1"
if [[ $# -ge 2 ]]; then
  awk '/^SDPA/ && $7 == "FLASH_ATTENTION" {
    for (i = 2; i <= 6; i++) { split($i, kv, "="); v[kv[1]] = kv[2] }
    printf "attention,,,%d,%d,%d,%d,%d,%s\n", v["B"], v["H"], v["S"], v["D"], v["causal"] == "True", $8;
  }' "$2"
fi
