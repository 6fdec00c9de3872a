#!/usr/bin/env python3
"""Summarise Nsight Compute's source page (ncu --page source --csv --print-source cuda,sass): the CUDA source
lines with the most warp-state samples over all of the kernel's files, and for each the stall reasons that
dominate. Usage: ncu_stalls.py SOURCE.csv [--top N]"""
import argparse
import csv
import sys


def number(text):
    try:
        return float(text.replace(",", ""))
    except ValueError:
        return None


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("csv")
    ap.add_argument("--top", type=int, default=40)
    a = ap.parse_args()
    with open(a.csv, newline="", errors="replace") as f:
        rows = list(csv.reader(f))
    # One table per source file, each under a header row ('Line No', 'Source', 'Address', 'Source', samples...);
    # the rows with a line number are CUDA lines (their SASS rows follow with an address instead).
    header, lines = None, []
    for r in rows:
        if r and r[0].strip() == "Line No":
            header = [h.strip() for h in r]
            samp = next(i for i, h in enumerate(header) if "Sampling (All" in h)
            reasons = [i for i, h in enumerate(header) if h.startswith("stall_") and "Not Issued" not in h]
        elif header and len(r) > samp and r[0].strip() and number(r[samp]):
            why = {header[i][6:]: number(r[i]) or 0 for i in reasons if i < len(r)}
            lines.append((number(r[samp]), r[0].strip(), r[1].strip(), why))
    if not lines:
        print("no source lines with samples; the file starts:")
        for r in rows[:8]:
            print("  ", r[:8])
        return 1
    total = sum(x[0] for x in lines)
    print(f"# {len(lines)} source lines, {total:.0f} warp samples; share, line, source, top stall reasons")
    for s, line, src, why in sorted(lines, key=lambda x: -x[0])[: a.top]:
        top = ", ".join(f"{n} {v / s:.0%}" for n, v in sorted(why.items(), key=lambda x: -x[1])[:3] if v > 0)
        print(f"{s / total:6.1%} {line:>5}  {src[:84]:<84}  {top}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
