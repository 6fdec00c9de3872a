#!/usr/bin/env python3
"""Phases of the backward kernel's tiles from a trace build's clocks (bwd_sm90.cuh, -DTASP_BWD_TRACE).

Usage: bwd_trace.py [--wide] TRACE.bin [more.bin ...]
--wide: the D=256 kernel's (bwd_sm90_wide.cuh) events 1-6 instead: P packed, P and dS stored, past the P/dS barrier,
dK^T/dV^T done, the next tile's S and dP issued, dQ^T added and the next S and dP in.
Each file: int64 [128 CTAs][2 warpgroups][256 tiles][12 events], clock64 at: 0 the tile's Q/dO in, 1 after front()
(S^T, dP^T issued, LSE/D filled, the staged dQ reduced), 2 after middle() (softmax, dS, dV issued), 3 past the
other warpgroup's "ready" (its dS of the tile before), 4 dQ(t-1) and dV done, "ready" arrived, 5 dQ staged,
6 dK done and the stage released; 7 (warpgroup 0) thread 0's time at the tile's start (issuing the next tile's
copies), 8-10 its parts by the tile they are for: resolving it (at the end of the tile two before), waiting for its
stage, that and issuing the copies; 11 (warpgroup 0) the CTA's entry (tile 0's) and end (tile 1's: its dK/dV
reductions issued), its prologue's parts (tiles 2-4's: the walk's first tiles resolved, the tensor maps fenced,
the first copies issued) and its end's (tiles 5-7's: the other warpgroup's last dS^T in, the last dQ staged and
reduced, the dK/dV stores issued).
Prints per warpgroup the median cycles of each phase, the tile period and the warpgroups' skew (a warpgroup's tile start minus
the other's, in tile periods); then the CTAs' prologue (entry to the first tile's Q/dO in), walk and end (the last tile
done to the CTA's end), and their shares of the CTAs' time: what a persistent grid could hide.
"""
import statistics as st
import struct
import sys

CTAS, WG, TILES, EV = 128, 2, 256, 12


def load(path):
    global EV
    data = open(path, "rb").read()
    n = len(data) // 8
    EV = n // (CTAS * WG * TILES)  # 12 events a tile (older traces, without thread 0's parts, have 8)
    return struct.unpack(f"<{n}q", data)


def at(v, c, w, t, e):
    return v[((c * WG + w) * TILES + t) * EV + e] if e < EV else 0


NARROW = ["front", "middle", "ready wait", "dQ/dS/dK+wait1", "stage dQ", "dK wait+release", "next tile wait"]
WIDE = ["softmax, P", "dS, stores", "P/dS barrier", "dK/dV products", "next S/dP issue", "dQ add, S/dP in", "next tile wait"]


def summary(path, names):
    v = load(path)
    print(f"{path}:")
    for w in range(WG):
        phases = {n: [] for n in names}
        period, skew, t0, span = [], [], [], []
        for c in range(CTAS):
            n = 0
            while n < TILES and at(v, c, w, n, 0) != 0:
                n += 1
            for t in range(2, n - 2):  # steady state: not the first tiles or the last
                e = [at(v, c, w, t, k) for k in range(7)]
                for i in range(6):
                    phases[names[i]].append(e[i + 1] - e[i])
                nxt = at(v, c, w, t + 1, 0)
                phases[names[6]].append(nxt - e[6])
                span.append(e[6] - e[0])
                period.append(nxt - e[0])
                if w == 0:
                    t0.append(at(v, c, 0, t, 7))
                    o = at(v, c, 1, t, 0)
                    if o:
                        skew.append(o - e[0])
        if not period:
            print("  no tiles traced")
            return
        p = st.median(period)
        print(f"  warpgroup {w}: {len(period)} tiles; period median {p:.0f} cycles (mean {st.mean(period):.0f})")
        if not any(phases[names[1]]):  # a kernel that marks only its tiles' start and end (the wide one, D=256)
            print(f"    tile's start to end median {st.median(span):.0f}, end to the next tile's start median "
                  f"{st.median(phases[names[6]]):.0f} cycles")
            if w == 0:
                walker_parts(v)
            continue
        for n in names:
            xs = phases[n]
            print(f"    {n:18s} median {st.median(xs):7.0f}  mean {st.mean(xs):7.0f}  ({100 * st.mean(xs) / st.mean(period):4.1f}%)")
        if t0:
            print(f"    thread 0 at the start: median {st.median(t0):.0f}, mean {st.mean(t0):.0f}, p90 {sorted(t0)[int(0.9 * len(t0))]:.0f}")
            walker_parts(v)
        if skew:
            s = sorted(x / p for x in skew)
            q = lambda f: s[int(f * (len(s) - 1))]
            print(f"    skew (WG1 start - WG0 start) in periods: p10 {q(0.1):+.2f}  median {q(0.5):+.2f}  p90 {q(0.9):+.2f}")
    ctas(v)


