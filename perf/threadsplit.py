#!/usr/bin/env python3
"""User and system CPU per job of each thread of a process while a command runs.

usage: perf/threadsplit.py [--metrics URL] PID JOBS -- COMMAND [ARGS...]

Like the harness's threadcpu.py, but keeps user and system time apart: on a
thread that hands work to others, system time is mostly sleeping and being
woken (futex, eventfd), a cost that shrinks when the thread is kept busy,
while user time is the work itself. Reads utime and stime of every
/proc/PID/task/TID/stat before and after the command.

With --metrics (a Gearshift server's /metrics address), also prints the
time its shared hub was held per job (gearshift_core_busy_seconds_total,
wall-clock time, so an upper bound of the serial part's CPU):
"hub-held us/job X rounds R".
"""
import os
import subprocess
import sys
import urllib.request

HZ = os.sysconf("SC_CLK_TCK")


def threads(pid):
    seen = {}
    base = "/proc/%d/task" % pid
    for tid in os.listdir(base):
        try:
            with open("%s/%s/stat" % (base, tid)) as f:
                raw = f.read()
        except OSError:
            continue
        # The name may hold spaces; everything after the last ')' is fixed.
        name = raw[raw.index("(") + 1:raw.rindex(")")]
        rest = raw[raw.rindex(")") + 2:].split()
        seen[tid] = (name, int(rest[11]), int(rest[12]))
    return seen


def hub_held(url):
    """(seconds the shared hub was held, rounds) from a /metrics page."""
    got = {}
    with urllib.request.urlopen(url, timeout=10) as r:
        for line in r.read().decode().splitlines():
            name, _, value = line.partition(" ")
            if name in ("gearshift_core_busy_seconds_total", "gearshift_core_rounds_total"):
                got[name] = float(value)
    return got.get("gearshift_core_busy_seconds_total", 0.0), got.get("gearshift_core_rounds_total", 0.0)


def main():
    args = sys.argv[1:]
    metrics = None
    if args[:1] == ["--metrics"]:
        metrics, args = args[1], args[2:]
    if len(args) < 4 or args[2] != "--":
        sys.exit(__doc__)
    pid, jobs = int(args[0]), float(args[1])
    held0 = hub_held(metrics) if metrics else None
    before = threads(pid)
    code = subprocess.call(args[3:])
    after = threads(pid)
    if metrics:
        held1 = hub_held(metrics)
        print("hub-held us/job %.2f rounds %d"
              % (1e6 * (held1[0] - held0[0]) / jobs, held1[1] - held0[1]))
    rows = []
    for tid, (name, ut, st) in after.items():
        _, ut0, st0 = before.get(tid, (name, 0, 0))
        user, sys_ = (ut - ut0) / HZ, (st - st0) / HZ
        if user + sys_ > 0:
            rows.append((user + sys_, name, tid, user, sys_))
    rows.sort(reverse=True)
    for total, name, tid, user, sys_ in rows:
        print("%-16s %8s  us/job %7.2f  user %6.2f  sys %6.2f"
              % (name, tid, 1e6 * total / jobs, 1e6 * user / jobs, 1e6 * sys_ / jobs))
    sys.exit(code)


if __name__ == "__main__":
    main()
