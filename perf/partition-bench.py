#!/usr/bin/env python3
"""Partitioned nodes on one PostgreSQL (`--partitioned`, issue 33): does a
second and third node add capacity? Measured by the share of the work each
node does, as the many-core work was, because this machine's cores are few.

Starts a throwaway PostgreSQL (fsync and synchronous_commit on) and, in
each round, node `a` alone (it owns every partition), then three nodes
(`b` and `c` join; each owns a third): the harness's load tools
(../shared/bench: gearload bg, rt; rawload fg, then bg and drain) over F
functions (one
loader per function, each a 1/F share of the load), every loader's
clients and workers on one node:
  one node        all loaders on `a` alone;
  three nodes     loaders spread over a, b, c in turn; with PLACE=owner,
                  each loader on its function's owner (no job crosses a
                  link: what the partitions cost without the hops).
Each round also runs today's single node (no `--partitioned`, a database
of its own) and, with CONTROL=1, three such nodes side by side (a database
each, loaders spread as above): what three servers that share nothing
cost on this machine's cores. Reports rates and each node's CPU (user + system, from /proc)
per job: the busiest node's and the cluster's total, as ratios to one
partitioned node and to the plain node.

usage: perf/partition-bench.py
  GEARSHIFT  binary (default target/release/gearshift; build it first)
  BENCH      the harness (default ../shared/bench)
  REPS       rounds (default 2)   F  functions (default 12)
  PLACE      owner: as above (default: functions placed by their hash)
  CONTROL    1: the three independent nodes too
  PG_OPTS    extra PostgreSQL settings ("-c commit_delay=100 ...")
"""

import importlib.util
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import json

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
spec = importlib.util.spec_from_file_location("cluster_bench", os.path.join(HERE, "cluster-bench.py"))
cb = importlib.util.module_from_spec(spec)
spec.loader.exec_module(cb)
h, Postgres, Cluster = cb.h, cb.Postgres, cb.Cluster

REPS = int(os.environ.get("REPS", "2"))
F = int(os.environ.get("F", "12"))
PLACE = os.environ.get("PLACE", "hash")
CONTROL = os.environ.get("CONTROL") == "1"
NODES = ["a", "b", "c"]


# The workloads in the order a round runs them: R_submit fills the queues
# R_drain empties, so its CPU per job is the drain's alone.
WORKLOADS = ("A", "B_rt", "R_fg", "R_submit", "R_drain")
PREFIXES = ("bg_", "rt_", "fg_", "rd_", "rd_")


