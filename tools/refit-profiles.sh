#!/usr/bin/env bash
# Refits the shipped profiles from the measurements committed under docs/measurements/data/ (no GPU needed; a second
# run reproduces the files byte for byte):
#   comm:     the shared NCCL step table on 8x H200 (data/nccl/, from tools/measurements-to-csv.sh);
#   kernels:  tasp's own kernels on an H200, cold, hot and mixed (tools/gpu/model.sh sweep): first the rates of the
#             fit set's build (data/kernels/h200-fit-set-rates-*, swept in the same call as the fit set), with which
#             the executor's figures below are fitted, then the compute alone refitted from the current kernels' sweep
#             (CURRENT), the executor's figures kept: fitted in one step from rates newer than the fit set's timelines,
#             NCCL's share of the SMs would absorb the kernels' speed-up. CURRENT is one sweep of today's kernels (the
#             backward's last wave split, its tensor maps prefetched: 2-21% faster than the sweeps before it, which
#             described kernels that are gone);
#   executor: the fit set's timelines on 2x H200 (data/model/h200x2-fit-set-2026-11-26/, tools/gpu/model.sh fit-set,
#             with the kernels of the same build). A fit set of 2026-11-27 with its own sweep put NCCL's share at 0
#             and predicted six fresh runs 2-13% fast (the set has no head-parallel run, whose forward steps run beside
#             all-to-alls), where this one's share with today's compute predicts them within 3.7%
#             (docs/measurements/model.md); a set that holds such runs comes first;
#   H100 profiles: compute only, from the newest data/kernels/h100-sweep-* (tools/gpu/model.sh sweep on one H100, the
#             kernels of CURRENT); the rest of each profile is kept (--base);
#   fabrics:  the slow fabrics' comm from their NCCL steps (data/fabrics/): sockets on 2x H100 on the H100 profile,
#             sockets and host memory on 2x H200 on the H200 profile; the 2x H200 ones with the gather measured as one
#             broadcast a root (allgather-roots rows), so that `tasp run` on those profiles moves collectives so, and
#             the reduce as a broadcast from the other rank (reducescatter-roots rows, as tasp run moves it on 2 ranks).
# Usage: tools/refit-profiles.sh [TASP]   (default build/tools/tasp)
set -euo pipefail
cd "$(dirname "$0")/.."
T=${1:-build/tools/tasp}
D=docs/measurements/data
FITSET=$D/model/h200x2-fit-set-2026-11-26/
RATES=$D/kernels/h200-fit-set-rates-2026-11-26.csv
# The executor terms (pass starts, step gaps, NCCL's share of the SMs, the dQ finish) as the fit set gave them under the
# model of its day: since a merging forward step pays its merge (2026-11-27, simulator/compute_model.cpp), the same
# timelines refit NCCL's share at 0.275 (0.166 before), which puts allgather in steps of 4+2+1+1 on NVLink 12% over
# where 0.166 reads it within 3.7% (docs/measurements/model.md); kept until a fit set of today's kernels and pieces.
# REFIT_EXECUTOR=1 fits them again from FITSET.
fit=(--fit $D/nccl/h200x8-steps-2026-11-22.csv "$RATES" -q)
[ "${REFIT_EXECUTOR:-0}" = 1 ] && fit+=(--timeline "$FITSET"fit-*.json)
CURRENT=($D/kernels/h200-sweep-2026-11-27-tail-split.csv)
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
the timelines of the fit set on 2x H200 (docs/measurements/data/model/h200x2-fit-set-*) with the kernel rates of its \
time; then the compute alone from the current kernels' sweeps (docs/measurements/data/kernels/h200-sweep-*)."
h200 h200-hgx-4 \
  "H200 SXM. Not measured on 4 GPUs: the figures of the 8x H200 HGX fit (same NVLink/NVSwitch generation, same SM \
count and tensor-core rate, same kernels); flows between nodes are bounded by the topology's NIC links."
for p in h100-hgx-8 h100-cluster-2x8 h100-cluster-4x8; do
  desc=$(sed -n '/^description: >-/,/^[a-z_]*:/p' topologies/$p.profile.yaml | sed '1d;$d' | tr -s ' \n' ' ' | sed 's/^ //;s/ $//')
  $T calibrate --fit $D/kernels/h100-sweep-2026-11-27-tail-split.csv --base topologies/$p.profile.yaml -t topologies/$p.yaml --name $p \
    --description "$desc" -q -o topologies/$p.profile.yaml.new && mv topologies/$p.profile.yaml.new topologies/$p.profile.yaml
