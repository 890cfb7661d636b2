#!/usr/bin/env python3
"""Where a partitioned node's CPU goes: each thread's CPU per job, and the
system calls and context switches per job (`perf stat`), for a plain node,
one partitioned node alone, or three sharing the partitions, under one
workload of perf/partition-bench.py (twelve loaders, one function each).

usage: perf/partition-threads.py plain|one|three
  GEARSHIFT, BENCH, F  as perf/partition-bench.py
  K      workload: 0 A (bg), 1 B_rt, 2 R_fg (default), 3 R_submit (R_drain needs it first)
  ROUNDS rounds (default 2); `perf stat` watches the last one (needs perf)
  RECORD a folder: `perf record` (cpu-clock samples) also watches the last
         round, one record-MODE-NODE.data per node (`perf report -i` it);
         with CALLS=1 it records call stacks too (DWARF, large files)
"""

import importlib.util
import json
import os
import shutil
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
spec = importlib.util.spec_from_file_location("pb", os.path.join(HERE, "partition-bench.py"))
pb = importlib.util.module_from_spec(spec)
spec.loader.exec_module(pb)
cb = pb.cb

MODE = sys.argv[1] if len(sys.argv) > 1 else "three"
K = int(os.environ.get("K", "2"))
ROUNDS = int(os.environ.get("ROUNDS", "2"))
EVENTS = "raw_syscalls:sys_enter,context-switches"


def threads(pid):
    """CPU seconds by thread name (digits dropped: gearshift-io-0 -> gearshift-io)."""
    out = {}
    for t in os.listdir("/proc/%d/task" % pid):
        try:
            name = open("/proc/%d/task/%s/comm" % (pid, t)).read().strip()
            f = open("/proc/%d/task/%s/stat" % (pid, t)).read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        out[t] = (name.rstrip("0123456789-"), (int(f[11]) + int(f[12])) / os.sysconf("SC_CLK_TCK"))
    return out


def main():
    if MODE not in ("plain", "one", "three"):
        sys.exit(__doc__)
    tmp = tempfile.mkdtemp(prefix="gs-partition-threads-")
    pg = pb.Postgres(tmp).start(durable=True)
    cl = pb.Cluster(pg, timeout_ms=5000)
    import test_cluster
    test_cluster.GEARSHIFT = cb.GEARSHIFT
    names = ["a"] if MODE != "three" else pb.NODES
    try:
        for n in names:
            cl.start(n, extra="" if MODE == "plain" else "--partitioned")
        if MODE != "plain":
            pb.serving(cl, names)
        print("machine: %s, %d cores; %s; %s; workload %d" % (
            os.uname().nodename, os.cpu_count(), cb.GEARSHIFT, MODE, K))
        for r in range(ROUNDS):
            one_round(cl, names, r, r == ROUNDS - 1 and shutil.which("perf"), tmp)
    finally:
        cl.stop_all()
        pg.stop()


def one_round(cl, names, r, stat, tmp):
    before = {n: threads(cl.nodes[n].pid) for n in names}
    stats = []
    if stat:
        stats = [subprocess.Popen(["perf", "stat", "-x,", "-e", EVENTS, "-p", str(cl.nodes[n].pid),
                                   "-o", os.path.join(tmp, "stat-%s.txt" % n)]) for n in names]
        if os.environ.get("RECORD"):
            calls = ["--call-graph", "dwarf,16384"] if os.environ.get("CALLS") else []
            stats += [subprocess.Popen(["perf", "record", "-q", "-e", "cpu-clock", "-F", "2000"] + calls + [
                                        "-p", str(cl.nodes[n].pid), "-o",
                                        os.path.join(os.environ["RECORD"], "record-%s-%s.data" % (MODE, n))],
                                       stderr=subprocess.DEVNULL) for n in names]
    procs = [subprocess.Popen(pb.load(cl.nodes[names[i % len(names)]].port, "t%d_%d" % (r, i), K),
                              stdout=subprocess.PIPE, text=True) for i in range(pb.F)]
    jobs = rate = 0
    for p in procs:
        out, _ = p.communicate(timeout=300)
        for line in out.splitlines():
            if line.startswith("{"):
                d = json.loads(line)
                if d["scenario"] in ("A_drain", "B_rt", "R_fg"):
                    jobs += d["ops"]
                    rate += d["rate"]
    for s in stats:
        s.send_signal(2)
        s.wait()
    print("round %d: %d jobs, %d jobs/s" % (r + 1, jobs, rate))
    total = 0
    for n in names:
        per = {}
        for t, (name, secs) in threads(cl.nodes[n].pid).items():
            per[name] = per.get(name, 0) + secs - before[n].get(t, (name, 0))[1]
        total += sum(per.values())
        shares = ", ".join("%s %.1f" % (k, v / jobs * 1e6)
                           for k, v in sorted(per.items(), key=lambda kv: -kv[1]) if v > 0)
        print("  node %s: %.1f µs/job (%s)" % (n, sum(per.values()) / jobs * 1e6, shares))
        if stats:
            for line in open(os.path.join(tmp, "stat-%s.txt" % n)):
                v = line.split(",")
                if len(v) > 2 and v[0].replace(".", "").isdigit():
                    print("    %s per job: %.2f" % (v[2], float(v[0]) / jobs))
    print("  all nodes: %.1f µs/job" % (total / jobs * 1e6))


if __name__ == "__main__":
    main()