def load(port, tag, k):
    """Workload k (of WORKLOADS) for one loader: a 1/F share, one function."""
    gl, rl = os.path.join(cb.BENCH, "gearload"), os.path.join(cb.BENCH, "rawload")
    n = str(60000 // F)
    return [
        [gl, "bg", "-p", str(port), "-n", str(24000 // F), "-c", "1", "-w", "1", "-f", "bg_" + tag],
        [gl, "rt", "-p", str(port), "-c", "1", "-w", "1", "-d", "4", "-f", "rt_" + tag],
        [rl, "fg", "-p", str(port), "-n", n, "-m", "1", "-k", "1", "-f", "fg_" + tag, "-L", "R_fg"],
        [rl, "bg", "-p", str(port), "-n", n, "-m", "1", "-f", "rd_" + tag, "-L", "R_submit"],
        [rl, "drain", "-p", str(port), "-n", n, "-k", "1", "-f", "rd_" + tag, "-L", "R_drain"],
    ][k]


def serving(cl, names):
    """Waits until exactly `names` own every partition, evenly, and every
    node's view says so."""
    import test_partitions
    test_partitions.shared_by(cl, names, timeout=60)


def tag_for(cl, target, k, rep, i, by_owner):
    """Loader i's function tag; `by_owner`: the first whose function
    `target` owns."""
    tag = "r%d_%d" % (rep, i)
    if not by_owner:
        return tag
    import test_partitions
    own = test_partitions.owners(cl)
    for j in range(10000):
        t = "%s_%d" % (tag, j)
        if own.get(test_partitions.partition_of(PREFIXES[k] + t)) == target:
            return t
    raise RuntimeError("no function owned by %s" % target)


def round_of(cl, targets, rep, by_owner=False):
    """Runs the workloads; returns rates and CPU µs per job by node."""
    rates, cpu = {}, {}
    for k, w in enumerate(WORKLOADS):
        before = {n: cb.cpu_secs(cl.nodes[n].pid) for n in cl.nodes}
        at = [targets[i % len(targets)] for i in range(F)]
        procs = [subprocess.Popen(load(cl.nodes[at[i]].port, tag_for(cl, at[i], k, rep, i, by_owner), k),
                                  stdout=subprocess.PIPE, text=True) for i in range(F)]
        jobs = {}
        for p in procs:
            out, _ = p.communicate(timeout=300)
            for line in out.splitlines():
                if line.startswith("{"):
                    d = json.loads(line)
                    if d.get("ok") is False:
                        print("   note: %s did not finish: %s" % (d["scenario"], line[:160]))
                    rates[d["scenario"]] = rates.get(d["scenario"], 0) + d["rate"]
                    jobs[d["scenario"]] = jobs.get(d["scenario"], 0) + d["ops"]
        n = max(jobs.values()) if jobs else 0
        if n:
            cpu[w] = {m: (cb.cpu_secs(cl.nodes[m].pid) - before[m]) / n * 1e6 for m in cl.nodes}
    return rates, cpu


def main():
    tmp = tempfile.mkdtemp(prefix="gs-partition-bench-")
    pg = Postgres(tmp).start(durable=True)
    cl = Cluster(pg, timeout_ms=5000)
    import test_cluster
    test_cluster.GEARSHIFT = cb.GEARSHIFT
    # Today's single node (no --partitioned) on a database of its own:
    # the two modes do not share one.
    pg.sql("CREATE DATABASE plain")
    plain = Cluster(pg, timeout_ms=5000)
    plain.url = pg.store_url("plain")
    results = {"plain node": [], "one node": [], "three nodes": []}
    solos = []
    if CONTROL:
        results["three plain nodes"] = []
        for n in NODES:
            pg.sql("CREATE DATABASE solo_%s" % n)
            solos.append(Cluster(pg, timeout_ms=5000))
            solos[-1].url = pg.store_url("solo_" + n)
    try:
        print("machine: %s, %d cores; PostgreSQL at its default durability; %s; %d functions"
              % (socket.gethostname(), os.cpu_count(), cb.GEARSHIFT, F))
        cl.start("a", extra="--partitioned")
        for rep in range(REPS):
            for n in ("b", "c"):
                if n in cl.nodes:
                    cl.nodes[n].stop()
                    del cl.nodes[n]
            plain.start("p")
            results["plain node"].append(round_of(plain, ["p"], rep))
            plain.stop_all()
            serving(cl, ["a"])
            results["one node"].append(round_of(cl, ["a"], rep))
            for n in ("b", "c"):
                cl.start(n, extra="--partitioned")
            serving(cl, NODES)
            results["three nodes"].append(round_of(cl, NODES, rep, PLACE == "owner"))
            if CONTROL:
                for n, solo in zip(NODES, solos):
                    solo.start(n)
                both = type("Solos", (), {"nodes": {n: s.nodes[n] for n, s in zip(NODES, solos)}})
                results["three plain nodes"].append(round_of(both, NODES, rep))
                for solo in solos:
                    solo.stop_all()
            for name in results:
                print("rep %d %-12s %s" % (rep + 1, name,
                                            {k: round(v) for k, v in results[name][-1][0].items()}),
                      flush=True)
        latency(cl)
    finally:
        plain.stop_all()
        for solo in solos:
            solo.stop_all()
        cl.stop_all()
        pg.stop()
    for base_name in ("one node", "plain node"):
        report(results, base_name)


def latency(cl):
    """Start latency (submission to JOB_ASSIGN of a sleeping worker) on
    three nodes, with the function's owner, the client's node and the
    worker's node the same or different."""
    import test_partitions
    f = test_partitions.functions_on(cl, 1, prefix="lat")["a"][0]
    cases = [("all on the owner", "a", "a"), ("client elsewhere", "b", "a"),
             ("worker elsewhere", "a", "b"), ("all apart", "b", "c")]
    print("\n## start latency (ms), %d jobs per case, one at a time; `a` owns the function"
          % cb.N)
    print("| case | submit on | worker on | p50 | p90 | p99 | max |")
    print("|---|---|---|---:|---:|---:|---:|")
    for name, s, w in cases:
        xs = cb.latency_case(cl.nodes[s].port, cl.nodes[w].port, f)
        print("| %s | %s | %s | %.2f | %.2f | %.2f | %.2f |"
              % (name, s, w, cb.pct(xs, 50), cb.pct(xs, 90), cb.pct(xs, 99), max(xs)),
              flush=True)


def report(results, base_name):
    """The rates and CPU tables, as ratios to `base_name`'s."""
    base = results[base_name]
    print("\n## rates (jobs/s, median of %d rounds; ratio to %s)" % (REPS, base_name))
    print("| setup | A_submit | A_drain | B_rt | R_fg | R_submit | R_drain |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    for name, rs in results.items():
        cells = []
        for w in ("A_submit", "A_drain", "B_rt", "R_fg", "R_submit", "R_drain"):
            xs = [r[0].get(w, 0) for r in rs]
            ratio = statistics.median(r[0].get(w, 0) / b[0][w] for r, b in zip(rs, base)
                                      if b[0].get(w))
            cells.append("%d (%.2f)" % (statistics.median(xs), ratio))
        print("| %s | %s |" % (name, " | ".join(cells)))
    print("\n## node CPU per job (µs; median of %d rounds): busiest node / all nodes, "
          "and their ratio to %s" % (REPS, base_name))
    print("| setup | A (bg submit + drain) | B_rt | R_fg | R_submit | R_drain |")
    print("|---|---:|---:|---:|---:|---:|")
    for name, rs in results.items():
        cells = []
        for w in WORKLOADS:
            xs = [r[1][w] for r in rs if w in r[1]]
            bs = [b[1][w] for b in base if w in b[1]]
            if not xs or not bs:
                cells.append("-")
                continue
            busy = statistics.median(max(x.values()) for x in xs)
            tot = statistics.median(sum(x.values()) for x in xs)
            one = statistics.median(sum(b.values()) for b in bs)
            cells.append("%.1f / %.1f (%.2f / %.2f)" % (busy, tot, busy / one, tot / one))
        print("| %s | %s |" % (name, " | ".join(cells)))


if __name__ == "__main__":
    main()
