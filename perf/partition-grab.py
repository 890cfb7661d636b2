#!/usr/bin/env python3
"""Workers whose functions live on all three owners (`--partitioned`): what
a job costs the nodes when workers mostly wait for work. Three nodes share
the partitions; twelve functions, four on each owner; one worker on each
node registers all twelve; CLIENTS clients, spread over the nodes, each
submit foreground jobs to random functions one at a time, so workers sleep
between jobs and every wake-up is a GRAB round over the owners.

Reports the rate, the nodes' CPU per job (user + system, /proc) and, with
`perf`, the nodes' system calls per job.

usage: perf/partition-grab.py
  GEARSHIFT  binary (default target/release/gearshift)
  JOBS       jobs per round (default 6000)   CLIENTS (default 6)
  ROUNDS     (default 2)
  HOT        clients use only the first HOT functions (default 12: all; 4:
             one owner's, so the others' wait idle)
"""

import importlib.util
import multiprocessing
import os
import random
import shutil
import struct
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
spec = importlib.util.spec_from_file_location("pb", os.path.join(HERE, "partition-bench.py"))
pb = importlib.util.module_from_spec(spec)
spec.loader.exec_module(pb)
cb, h = pb.cb, pb.h

JOBS = int(os.environ.get("JOBS", "6000"))
CLIENTS = int(os.environ.get("CLIENTS", "6"))
ROUNDS = int(os.environ.get("ROUNDS", "2"))
HOT = int(os.environ.get("HOT", "12"))


def functions(cl, prefix="grab"):
    """Twelve functions, four in partitions of each node."""
    import test_partitions as tp
    own = tp.owners(cl)
    picked = {n: [] for n in pb.NODES}
    i = 0
    while any(len(v) < 4 for v in picked.values()):
        f = "%s%d" % (prefix, i)
        i += 1
        n = own.get(tp.partition_of(f))
        if n in picked and len(picked[n]) < 4:
            picked[n].append(f)
    return [f for n in pb.NODES for f in picked[n]]


def worker(port, funcs, stop):
    w = h.Conn(port, timeout=30)
    for f in funcs:
        w.send_pkt(h.CAN_DO, f)
    w.send_pkt(h.GRAB_JOB)
    while not stop.is_set():
        try:
            _, t, body = w.read_pkt(timeout=1)
        except h.TestFailure:
            continue
        if t == h.JOB_ASSIGN:
            handle, _, data = body.split(b"\0", 2)
            w.send(h.packet(h.WORK_COMPLETE, handle, data) + h.packet(h.GRAB_JOB))
        elif t == h.NO_JOB:
            w.send_pkt(h.PRE_SLEEP)
        elif t == h.NOOP:
            w.send_pkt(h.GRAB_JOB)
    w.close()


def client(port, funcs, n, seed):
    rnd = random.Random(seed)
    c = h.Conn(port, timeout=30)
    for i in range(n):
        c.send_pkt(h.SUBMIT_JOB, rnd.choice(funcs), "", "x%d" % i)
        c.expect_pkt(h.JOB_CREATED)
        c.expect_pkt(h.WORK_COMPLETE)
    c.close()


def one_round(cl, funcs, tmp, stat):
    names = pb.NODES
    ports = [cl.nodes[n].port for n in names]
    stop = multiprocessing.Event()
    workers = [multiprocessing.Process(target=worker, args=(p, funcs, stop)) for p in ports]
    for w in workers:
        w.start()
    time.sleep(1)
    before = {n: cb.cpu_secs(cl.nodes[n].pid) for n in names}
    stats = []
    if stat:
        stats = [subprocess.Popen(["perf", "stat", "-x,", "-e", "raw_syscalls:sys_enter",
                                   "-p", str(cl.nodes[n].pid),
                                   "-o", os.path.join(tmp, "stat-%s.txt" % n)]) for n in names]
    t0 = time.monotonic()
    per = JOBS // CLIENTS
    clients = [multiprocessing.Process(target=client, args=(ports[i % 3], funcs[:HOT], per, i))
               for i in range(CLIENTS)]
    for c in clients:
        c.start()
    for c in clients:
        c.join()
    took = time.monotonic() - t0
    jobs = per * CLIENTS
    cpu = sum(cb.cpu_secs(cl.nodes[n].pid) - before[n] for n in names)
    calls = 0.0
    for s in stats:
        s.send_signal(2)
        s.wait()
    for n in names if stats else []:
        for line in open(os.path.join(tmp, "stat-%s.txt" % n)):
            v = line.split(",")
            if len(v) > 2 and v[0].isdigit():
                calls += float(v[0])
    stop.set()
    for w in workers:
        w.join()
    print("  %d jobs, %.0f jobs/s, nodes %.1f µs CPU per job%s" % (
        jobs, jobs / took, cpu / jobs * 1e6,
        ", %.2f system calls per job" % (calls / jobs) if stats else ""), flush=True)


def main():
    tmp = tempfile.mkdtemp(prefix="gs-partition-grab-")
    pg = pb.Postgres(tmp).start(durable=True)
    cl = pb.Cluster(pg, timeout_ms=5000)
    import test_cluster
    test_cluster.GEARSHIFT = cb.GEARSHIFT
    try:
        for n in pb.NODES:
            cl.start(n, extra="--partitioned")
        pb.serving(cl, pb.NODES)
        funcs = functions(cl)
        print("machine: %s, %d cores; %s; %d clients; %d of 12 functions used" % (
            os.uname().nodename, os.cpu_count(), cb.GEARSHIFT, CLIENTS, HOT), flush=True)
        for r in range(ROUNDS):
            one_round(cl, funcs, tmp, r == ROUNDS - 1 and shutil.which("perf"))
    finally:
        cl.stop_all()
        pg.stop()


if __name__ == "__main__":
    sys.exit(main())