done
# The socket fabric on 2x H100: comm from its NCCL steps (data/fabrics/), the rest the H100 profile's.
$T calibrate --fit $D/fabrics/h100x2-socket-steps-2026-11-25.csv --base topologies/h100-hgx-8.profile.yaml \
  -t topologies/h100x2-socket.yaml --name h100x2-socket -q -o topologies/h100x2-socket.profile.yaml --description \
  "2x H100 with NCCL over sockets on loopback (NCCL's default socket threads): comm fitted by tools/refit-profiles.sh from \
tasp calibrate --measure there (docs/measurements/data/fabrics/h100x2-socket-steps-2026-11-25.csv; its ncclAllGather rows \
give collective_gbps, the rate of the steps tasp run --collectives runs as NCCL collectives); compute and executor terms the \
H100 profile's."
# The 2x H200 host's slow fabrics (sockets, host memory): comm from their NCCL steps there, the rest the H200 profile's.
# The steps as `tasp calibrate --measure` times them since 2026-11-27: kinds and sizes in rounds (a slow minute of the
# loopback shared by every kind), each 2-rank reduce as a broadcast from the other rank (as tasp run moves it).
fabric_h200() {  # fabric, steps' file's date and tag, what NCCL ran over (BASE: the profile whose other terms it keeps)
  $T calibrate --fit $D/fabrics/h200x2-$1-steps-$2.csv --base "${BASE:-topologies/h200-hgx-8.profile.yaml}" \
    -t topologies/h200x2-$1.yaml --name h200x2-$1 -q -o topologies/h200x2-$1.profile.yaml --description \
    "2x H200 with NCCL over $3: comm fitted by tools/refit-profiles.sh from tasp calibrate --measure there \
(docs/measurements/data/fabrics/h200x2-$1-steps-$2.csv; its gathers, one broadcast a root on a communicator of its own, \
give collective_gbps and collectives_per_root, its reduces, a broadcast from the other rank, reduce_gbps, and where \
measured a root's broadcast alone one_root_gbps); compute and executor terms the H200 profile's${4:-}."
}
fabric_h200 socket 2026-11-27-interleaved "sockets on loopback (NCCL's default socket threads)"
# Host memory with a root's broadcast alone too (broadcast-one-root: both directions share the medium, 44 GB/s alone
# against 31.7 each beside the other at 64 MiB), which times the steps of a plan pruned for its mask.
# NCCL's share of the SMs beside a kernel there 0, not NVLink's: its copies through host memory wait on PCIe in a few CTAs,
# and beside them for 88-100% of their time rank 1's backward kernels in runs with moved queries took 0.84-1.04x their
# predicted time with no share at all (2x H200, B=1 S=8192 H=32 and `medium`, 2026-11-27; docs/measurements/model.md).
sed 's/^  comm_compute_share: .*/  comm_compute_share: 0/' topologies/h200-hgx-8.profile.yaml > "$tmp/h200-shm-base.yaml"
BASE=$tmp/h200-shm-base.yaml fabric_h200 shm 2026-11-27-one-root "host memory (NCCL_P2P_DISABLE=1)" \
  ", but for NCCL's share of the SMs beside a kernel, 0 here (tools/refit-profiles.sh says why)"
echo "refit: topologies/h200-hgx-8.profile.yaml topologies/h200-hgx-4.profile.yaml topologies/h100-*.profile.yaml topologies/h100x2-socket.profile.yaml topologies/h200x2-*.profile.yaml"
