#!/usr/bin/env python3
"""A Gearshift cluster on one PostgreSQL: cross-node start latency, and job
rates through one node against two and three (issue 19).

Starts a throwaway PostgreSQL (fsync and synchronous_commit on, as
PostgreSQL ships) and three `gearshift serve` nodes on it, then:

latency  a background job submitted on one node, to the moment a worker
         sleeping on another node has it (JOB_ASSIGN read), one job at a
         time, idle machine: p50/p99/max over N jobs, for
           same    submitter and worker on the leader,
           cross   submitter on follower b, worker on follower c,
           lead-f  submitter on the leader, worker on follower c.
rates    the harness's load tools (../shared/bench: gearload bg, rt; rawload
         fg) against: one node (the leader), one follower (every packet
         carried to the leader over its link), and all three nodes at once
         (three loaders, one per node, each a third of the load; rates
         summed). Interleaved, REPS rounds. Each node's CPU (user + system,
         from /proc) per job is measured too: the busiest node's and the
         cluster's total, which a shared, busy machine disturbs far less
         than it disturbs rates.

usage: perf/cluster-bench.py [latency] [rates]
  GEARSHIFT  binary (default target/release/gearshift; build it first)
  BENCH      the harness (default ../shared/bench)
  N          latency jobs per case (default 2000)
  REPS       rate rounds (default 3)
"""

import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, os.path.join(ROOT, "tests", "interop"))
sys.path.insert(0, os.path.join(ROOT, "tests", "import"))
sys.path.insert(0, os.path.join(ROOT, "tests", "cluster"))

import harness as h  # noqa: E402
from test_import import Postgres  # noqa: E402
from test_cluster import Cluster, raw_worker  # noqa: E402

GEARSHIFT = os.environ.get("GEARSHIFT") or os.path.join(ROOT, "target", "release", "gearshift")
BENCH = os.path.abspath(os.environ.get("BENCH") or os.path.join(ROOT, "..", "shared", "bench"))
N = int(os.environ.get("N", "2000"))
REPS = int(os.environ.get("REPS", "3"))


def pct(xs, p):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(round(p / 100 * (len(xs) - 1))))]


def latency_case(submit_port, worker_port, func):
    w = raw_worker(worker_port, func)
    c = h.Conn(submit_port)
    out = []
    for i in range(N):
        w.send_pkt(h.PRE_SLEEP)
        t0 = time.perf_counter()
        c.send_pkt(h.SUBMIT_JOB_BG, func, "", "x%d" % i)
        w.expect_pkt(h.NOOP, timeout=5)
        w.send_pkt(h.GRAB_JOB)
        handle = w.expect_pkt(h.JOB_ASSIGN, timeout=5).split(b"\0", 1)[0]
        out.append((time.perf_counter() - t0) * 1000)
        c.expect_pkt(h.JOB_CREATED)
        w.send_pkt(h.WORK_COMPLETE, handle, "")
    w.close()
    c.close()
    return out


def latency(cl, nodes):
    lead = cl.leader()
    others = [n for n in nodes if n != lead]
    cases = [("same", lead, lead), ("cross", others[0], others[1]), ("lead-f", lead, others[1])]
    print("\n## start latency (ms), %d jobs per case, one at a time" % N)
    print("| case | submit on | worker on | p50 | p90 | p99 | max |")
    print("|---|---|---|---:|---:|---:|---:|")
    for name, s, w in cases:
        xs = latency_case(cl.nodes[s].port, cl.nodes[w].port, "lat_" + name)
        print("| %s | %s | %s | %.2f | %.2f | %.2f | %.2f |"
              % (name, s, w, pct(xs, 50), pct(xs, 90), pct(xs, 99), max(xs)), flush=True)


def loads(port, share, tag):
    """Each workload's command against one node, for `share` of the load."""
    gl, rl = os.path.join(BENCH, "gearload"), os.path.join(BENCH, "rawload")
    n_a, n_r = 20000 // share, 60000 // share
    return [
        [gl, "bg", "-p", str(port), "-n", str(n_a), "-c", "4", "-w", "4", "-f", "bg_" + tag],
        [gl, "rt", "-p", str(port), "-c", "4", "-w", "4", "-d", "4", "-f", "rt_" + tag],
        [rl, "fg", "-p", str(port), "-n", str(n_r), "-f", "fg_" + tag, "-L", "R_fg"],
    ]


