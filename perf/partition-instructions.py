#!/usr/bin/env python3
"""User-space instructions per R_fg job of one node, counted by callgrind:
a plain node, or one partitioned node alone (it owns every partition), on a
throwaway PostgreSQL, under the twelve loaders of perf/partition-bench.py.
The count covers one round after a warm-up round (callgrind_control dumps
between them), so start-up is left out. Exact where CPU time is noisy:
compare builds with it, not with a timed run.

usage: perf/partition-instructions.py plain|one BINARY...
  BENCH, F  as perf/partition-bench.py; needs valgrind
"""

import glob
import importlib.util
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
spec = importlib.util.spec_from_file_location("pb", os.path.join(HERE, "partition-bench.py"))
pb = importlib.util.module_from_spec(spec)
spec.loader.exec_module(pb)


def summary(path):
    for line in open(path):
        if line.startswith("summary:"):
            return int(line.split()[1])
    return 0


def count(mode, binary, tmp):
    """Instructions per job of `binary` in `mode`."""
    out = os.path.join(tmp, "cg-%s-%s" % (mode, os.path.basename(binary)))
    wrap = out + ".sh"
    with open(wrap, "w") as f:
        f.write("#!/bin/sh\nexec valgrind --tool=callgrind --callgrind-out-file=%s.%%p %s \"$@\"\n"
                % (out, binary))
    os.chmod(wrap, 0o755)
    pg = pb.Postgres(tempfile.mkdtemp(prefix="gs-partition-instr-pg-")).start(durable=True)
    # A node under valgrind renews its leases late: a long node timeout.
    cl = pb.Cluster(pg, timeout_ms=30000)
    import test_cluster
    test_cluster.GEARSHIFT = wrap
    jobs = 0
    try:
        cl.start("a", extra="" if mode == "plain" else "--partitioned")
        if mode != "plain":
            pb.serving(cl, ["a"])
        pid = cl.nodes["a"].pid
        for r in ("warm", "count"):
            # A dump starts the next count from zero.
            subprocess.run(["callgrind_control", "-d", str(pid)], check=True, capture_output=True)
            procs = [subprocess.Popen(pb.load(cl.nodes["a"].port, "%s_%d" % (r, i), 2),
                                      stdout=subprocess.PIPE, text=True) for i in range(pb.F)]
            for p in procs:
                p.communicate(timeout=900)
                if p.returncode != 0:
                    sys.exit("a loader failed")
            jobs = 60000 // pb.F * pb.F
        subprocess.run(["callgrind_control", "-d", str(pid)], check=True, capture_output=True)
    finally:
        cl.stop_all()
        pg.stop()
    # Dumps: .1 start-up, .2 the warm-up round, .3 the counted round.
    counted = sorted(glob.glob(out + ".*.3"))
    if not counted:
        sys.exit("no callgrind dump for the counted round")
    return summary(counted[0]) / jobs


def main():
    if len(sys.argv) < 3 or sys.argv[1] not in ("plain", "one"):
        sys.exit(__doc__)
    tmp = tempfile.mkdtemp(prefix="gs-partition-instr-")
    print("machine: %s, %d cores; mode %s; R_fg, %d loaders" % (
        os.uname().nodename, os.cpu_count(), sys.argv[1], pb.F))
    for binary in sys.argv[2:]:
        print("%s: %.0f instructions per job" % (binary, count(sys.argv[1], binary, tmp)))


if __name__ == "__main__":
    main()
