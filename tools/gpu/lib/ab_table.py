"""The table of an A/B: lines `variant<TAB>case<TAB>pass<TAB>value` (ab.sh: TFLOP/s, ab-run.sh: ms) in, one line per
case and pass out with every run's value and each variant's median over the default's (>1: a higher value)."""
import collections
import statistics
import sys

runs = collections.defaultdict(list)
for line in open(sys.argv[1]):
    p = line.rstrip("\n").split("\t")
    if len(p) == 4:
        runs[(p[1], p[2])].append((p[0], float(p[3])))
for (case, ps), xs in runs.items():
    by = collections.defaultdict(list)
    for n, t in xs:
        by[n].append(t)
    base = statistics.median(by.get("default", [0])) or 1
    cells = "  ".join(f"{n}: {' '.join(f'{t:.3f}' for t in ts)} ({statistics.median(ts) / base:.3f}x)" for n, ts in by.items())
    print(f"{case} {ps}: {cells}")
