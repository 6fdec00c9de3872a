#!/usr/bin/env bash
# Refits the shipped H200 profiles from the committed measurements (no GPU needed):
#   comm: the shared NCCL step table (docs/measurements/h200-nccl-steps.csv, from tools/measurements-to-csv.sh);
#   kernels: tasp's own kernels on an H200, cold, hot and mixed: first the rates of the build nearest the fit set's
#            (docs/measurements/h200-tasp-kernel.csv, session 15), with which the executor's figures below are fitted,
#            then the compute alone refitted from the current kernels' rates (CURRENT: the sweeps h200-kernels-s19
#            and -s22 of tools/gpu/kernel-profile.sh together, kernels whose long walks are the same, on two H200s:
#            fitted alone, their D=128 forward asymptotes differ by 3%), the executor's
#            figures kept: fitted in one step from rates newer than the fit set's timelines, NCCL's share of the SMs
#            would absorb the kernels' speed-up;
#   executor: the newest fit set's timelines on 2x H200 (docs/measurements/h200x2-model/fit-*/, from
#            tools/gpu/fit-set.sh with the kernels of the same build: older sets timed older kernels, and the
#            share of the SMs lost to NCCL would absorb their difference to the new rates);
#   H100 profiles: compute only, from docs/measurements/h100-tasp-kernel.csv (tools/gpu/kernel-profile.sh on one
#            H100); the rest of each profile is kept (--base).
# Usage: tools/refit-profiles.sh [TASP]   (default build/tools/tasp)
set -euo pipefail
cd "$(dirname "$0")/.."
T=${1:-build/tools/tasp}
M=docs/measurements
FITSET=$(ls -d $M/h200x2-model/fit-*/ | sort | tail -1)
fit=(--fit $M/h200-nccl-steps.csv $M/h200-tasp-kernel.csv --timeline "$FITSET"fit-*.json -q)
CURRENT=($M/h200-kernels-s19/kernel.csv $M/h200-kernels-s22/kernel.csv $M/h200-kernels-s23/kernel.csv)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
# The H200 profiles: everything from the fit set and its kernel rates, then the compute from the current rates.
h200() {  # topology, description
  # The committed profile as the base (what the fit set does not fit, e.g. the mixed clock's fractions, which NCCL's
  # share is fitted beside), not the one built into $T: the result then depends on the repository's files alone.
  $T calibrate "${fit[@]}" --base topologies/$1.profile.yaml -t "$1" --name "$1" -o "$tmp/$1.yaml"
  $T calibrate --fit "${CURRENT[@]}" --base "$tmp/$1.yaml" -t "$1" --name "$1" -q \
    -o topologies/$1.profile.yaml --description "$2"
}
h200 h200-hgx-8 \
  "8x H200 HGX (NVSwitch), NCCL 2.28.3. Fitted by tools/refit-profiles.sh: comm from the shared NCCL step table; \
compute from tasp's own Hopper kernels on H200s, forward and backward, cold, hot and with forward and backward taking \
turns (sustained fractions); the executor's pass starts, step gaps, NCCL's share of the SMs and the dQ finish from \
the timelines of the newest fit set on 2x H200 (docs/measurements/h200x2-model/fit-*) with the kernel rates of its \
time; then the compute alone from the current kernels' rates (docs/measurements/h200-kernels-s19 and -s22)."
h200 h200-hgx-4 \
  "H200 SXM. Not measured on 4 GPUs: the figures of the 8x H200 HGX fit (same NVLink/NVSwitch generation, same SM \
count and tensor-core rate, same kernels); flows between nodes are bounded by the topology's NIC links."
for p in h100-hgx-8 h100-cluster-2x8 h100-cluster-4x8; do
  desc=$(sed -n '/^description: >-/,/^[a-z_]*:/p' topologies/$p.profile.yaml | sed '1d;$d' | tr -s ' \n' ' ' | sed 's/^ //;s/ $//')
  $T calibrate --fit $M/h100-tasp-kernel.csv --base topologies/$p.profile.yaml -t topologies/$p.yaml --name $p \
    --description "$desc" -q -o topologies/$p.profile.yaml.new && mv topologies/$p.profile.yaml.new topologies/$p.profile.yaml
done
echo "refit: topologies/h200-hgx-8.profile.yaml topologies/h200-hgx-4.profile.yaml topologies/h100-*.profile.yaml"
