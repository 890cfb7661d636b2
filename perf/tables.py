#!/usr/bin/env python3
"""Markdown tables for docs/benchmarks.md and perf/ from the JSON files that
../shared/bench/compare.sh writes (perf/compare-gearmand.sh runs it).

    perf/tables.py perf/results/tables/tuned.json [more.json ...]

Per scenario: the median of each side's figure over the repetitions, and
the median (min..max) of the per-repetition B/A ratios, which is the figure
to trust on a shared machine. `load us/job` is the load generator's own CPU
per job on the B side: rawload is one thread, so 1e6 / that figure is the
most it could ever drive, whatever the server.
"""
import json
import statistics
import sys
from collections import defaultdict


def fmt(x, digits=3):
    if x is None:
        return ""
    if abs(x) >= 1000:
        return f"{x:,.0f}"
    if abs(x) >= 100:
        return f"{x:.0f}"
    return f"{x:.{digits}g}"


def ratio(pairs, key):
    rs = [b[key] / a[key] for a, b in pairs if a.get(key) and b.get(key) is not None]
    if not rs:
        return ""
    return f"**{statistics.median(rs):.2f}** ({min(rs):.2f}..{max(rs):.2f})"


def med(rows, key):
    vals = [r[key] for r in rows if r.get(key) is not None]
    return statistics.median(vals) if vals else None


def table(path):
    d = json.load(open(path))
    a_name, b_name = d["A"]["name"], d["B"]["name"]
    by = defaultdict(lambda: {"A": {}, "B": {}})
    order = []
    for r in d["results"]:
        s = r["scenario"]
        if s not in order:
            order.append(s)
        by[s][r["side"]][r["rep"]] = r
    print(f"`{path}`: A = {a_name}, B = {b_name}, {d['reps']} reps, started {d['started']}\n")
    print("| scenario | A rate/s | B rate/s | B/A rate | A CPU s/Mjob | B CPU s/Mjob | B/A CPU | B/A HWM | A p99 µs | B p99 µs | B load µs/job | ok A/B |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|")
    for s in order:
        A, B = by[s]["A"], by[s]["B"]
        pairs = [(A[k], B[k]) for k in sorted(A) if k in B]
        ra, rb = list(A.values()), list(B.values())
        if s == "D_idle":
            ka, kb = med(ra, "kb_per_idle_conn"), med(rb, "kb_per_idle_conn")
            print(f"| D_idle (KiB per idle conn) | {fmt(ka)} | {fmt(kb)} | {ratio(pairs, 'kb_per_idle_conn')} | | | | {ratio(pairs, 'server_hwm_kb')} | | | | "
                  f"{sum(r['ok'] for r in ra)}/{len(ra)} {sum(r['ok'] for r in rb)}/{len(rb)} |")
            continue
        load = None
        if rb and all(r.get("client_cpu_s") is not None and r.get("ops") for r in rb):
            load = statistics.median(r["client_cpu_s"] / r["ops"] * 1e6 for r in rb)
        print(
            f"| {s} | {fmt(med(ra, 'rate'))} | {fmt(med(rb, 'rate'))} | {ratio(pairs, 'rate')} | "
            f"{fmt(med(ra, 'server_cpu_s_per_mop'))} | {fmt(med(rb, 'server_cpu_s_per_mop'))} | {ratio(pairs, 'server_cpu_s_per_mop')} | "
            f"{ratio(pairs, 'server_hwm_kb')} | {fmt(med(ra, 'p99_us'))} | {fmt(med(rb, 'p99_us'))} | {fmt(load)} | "
            f"{sum(bool(r['ok']) for r in ra)}/{len(ra)} {sum(bool(r['ok']) for r in rb)}/{len(rb)} |"
        )
    print()


for p in sys.argv[1:]:
    table(p)