def cpu_secs(pid):
    """User + system CPU seconds of a process, from /proc."""
    with open("/proc/%d/stat" % pid) as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def rates(cl, nodes):
    lead = cl.leader()
    follower = [n for n in nodes if n != lead][0]
    setups = [("one node (leader)", [lead]), ("one follower (relayed)", [follower]),
              ("three nodes at once", nodes)]
    results = {name: [] for name, _ in setups}
    # (setup, workload) -> per round: (busiest node's, total) CPU µs per job
    cpu = {}
    for rep in range(REPS):
        for name, targets in setups:
            total = {}
            for k in range(3):  # workload by workload, loaders in parallel
                before = {n: cpu_secs(cl.nodes[n].pid) for n in nodes}
                procs = [subprocess.Popen(loads(cl.nodes[t].port, len(targets),
                                                "%s%d%d" % (t, rep, i))[k],
                                          stdout=subprocess.PIPE, text=True)
                         for i, t in enumerate(targets)]
                jobs = {}
                for p in procs:
                    out, _ = p.communicate(timeout=180)
                    for line in out.splitlines():
                        if line.startswith("{"):
                            d = json.loads(line)
                            if d.get("ok") is False:
                                # Hit the harness's wall-clock cap: its rate
                                # still counts, flagged.
                                print("   note: %s did not finish: %s" % (d["scenario"], line[:200]))
                            total[d["scenario"]] = total.get(d["scenario"], 0) + d["rate"]
                            jobs[d["scenario"]] = jobs.get(d["scenario"], 0) + d["ops"]
                used = {n: cpu_secs(cl.nodes[n].pid) - before[n] for n in nodes}
                # A scenario's CPU is charged to the loaders' main scenario
                # (gearload bg reports A_submit and A_drain: their sum).
                n_jobs = max(jobs.values()) if jobs else 0
                if n_jobs:
                    w = list(jobs)[0] if len(jobs) == 1 else "A"
                    cpu.setdefault((name, w), []).append(
                        (max(used.values()) / n_jobs * 1e6, sum(used.values()) / n_jobs * 1e6))
            results[name].append(total)
            print("rep %d %-24s %s" % (rep + 1, name, {k: round(v) for k, v in total.items()}),
                  flush=True)
    base = results[setups[0][0]]
    print("\n## rates (jobs/s, median of %d rounds; ratio to one node, median of rounds)" % REPS)
    print("| setup | A_submit | A_drain | B_rt | R_fg |")
    print("|---|---:|---:|---:|---:|")
    for name, _ in setups:
        cells = []
        for w in ("A_submit", "A_drain", "B_rt", "R_fg"):
            xs = [r.get(w, 0) for r in results[name]]
            ratio = statistics.median(r.get(w, 0) / b[w] for r, b in zip(results[name], base)
                                      if b.get(w))
            cells.append("%d (%.2f)" % (statistics.median(xs), ratio))
        print("| %s | %s |" % (name, " | ".join(cells)))
    print("\n## node CPU per job (µs, user + system; median of %d rounds): busiest node / "
          "all nodes, and their ratio to one node" % REPS)
    print("| setup | A (bg submit + drain) | B_rt | R_fg |")
    print("|---|---:|---:|---:|")
    for name, _ in setups:
        cells = []
        for w in ("A", "B_rt", "R_fg"):
            xs, bs = cpu.get((name, w), []), cpu.get((setups[0][0], w), [])
            if not xs or not bs:
                cells.append("-")
                continue
            busy = statistics.median(x[0] for x in xs)
            tot = statistics.median(x[1] for x in xs)
            base = statistics.median(b[1] for b in bs)
            cells.append("%.1f / %.1f (%.2f / %.2f)" % (busy, tot, busy / base, tot / base))
        print("| %s | %s |" % (name, " | ".join(cells)))


def main():
    steps = [a for a in sys.argv[1:]] or ["latency", "rates"]
    tmp = tempfile.mkdtemp(prefix="gs-cluster-bench-")
    pg = Postgres(tmp).start(durable=True)
    got = pg.sql("SHOW fsync")[0][0], pg.sql("SHOW synchronous_commit")[0][0]
    assert got == ("on", "on"), got
    cl = Cluster(pg, timeout_ms=5000)
    import test_cluster
    test_cluster.GEARSHIFT = GEARSHIFT
    try:
        cl.start("a", wait_leader=True)
        cl.start("b")
        cl.start("c")
        print("machine: %s, %d cores; PostgreSQL at its default durability; %s"
              % (socket.gethostname(), os.cpu_count(), GEARSHIFT))
        nodes = ["a", "b", "c"]
        if "latency" in steps:
            latency(cl, nodes)
        if "rates" in steps:
            rates(cl, nodes)
    finally:
        cl.stop_all()
        pg.stop()


if __name__ == "__main__":
    main()
