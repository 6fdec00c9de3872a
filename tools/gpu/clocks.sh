#!/usr/bin/env bash
# The SM clock and board power while a command runs (nvidia-smi sampled every 50 ms): whether a kernel's rate is
# bounded by the power limiter (clock below its maximum at the power limit) or by its own pipeline.
# Usage: tools/gpu/clocks.sh NAME COMMAND...   writes $OUT/clock-NAME.csv and prints the medians of the
# samples in the second half of the run (the limiter settles over about a second), also appended to $CLOCK_LOG if set.
set -uo pipefail
source "$(dirname "$0")/lib/common.sh"
name=$1
shift
f="$OUT/clock-$name.csv"
nvidia-smi --query-gpu=timestamp,clocks.sm,power.draw,power.limit,temperature.gpu,utilization.gpu --format=csv,noheader,nounits -lms 50 > "$f" &
pid=$!
"$@"
rc=$?
kill $pid 2> /dev/null
wait $pid 2> /dev/null
python3 - "$f" "$name" <<'PY' | tee -a "${CLOCK_LOG:-/dev/null}"
import sys, statistics
rows = [l.split(", ") for l in open(sys.argv[1]) if l.count(",") >= 5]
busy = [r for r in rows if r[5].strip() not in ("0", "[N/A]")]
tail = busy[len(busy) // 2:] or rows
med = lambda i: statistics.median(float(r[i]) for r in tail)
print(f"clock {sys.argv[2]}: SM {med(1):.0f} MHz, power {med(2):.0f} W of {med(3):.0f} W, {med(4):.0f} C "
      f"({len(tail)} of {len(rows)} samples)")
PY
exit $rc
