#!/usr/bin/env python3
"""Gearman over TLS (`--ssl-listen`) on two builds, interleaved: `gearshift
bench --tls` (roundtrip: foreground jobs through echo workers; echo) against
a fresh server per run, reporting the rate and the server's CPU (user +
system, /proc) per job. Both builds serve, the loader is NEW's.

usage: OLD=bin NEW=bin perf/tls-bench.py
  REPS      rounds (default 3)   SECONDS  per scenario (default 5)
  CLIENTS   client and worker connections each (default 4)
"""

import importlib.util
import os
import statistics
import subprocess
import sys
import tempfile
import json

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
spec = importlib.util.spec_from_file_location("test_tls", os.path.join(ROOT, "tests", "tls", "test_tls.py"))
tt = importlib.util.module_from_spec(spec)
spec.loader.exec_module(tt)

OLD, NEW = os.environ["OLD"], os.environ["NEW"]
REPS = int(os.environ.get("REPS", "3"))
SECONDS = os.environ.get("SECONDS", "5")
CLIENTS = os.environ.get("CLIENTS", "4")


def cpu_secs(pid):
    with open("/proc/%d/stat" % pid) as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def run(binary, pki, scenario):
    """One fresh server: (jobs/s, server CPU µs per job)."""
    tt.GEARSHIFT = binary
    s = tt.Gearshift(tt.tls_flags(pki)).start()
    try:
        before = cpu_secs(s.srv.pid)
        out = subprocess.run(
            [NEW, "bench", "-s", "127.0.0.1:%d" % s.tls_port, "--tls-ca", pki.ca,
             "--scenario", scenario, "--duration", SECONDS + "s", "-c", CLIENTS, "-w", CLIENTS,
             "--json"], capture_output=True, text=True, timeout=120)
        cpu = cpu_secs(s.srv.pid) - before
    finally:
        s.stop()
    d = [json.loads(x) for x in out.stdout.splitlines() if x.startswith("{")]
    if not d:
        sys.exit("bench failed: %s" % out.stderr[-500:])
    ops = d[0].get("jobs") or d[0].get("ops")
    return d[0]["rate"], cpu / ops * 1e6


def main():
    tmp = tempfile.mkdtemp(prefix="gs-tls-bench-")
    pki = tt.Pki(tmp)
    got = {}
    print("machine: %d cores; OLD %s; NEW %s; %s s per scenario, %s clients"
          % (os.cpu_count(), OLD, NEW, SECONDS, CLIENTS))
    for rep in range(REPS):
        for name, binary in (("old", OLD), ("new", NEW)) if rep % 2 == 0 else (("new", NEW), ("old", OLD)):
            for sc in ("roundtrip", "echo"):
                rate, us = run(binary, pki, sc)
                got.setdefault((sc, name), []).append((rate, us))
                print("rep %d %s %-9s %9.0f /s %6.2f µs/job" % (rep + 1, name, sc, rate, us), flush=True)
    print("\n| scenario | old /s | new /s | new ÷ old | old µs/job | new µs/job | new ÷ old |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    for sc in ("roundtrip", "echo"):
        o, n = got[(sc, "old")], got[(sc, "new")]
        rr = statistics.median(b[0] / a[0] for a, b in zip(o, n))
        cr = statistics.median(b[1] / a[1] for a, b in zip(o, n))
        print("| %s | %.0f | %.0f | %.2f | %.2f | %.2f | %.2f |"
              % (sc, statistics.median(x[0] for x in o), statistics.median(x[0] for x in n), rr,
                 statistics.median(x[1] for x in o), statistics.median(x[1] for x in n), cr))


if __name__ == "__main__":
    main()
