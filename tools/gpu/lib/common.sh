# Sourced by every GPU entry point first: the repository root as working directory, $OUT (logs; the device
# tool sets it), NCCL without NVLink multicast (the lent machines' rule), and the helpers the entry points share.
cd "$(dirname "${BASH_SOURCE[0]}")/../../.."
OUT=${OUT:-/tmp/tasp-out}
mkdir -p "$OUT"
OUT_BEFORE=" $(ls "$OUT" | tr '\n' ' ') "  # what was there before this script (pack_logs leaves it alone)
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
T=${TASP_BIN:-build-gpu/tools/tasp}
N=$(nvidia-smi -L 2> /dev/null | wc -l)

# The topology of this machine's GPUs: the shipped machine file where there is one, else a switch of N GPUs.
case $N in 8) TOPO=${TOPO:-h200-hgx-8} ;; 4) TOPO=${TOPO:-h200-hgx-4} ;; *) TOPO=${TOPO:-complete:$N} ;; esac

# The fabric NCCL is forced onto (FABRIC=nvlink|shm|socket): a slow fabric on any 2+ GPU host. shm: through host
# memory; socket: TCP over loopback, about 1.7 GB/s on the lent 2x H100 (two nodes in miniature).
case ${FABRIC:-nvlink} in
  nvlink) ;;
  shm) export NCCL_P2P_DISABLE=1 ;;
  socket) export NCCL_P2P_DISABLE=1 NCCL_SHM_DISABLE=1 NCCL_SOCKET_IFNAME=lo NCCL_IB_DISABLE=1 ;;
  *) echo "FABRIC=$FABRIC: expected nvlink, shm or socket" >&2; exit 2 ;;
esac

# The shipped profile of this machine's GPU kind (PROFILE overrides): the H100 one on H100s, else the H200 box's of this
# size (h200-hgx-4 on 4 GPUs, else h200-hgx-8); on a forced fabric of 2 GPUs the machine file and profile fitted on
# such a host where one is shipped (h100x2-socket, h200x2-socket, h200x2-shm: docs/measurements/fabrics.md).
case $(nvidia-smi --query-gpu=name --format=csv,noheader 2> /dev/null | head -1) in
  *H100*) KIND_PROFILE=topologies/h100-hgx-8.profile.yaml KIND=h100 ;;
  *) KIND_PROFILE=topologies/h200-hgx-8.profile.yaml KIND=h200; [ -f "topologies/$TOPO.profile.yaml" ] && KIND_PROFILE=topologies/$TOPO.profile.yaml ;;
esac
if [ "${FABRIC:-nvlink}" != nvlink ] && [ "$N" = 2 ] && [ -f "topologies/${KIND}x2-$FABRIC.yaml" ]; then
  TOPO=topologies/${KIND}x2-$FABRIC.yaml
  PROFILE=${PROFILE:-topologies/${KIND}x2-$FABRIC.profile.yaml}
fi
PROFILE=${PROFILE:-$KIND_PROFILE}

# fabric_profile: on a forced fabric (FABRIC=shm or socket) measure this host's NCCL steps over it first (tasp calibrate
# --measure, a minute or so) and use the profile fitted to them, the rest (kernels, executor) this GPU kind's profile's
# (the socket profile's are the H100's): a fabric's rate is the host's
# (sockets over loopback moved 1.7 GB/s per direction on the 2x H100 host of 2026-11-25 and about 3.3 GB/s on the 2x
# H200 host of 2026-11-26, whose runs the H100 host's profile predicted 19-36% slow), and the runs' bounds and
# predictions are only as good as it. CALIBRATE=0 keeps PROFILE. The steps land in $OUT/fabric-steps.csv.
fabric_profile() {
  [ "${FABRIC:-nvlink}" = nvlink ] || [ "${CALIBRATE:-1}" = 0 ] && return 0
  echo "== NCCL steps over ${FABRIC} on this host (tasp calibrate --measure; CALIBRATE=0 skips)"
  if measure_fabric fabric-steps.csv fabric.profile.yaml fabric-calibrate.log; then
    PROFILE=$OUT/fabric.profile.yaml
    echo "profile: $PROFILE (comm measured here over ${FABRIC})"
  else
    echo "calibrate --measure failed ($OUT/fabric-calibrate.log): keeping $PROFILE"
  fi
}

