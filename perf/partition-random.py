#!/usr/bin/env python3
"""Partitioned nodes with clients and workers on random nodes (issue 33's
set-up; perf/partition-bench.py keeps each loader's client and worker on
one node): twelve functions, four in each node's partitions, one worker per
function and one client per function submitting foreground jobs with
DEPTH in flight, each connected to a node drawn at random (seeded). The
same load then runs on a plain node (no `--partitioned`). Reports the
nodes' CPU per job (user + system, /proc): each node's, the busiest's and
the total, and their ratio to the plain node's.

usage: perf/partition-random.py
  GEARSHIFT  binary (default target/release/gearshift)
  JOBS       jobs per function (default 2000)   DEPTH (default 8)
  SEED       placement seed (default 1)          ROUNDS (default 2)
  LINK_TLS   1: the three nodes talk over TLS (--link-tls-*, a throwaway CA)
"""

import importlib.util
import multiprocessing
import os
import random
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
spec = importlib.util.spec_from_file_location("pg_", os.path.join(HERE, "partition-grab.py"))
grab = importlib.util.module_from_spec(spec)
spec.loader.exec_module(grab)
pb, cb, h = grab.pb, grab.cb, grab.h

JOBS = int(os.environ.get("JOBS", "2000"))
DEPTH = int(os.environ.get("DEPTH", "8"))
SEED = int(os.environ.get("SEED", "1"))
ROUNDS = int(os.environ.get("ROUNDS", "2"))
LINK_TLS = os.environ.get("LINK_TLS") == "1"


def client(port, func, n):
    c = h.Conn(port, timeout=30)
    sent = done = 0
    while sent < min(DEPTH, n):
        c.send_pkt(h.SUBMIT_JOB, func, "", "x%d" % sent)
        sent += 1
    while done < n:
        _, t, _ = c.read_pkt()
        if t == h.WORK_COMPLETE:
            done += 1
            if sent < n:
                c.send_pkt(h.SUBMIT_JOB, func, "", "x%d" % sent)
                sent += 1
    c.close()


def one_round(cl, names, funcs, placement):
    """Runs the load; returns (jobs/s, CPU µs per job by node)."""
    stop = multiprocessing.Event()
    workers = [multiprocessing.Process(target=grab.worker,
                                       args=(cl.nodes[placement[f][1]].port, [f], stop))
               for f in funcs]
    for w in workers:
        w.start()
    time.sleep(1)
    before = {n: cb.cpu_secs(cl.nodes[n].pid) for n in names}
    t0 = time.monotonic()
    clients = [multiprocessing.Process(target=client, args=(cl.nodes[placement[f][0]].port, f, JOBS))
               for f in funcs]
    for c in clients:
        c.start()
    for c in clients:
        c.join()
    took = time.monotonic() - t0
    jobs = JOBS * len(funcs)
    cpu = {n: (cb.cpu_secs(cl.nodes[n].pid) - before[n]) / jobs * 1e6 for n in names}
    stop.set()
    for w in workers:
        w.join()
    return jobs / took, cpu


def main():
    tmp = tempfile.mkdtemp(prefix="gs-partition-random-")
    pg = pb.Postgres(tmp).start(durable=True)
    cl = pb.Cluster(pg, timeout_ms=5000)
    import test_cluster
    test_cluster.GEARSHIFT = cb.GEARSHIFT
    pg.sql("CREATE DATABASE plain")
    plain = pb.Cluster(pg, timeout_ms=5000)
    plain.url = pg.store_url("plain")
    rnd = random.Random(SEED)
    extra = "--partitioned"
    if LINK_TLS:
        sys.path.insert(0, os.path.join(os.path.dirname(HERE), "tests", "cluster"))
        import test_links
        import test_tls
        extra += " " + test_links.link_tls_flags(test_tls.Pki(tmp))
    try:
        for n in pb.NODES:
            cl.start(n, extra=extra)
        pb.serving(cl, pb.NODES)
        funcs = grab.functions(cl, "rnd")
        placement = {f: (rnd.choice(pb.NODES), rnd.choice(pb.NODES)) for f in funcs}
        print("machine: %s, %d cores; %s; %d functions, client/worker nodes %s; depth %d%s"
              % (os.uname().nodename, os.cpu_count(), cb.GEARSHIFT, len(funcs),
                 " ".join("%s%s" % placement[f] for f in funcs), DEPTH,
                 "; links in TLS" if LINK_TLS else ""), flush=True)
        for r in range(ROUNDS):
            plain.start("p")
            p_rate, p_cpu = one_round(plain, ["p"], funcs, {f: ("p", "p") for f in funcs})
            plain.stop_all()
            rate, cpu = one_round(cl, pb.NODES, funcs, placement)
            total, busiest = sum(cpu.values()), max(cpu.values())
            print("round %d: plain %.0f jobs/s, %.1f µs/job; three nodes %.0f jobs/s (%.2f), "
                  "%s µs/job; busiest %.2f, all %.2f of the plain node's"
                  % (r + 1, p_rate, p_cpu["p"], rate, rate / p_rate,
                     " ".join("%s %.1f" % (n, cpu[n]) for n in pb.NODES),
                     busiest / p_cpu["p"], total / p_cpu["p"]), flush=True)
    finally:
        cl.stop_all()
        plain.stop_all()
        pg.stop()


if __name__ == "__main__":
    sys.exit(main())
