#!/usr/bin/env bash
# A/B of an executor change on this host's GPUs: `tasp run --backend cuda` of the same workloads and schemes with the
# default build and with each variant, taking turns for ROUNDS rounds in one call (the order cancels the GPUs' drift),
# then one line per workload and scheme with every run's median ms and each variant's median over the default's
# (< 1: the variant is faster). Each run is heated $HEAT_MS (2000) ms first.
# Usage: tools/gpu/ab-run.sh ROUNDS 'VAR=a|BIN=path|--option=value ...' SCHEMES [WORKLOAD | set:NAME ...]
#   (a variant's --option=value goes to its `tasp run`, e.g. '--gather-pieces=2|--gather-pieces=3')
#   SCHEMES: comma-separated (e.g. allgather,ulysses); the workloads as compare.sh takes them (FABRIC= too).
#   BASE_PATCH=file (git diff BASE -- executor/ > file): the change's base is built too (lib/build-base.sh) and taken
#   as one more variant, BIN=build-base/tools/tasp. ITERS (5) timed runs each; TASP_RUN_ARGS more `tasp run` options;
#   RUN_TIMEOUT (300) seconds a run (a variant that hangs NCCL, e.g. NCCL_SHM_USE_CUDA_MEMCPY=1 on 2026-11-27, costs it).
# Raw lines in $OUT/ab-run-<tag>.txt ($AB_TAG or "ab"), each run's output in $OUT/ab-run-<tag>.log.gz; the table on
# stdout (two tags in one call stay within the 8 files the device tool brings back).
set -uo pipefail
source "$(dirname "$0")/lib/common.sh"
rounds=$1 spec=$2 schemes=$3
shift 3
[ "$N" -ge 2 ] || { echo "ab-run.sh needs 2 or more GPUs"; exit 2; }
device_info
build tasp
spec=$(base_variant "$spec") || exit 1
list=$(workloads "$@") || exit 2
mapfile -t cfgs <<< "$list"
tag=${AB_TAG:-ab}
raw="$OUT/ab-run-$tag.txt" log="$OUT/ab-run-$tag.log"
IFS='|' read -ra variants <<< "$spec"
: > "$raw"
for ((r = 1; r <= rounds; ++r)); do
  for w in "${cfgs[@]}"; do
    for s in ${schemes//,/ }; do
      round_order "$r" "" "${variants[@]}"
      for v in "${order[@]}"; do
        name=${v:-default} bin=$T envs=() args=()
        for x in $v; do case $x in BIN=*) bin=${x#BIN=} ;; --*) args+=("${x/=/ }") ;; *) envs+=("$x") ;; esac; done
        out=$(env "${envs[@]}" timeout "${RUN_TIMEOUT:-300}" $bin run --backend cuda -t $TOPO -s $s -w "$w" --pass fwd+bwd --iters "${ITERS:-5}" \
              --warmup 2 --heat-ms "${HEAT_MS:-2000}" ${TASP_RUN_ARGS:-} ${args[@]+${args[@]}} 2>&1)
        echo "== round $r $name $s $w"$'\n'"$out" >> "$log"
        m=$(echo "$out" | ms_of)
        [ "$m" != 0 ] && printf '%s\t%s\t%s\t%s\n' "$name" "$w $s" fwd+bwd "$m" >> "$raw" || echo "[$name] $s $w round $r failed" | tee -a "$raw"
      done
    done
  done
done
gzip -f "$log"
python3 tools/gpu/lib/ab_table.py "$raw"
