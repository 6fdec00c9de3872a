#!/usr/bin/env python3
"""tasp's kernels against PyTorch SDPA measured in the same run: reads `tasp bench kernel --json` and
sdpa_bench.py --json output and prints TFLOP/s and the ratios tasp / cuDNN and tasp / FA2 per shape and pass
(the median over rounds where a shape was run more than once, as sdpa_bench.py --tasp --rounds does).
Usage: compare_kernels.py TASP.json SDPA.json [--md OUT.md]"""
import argparse
import collections
import json
import statistics


def key(shape):
    s = {"B": 1, "causal": False}
    for item in shape.split(","):
        if item in ("causal", "full"):
            s["causal"] = item == "causal"
        elif "=" in item:
            k, v = item.split("=")
            v = v.lower()
            s[k] = int(v[:-1]) * 1024 if v.endswith("k") else int(v)
    s.setdefault("Hkv", s["H"])
    return (s["B"], s["H"], s["Hkv"], s["S"], s["D"], s["causal"])


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("tasp")
    ap.add_argument("sdpa")
    ap.add_argument("--md")
    a = ap.parse_args()
    tasp = json.load(open(a.tasp))
    sdpa = json.load(open(a.sdpa))
    runs = collections.defaultdict(list)
    for r in sdpa:
        if "error" not in r:
            runs[(key(r["shape"]), r["backend"])].append(r)
    med = lambda rs, f: statistics.median(x[f] for x in rs)
    ref = {k: {"fwd_tflops": med(rs, "fwd_tflops"), "bwd_tflops": med(rs, "bwd_tflops")} for k, rs in runs.items()}
    mine = collections.defaultdict(list)
    for r in tasp:
        if r.get("pieces", 1) == 1:
            mine[(r["B"], r["H"], r.get("Hkv", r["H"]), r["S"], r["D"], r["causal"], r.get("pass", "fwd"))].append(r)
    tasp = [dict(rs[0], tflops=med(rs, "tflops"), rounds=len(rs)) for rs in mine.values()]
    lines = ["| pass | shape | tasp TFLOP/s | cuDNN | FA2 | tasp/cuDNN | tasp/FA2 |", "|---|---|---:|---:|---:|---:|---:|"]
    for r in tasp:
        if r.get("pieces", 1) != 1:
            continue
        k = (r["B"], r["H"], r.get("Hkv", r["H"]), r["S"], r["D"], r["causal"])
        p = r.get("pass", "fwd")
        c, f = ref.get((k, "cudnn")), ref.get((k, "fa2"))
        ct = c and c[p + "_tflops"]
        ft = f and f[p + "_tflops"]
        shape = f"B={k[0]} H={k[1]}{'' if k[2] == k[1] else '/' + str(k[2])} S={k[3]} D={k[4]}{' causal' if k[5] else ''}"
        fmt = lambda x: f"{x:.1f}" if x else "-"
        ratio = lambda x: f"{r['tflops'] / x:.2f}x" if x else "-"
        lines.append(f"| {p} | {shape} | {r['tflops']:.1f} | {fmt(ct)} | {fmt(ft)} | {ratio(ct)} | {ratio(ft)} |")
    text = "\n".join(lines)
    print(text)
    if a.md:
        open(a.md, "w").write(text + "\n")


if __name__ == "__main__":
    main()