def walker_parts(v):
    """The walking thread's parts (events 8-10, recorded in warpgroup 0's slots whichever thread walks)."""
    parts = []
    for k, name in ((8, "resolve"), (9, "stage wait"), (10, "stage wait + copies issued")):
        xs = [at(v, c, 0, t, k) for c in range(CTAS) for t in range(2, TILES) if at(v, c, 0, t, k) > 0]
        if xs:
            parts.append(f"{name} {st.median(xs):.0f}")
    if parts:
        print("    the walking thread's parts (median cycles): " + ", ".join(parts))


def ctas(v):
    """The CTAs' prologue, walk and end from event 11 (traces made before it have none), and the walk's ramp: its first
    two tiles' time beyond two steady periods (nothing of the tile before overlaps them)."""
    pro, walk, end, total, ramp = [], [], [], [], []
    parts = {"walk resolved": [], "maps fenced": [], "copies issued": [], "first tile in": []}  # the prologue's, in turn
    ends = {"other's last dS in": [], "last dQ staged": [], "dK/dV stores issued": [], "staging read": []}  # the end's
    periods = [at(v, c, 0, t + 1, 0) - at(v, c, 0, t, 0) for c in range(CTAS) for t in range(2, TILES - 3)
               if at(v, c, 0, t + 3, 0) != 0]
    steady = st.median(periods) if periods else 0
    for c in range(CTAS):
        entry, done, first = at(v, c, 0, 0, 11), at(v, c, 0, 1, 11), at(v, c, 0, 0, 0)
        n = 0
        while n < TILES and at(v, c, 0, n, 0) != 0:
            n += 1
        if not (entry and done and first and n):
            continue
        last = at(v, c, 0, n - 1, 6)
        pro.append(first - entry), walk.append(last - first), end.append(done - last), total.append(done - entry)
        marks = [entry] + [at(v, c, 0, k, 11) for k in (2, 3, 4)] + [first]
        if all(marks):
            for name, a, b in zip(parts, marks, marks[1:]):
                parts[name].append(b - a)
        marks = [last] + [at(v, c, 0, k, 11) for k in (5, 6, 7)] + [done]
        if all(marks):
            for name, a, b in zip(ends, marks, marks[1:]):
                ends[name].append(b - a)
        if n > 2 and steady:
            ramp.append(max(0, at(v, c, 0, 2, 0) - first - 2 * steady))
    if not total:
        return
    t = sum(total)
    print(f"  CTAs: {len(total)}; median cycles: prologue {st.median(pro):.0f}, walk {st.median(walk):.0f}, "
          f"end {st.median(end):.0f}; of all CTAs' time: prologue {100 * sum(pro) / t:.1f}%, end {100 * sum(end) / t:.1f}%"
          + (f", the walks' ramp {100 * sum(ramp) / t:.1f}% (median {st.median(ramp):.0f} cycles)" if ramp else ""))
    if parts["first tile in"]:
        print("  prologue's parts (median cycles, each from the one before): " +
              ", ".join(f"{name} {st.median(xs):.0f}" for name, xs in parts.items()))
    if ends["staging read"]:
        print("  end's parts (median cycles, each from the one before): " +
              ", ".join(f"{name} {st.median(xs):.0f}" for name, xs in ends.items()))


args = sys.argv[1:]
wide = "--wide" in args
for f in (a for a in args if a != "--wide"):
    summary(f, WIDE if wide else NARROW)