# measure_fabric CSV PROFILE LOG: this host's NCCL steps over the forced fabric into $OUT/CSV and the profile fitted to
# them into $OUT/PROFILE (the rest this GPU kind's), the log into $OUT/LOG; fails as tasp calibrate does.
measure_fabric() {
  timeout 400 $T calibrate --measure -t $TOPO --base "$KIND_PROFILE" --iters 5 --warmup 2 --csv "$OUT/$1" \
    --name "${FABRIC}-measured-on-$(hostname)" --description "$TOPO with NCCL over ${FABRIC}, comm measured on $(hostname) by tools/gpu/lib/common.sh fabric_profile" \
    -o "$OUT/$2" > "$OUT/$3" 2>&1
}

# pack_logs FILE...: the device tool brings back 8 files of $OUT: those named stay, every other file and folder this
# script made goes into $OUT/logs.tgz (and out of $OUT), so that results are never the ones left behind. What was in
# $OUT before it started stays as it was (a command that ran another script first keeps that one's results).
pack_logs() {
  local keep=" $* logs.tgz " rest=() f
  for f in $(ls "$OUT"); do [[ $keep == *" $f "* || $OUT_BEFORE == *" $f "* ]] || rest+=("$f"); done
  [ ${#rest[@]} -gt 0 ] && tar czf "$OUT/logs.tgz" -C "$OUT" "${rest[@]}" && (cd "$OUT" && rm -rf "${rest[@]}")
  return 0
}

# The device's name, clocks and power limit into $OUT/device.txt (and stdout).
# The GPUs' link matrix too (nvidia-smi topo -m: NV18 where NVLink joins two GPUs, PIX/PHB/NODE/SYS where only PCIe
# does): a run's "nvlink" rows mean little without it.
device_info() {
  { nvidia-smi --query-gpu=index,name,clocks.sm,clocks.max.sm,power.limit,memory.total --format=csv
    echo "fabric: ${FABRIC:-nvlink}"
    nvidia-smi topo -m 2> /dev/null | sed -n 's/\x1b\[[0-9;]*m//g; 1,/^$/p'; } | tee "$OUT/device.txt"
}

# build TARGET...: build-gpu/ for sm_90a (log in $OUT/build.log); exits the caller on failure.
build() { tools/gpu/lib/build.sh "$@" || exit 1; }

# ms_of "tasp run output": the median of the run's totals in milliseconds (0 when the run printed none).
ms_of() { python3 -c "import re,sys; m=re.search(r'median ([0-9.]+) us', sys.stdin.read()); print(round(float(m.group(1))/1e3, 4) if m else 0)"; }

# bound_ms "tasp run output": the run's bound (each pass's max of its kernels and its bytes at the profile's peak, summed:
# planner::run_bound) in ms (0: none).
bound_ms() { python3 -c "import re,sys; m=re.search(r'bound: .*= ([0-9.]+) us;', sys.stdin.read()); print(round(float(m.group(1))/1e3, 4) if m else 0)"; }

# pieces_of "tasp run output": in how many pieces a rank its allgather ran (`run: allgather in P pieces a rank`; 1 for
# other schemes), for the runs CSV's pieces column (tasp report predicts each row so).
# "2+1+1" where it gathered them in steps of several (`(gathered in steps of 2+1+1)`), read from that line alone: the
# simulator's "gather pieces 1 (tried, ms: ..., 3 in steps of 2+1: ...)" before it names steps it did not take (until
# 2026-11-27 a run of 1 piece was so recorded as 2+1).
# "2+1+1p" where the plan was pruned for the causal mask, its pieces by chunk; "2q" where its late chunk's queries moved.
pieces_of() { python3 -c "import re,sys; m=re.search(r'in ([0-9]+) pieces a rank(?: \(gathered in steps of ([0-9+]+)\))?(, pruned for the causal mask)?([^\n]*queries moved)?', sys.stdin.read()); print(((m.group(2) or m.group(1)) + ('q' if m.group(4) else 'p' if m.group(3) else '')) if m else 1)"; }
# pieces_flags PIECES: the simulate/run options for a runs CSV's pieces ("4", "2+1+1", "2+1+1p" or "2q").
pieces_flags() {
  local p=${1%[pq]} x=""
  [ "$p" != "$1" ] && x=" --prune-plain"
  [ "${1: -1}" = q ] && x=" --move-queries"
  case $p in *+*) echo "--gather-steps ${p//+/,}$x" ;; *) echo "--gather-pieces $p$x" ;; esac
}

# transport_flags: --collectives or --sendrecv where TASP_RUN_ARGS forces one (else the runs, plans and predictions
# all take whichever the profile times faster).
transport_flags() {
  case " ${TASP_RUN_ARGS:-} " in *" --collectives "*) echo --collectives ;; *" --sendrecv "*) echo --sendrecv ;; esac
}

