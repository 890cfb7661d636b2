#!/usr/bin/env python3
"""User and system CPU per job of each thread of a process while a command runs.

usage: perf/threadsplit.py PID JOBS -- COMMAND [ARGS...]

Like the harness's threadcpu.py, but keeps user and system time apart: on a
thread that hands work to others, system time is mostly sleeping and being
woken (futex, eventfd), a cost that shrinks when the thread is kept busy,
while user time is the work itself. Reads utime and stime of every
/proc/PID/task/TID/stat before and after the command.
"""
import os
import subprocess
import sys

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


def main():
    if len(sys.argv) < 5 or sys.argv[3] != "--":
        sys.exit(__doc__)
    pid, jobs = int(sys.argv[1]), float(sys.argv[2])
    before = threads(pid)
    code = subprocess.call(sys.argv[4:])
    after = threads(pid)
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
