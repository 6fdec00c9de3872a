# Sourced by trace.sh (after lib/common.sh): a scratch $OUT (the caller's, where the tarball goes, is
# kept in $RES) with the device's name and clocks, and the builds a trace run compares.
# trace_builds FLAG: builds, in parallel, the plain build (build-gpu; with TESTS=1 also the kernel tests, with TESTS=all
#   each plain variant's too), its twin
#   with FLAG (build-trace), each of $VARIANTS ("name:-DFLAGS ...") plain and with FLAG (build-name, build-name-trace)
#   and, with $BASE_PATCH, the change's base (build-base); leaves the names and flags in `builds` ("name:flags").
# ab_variants: ab.sh's variant list for those builds: every plain variant, then the base.
RES=$OUT
OUT=$(mktemp -d)
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,power.limit --format=csv > "$OUT/device.txt"
trace_builds() {
  local flag=$1 b name flags targets
  builds=("gpu:" "trace:$flag")
  for v in ${VARIANTS:-}; do builds+=("${v%%:*}:${v#*:}" "${v%%:*}-trace:${v#*:} $flag"); done
  for b in "${builds[@]}"; do
    name=${b%%:*} flags=${b#*:}
    mkdir -p "$OUT/build-$name"
    targets=(tasp)
    case ${TESTS:-0}:$name in
      1:gpu) targets+=(tasp_kernel_tests) ;;
      all:trace | all:*-trace) ;;
      all:*) targets+=(tasp_kernel_tests) ;;
    esac
    (CUDA_FLAGS="$flags" BUILD_DIR="build-$name" OUT="$OUT/build-$name" tools/gpu/lib/build.sh "${targets[@]}" > "$OUT/build-$name/status.txt" 2>&1;
     echo "build $name [$flags]: $(tail -1 "$OUT/build-$name/status.txt")") &
  done
  [ -n "${BASE_PATCH:-}" ] && (OUT="$OUT/build-base" tools/gpu/lib/build-base.sh "$BASE_PATCH" > "$OUT/build-base.txt" 2>&1; echo "build base: $(tail -1 "$OUT/build-base.txt")") &
  wait
}
ab_variants() {
  local spec=""
  for v in ${VARIANTS:-}; do spec+="${spec:+|}BIN=build-${v%%:*}/tools/tasp"; done
  [ -n "${BASE_PATCH:-}" ] && spec+="${spec:+|}BIN=build-base/tools/tasp"
  echo "$spec"
}