# auto_scheme WORKLOAD PASS: the scheme `tasp plan --scheme auto` picks here with PROFILE ("" when it fails).
auto_scheme() {
  $T plan -t $TOPO -s auto -w "$1" --pass "$2" --profile "$PROFILE" $(transport_flags) -o /dev/null 2>&1 | grep -oE -- "-> [a-z-]+" | head -1 | cut -c4-
}

# run_predicted_ms "tasp run output": the run's own prediction (`predicted by profile NAME: X us`) in ms (0: none).
run_predicted_ms() { python3 -c "import re,sys; m=re.search(r'predicted by profile .*: ([0-9.]+) us;', sys.stdin.read()); print(round(float(m.group(1))/1e3, 4) if m else 0)"; }

# predict_ms ARGS...: the simulator's total for `tasp simulate ARGS` in milliseconds (0 when it fails).
predict_ms() {
  local j
  j=$(mktemp)
  if $T simulate "$@" --json "$j" -q > /dev/null 2>&1; then
    python3 -c "import json; print(round(json.load(open('$j'))['schemes'][0]['total_us'] / 1e3, 4))"
  else
    echo 0
  fi
  rm -f "$j"
}

# workloads ARG...: the workloads named by WORKLOAD or set:NAME arguments, one a line (a bad set name: status 2).
workloads() {
  local a
  for a in "$@"; do
    case $a in set:*) workload_set "${a#set:}" | tr ' ' '\n' || return 2 ;; *) echo "$a" ;; esac
  done
}

# base_variant SPEC: SPEC with the change's base as one more variant (BIN=build-base/tools/tasp) when BASE_PATCH names
# a patch (git diff BASE -- DIR > file), built by lib/build-base.sh (log in $OUT/build-base.txt); exits on failure.
base_variant() {
  if [ -z "${BASE_PATCH:-}" ]; then echo "$1"; return 0; fi
  tools/gpu/lib/build-base.sh "$BASE_PATCH" > "$OUT/build-base.txt" 2>&1 || { tail -20 "$OUT/build-base.txt" >&2; exit 1; }
  echo "${1:+$1|}BIN=build-base/tools/tasp"
}

# Named workload sets (set:NAME) for compare.sh and check.sh.
workload_set() {
  case $1 in
    long) echo "B=1,H=32,D=128,S=16384 B=1,H=32,D=128,S=16384,causal B=1,H=32,D=128,S=65536 B=1,H=32,D=128,S=65536,causal B=1,H=8,D=64,S=131072,causal" ;;
    exposed) echo "B=1,H=32,D=128,S=8192,causal B=4,H=24,D=128,S=8192,causal B=4,H=40,Hkv=8,D=128,S=16384,causal B=1,H=32,Hkv=8,D=128,S=65536,causal" ;;
    anchor) local c s=""; for c in B=1,H=32,D=128,S=13440 B=1,H=32,D=128,S=26880 B=1,H=32,D=128,S=53760 B=1,H=32,D=128,S=107520 \
                                B=4,H=8,D=128,S=13440 B=1,H=8,D=64,S=107520; do s+="$c $c,causal "; done; echo "$s" ;;
    masks) echo "B=1,H=32,D=128,S=131072,causal,window=4096 B=1,H=32,D=128,S=131072,causal,docs=40000+8192+777+30000+16384+20000+5000+10719 B=1,H=32,Hkv=8,D=128,S=65536,causal,docs=16384+16384+16384+16384" ;;
    quick) echo "B=1,H=32,D=128,S=16384,causal" ;;
    *) echo "unknown workload set '$1' (long, exposed, anchor, masks, quick)" >&2; return 2 ;;
  esac
}

# The schemes that apply to workload $1 on N GPUs (zigzag needs a causal mask; usp needs 4 GPUs).
schemes_for() {
  local s out=""
  for s in ring zigzag allgather hamilton ulysses usp; do
    case $s in
      zigzag) case $1 in *causal*) ;; *) continue ;; esac ;;
      usp) [ "$N" -ge 4 ] || continue ;;
    esac
    out+="$s "
  done
  echo "$out"
}

# round_order R VARIANT...: the variants in the order round R runs them, into `order`: as given in odd rounds, reversed
# in even ones, so that no side always runs first (a GPU's drift through a call otherwise favours one; 2x H200,
# 2026-11-27: the side run second read 1.3% faster in each of three rounds at `medium`).
round_order() {
  local r=$1 i
  shift
  order=("$@")
  if (( r % 2 == 0 )); then
    local rev=()
    for ((i = ${#order[@]} - 1; i >= 0; --i)); do rev+=("${order[$i]}"); done
    order=("${rev[@]}")
  fi
}
