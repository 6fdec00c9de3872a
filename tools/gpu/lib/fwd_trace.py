#!/usr/bin/env python3
"""Where a forward launch's time goes, from a trace build's clocks (fwd_sm90.cuh, -DTASP_FWD_TRACE).

Usage: fwd_trace.py TRACE.bin [more.bin ...]
Each file: int64 [16384 tasks][16 events] (see fwd_sm90.cuh): clock64 at a task's start (the producer taking it:
in a CTA of its own, right after the CTA's set-up; in the persistent grid, while the consumers may still be on the
previous task), its SM, the producer's task resolved and last copy issued, per consumer warpgroup Q in, tile 0's
scores in, the last P V done, the rows stored; the tiles walked; %globaltimer at its start and at warpgroup 0's
rows stored.
Prints the median cycles of each phase of a task, how the SMs' time splits (start: the task's start to tile 0's
scores; the walk; the end: last P V to the rows stored; the gaps between one task's end and the next one's start on
the SM; the launch's tail, SMs idle before the last task ends), and warpgroup 0's own time: waiting between its
tasks (rows stored to the next Q in), tile 0, the walk, the end. In the persistent grid a task starts before the
previous one ends, so the first split counts that overlap twice and its gaps go negative: read the second.
"""
import statistics as st
import struct
import sys

CTAS, EV = 16384, 16


def summary(path):
    data = open(path, "rb").read()
    v = struct.unpack(f"<{len(data) // 8}q", data)
    ctas = [v[c * EV:(c + 1) * EV] for c in range(CTAS) if v[c * EV] != 0]
    if not ctas:
        print(f"{path}: no CTAs traced")
        return
    med = lambda xs: st.median(xs) if xs else 0
    q = lambda e: [c[e] for c in ctas]
    ph = {
        "resolve (start -> task)": [c[2] - c[0] for c in ctas],
        "Q in (start -> wg0 Q)": [c[4] - c[0] for c in ctas],
        "tile 0 scores (wg0)": [c[6] - c[4] for c in ctas if c[6]],
        "walk (wg0)": [c[8] - c[6] for c in ctas if c[8]],
        "store (wg0)": [c[10] - c[8] for c in ctas if c[8]],
        "wg1 behind wg0 at the end": [c[11] - c[10] for c in ctas],
    }
    tiles = q(12)
    per_tile = [(c[8] - c[6]) / (c[12] - 1) for c in ctas if c[8] and c[12] > 1]
    print(f"{path}: {len(ctas)} tasks, {sum(tiles)} key tiles ({st.mean(tiles):.1f} a task)")
    for k, xs in ph.items():
        print(f"  {k:28s} median {med(xs):8.0f} cycles  mean {st.mean(xs) if xs else 0:8.0f}")
    print(f"  walk per tile after tile 0: median {med(per_tile):.0f} cycles")
    by_sm = {}
    for c in ctas:
        by_sm.setdefault(c[1], []).append(c)
    start = walk = end = gap = span = 0
    for cs in by_sm.values():
        cs.sort(key=lambda c: c[0])
        exit_ = lambda c: max(c[3], c[10], c[11])
        span += exit_(cs[-1]) - cs[0][0]
        for i, c in enumerate(cs):
            start += (c[6] or c[4]) - c[0]
            walk += max(0, c[8] - c[6]) if c[8] else 0
            end += exit_(c) - (c[8] or c[6] or c[4])
            if i:
                gap += c[0] - exit_(cs[i - 1])
    print(f"  SM time ({len(by_sm)} SMs): start {100 * start / span:.1f}%, walk {100 * walk / span:.1f}%, "
          f"end {100 * end / span:.1f}%, gaps {100 * gap / span:.1f}%")
    # Warpgroup 0's own timeline on each SM, from its first Q to its last rows stored.
    wait = first = wwalk = wend = wspan = 0
    for cs in by_sm.values():
        done = [c for c in cs if c[4] and c[10]]
        if not done:
            continue
        wspan += done[-1][10] - done[0][4]
        for i, c in enumerate(done):
            if i:
                wait += c[4] - done[i - 1][10]
            if c[8]:
                first += c[6] - c[4]
                wwalk += c[8] - c[6]
                wend += c[10] - c[8]
    if wspan:
        print(f"  warpgroup 0: waiting for its next task {100 * wait / wspan:.1f}%, tile 0 {100 * first / wspan:.1f}%, "
              f"walk {100 * wwalk / wspan:.1f}%, end {100 * wend / wspan:.1f}%")
    t0 = min(c[13] for c in ctas)
    last = max(c[14] for c in ctas)
    ends = sorted(max(c[14] for c in cs) - t0 for cs in by_sm.values())
    total = last - t0
    idle = sum(total - e for e in ends) / (len(ends) * total)
    print(f"  launch {total / 1e3:.1f} us (globaltimer); SMs done at median {ends[len(ends) // 2] / 1e3:.1f} us, "
          f"first {ends[0] / 1e3:.1f} us; tail idle {100 * idle:.1f}% of SM time")


for f in sys.argv[1:]:
    summary(f)
