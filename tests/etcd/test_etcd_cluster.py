#!/usr/bin/env python3
"""etcd bridge suite, etcd's own failures at length: a 3-member etcd cluster
whose leader moves (etcdctl move-leader) twice while jobs run, and a minute
without etcd while Gearman traffic goes on.

test_etcd.py runs these too (the minute-long case in a process of its own
from its start, beside the other tests); alone: `python3
test_etcd_cluster.py [substring ...]`. Env as test_etcd.py's.
"""

import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

from etcd_harness import GEARSHIFT, run_counts, wrap  # noqa: E402
import harness as h  # noqa: E402  (tests/interop, on the path etcd_harness set)
from harness import check, check_eq  # noqa: E402

OUTAGE = 60.0


def finished_once(ctx, ids, timeout=30):
    for jid in ids:
        doc = ctx.wait_state(jid, timeout=timeout)
        check_eq(doc["Result"]["Status"], "SUCCESS", "job %s's Result" % jid)
        got = [s["State"] for s in doc["States"]]
        check_eq(got.count("FINISHED"), 1, "FINISHED states of %s: %r" % (jid, got))


def record_worker(ctx, log, sleep):
    """A gearman CLI worker for etcd-job appending each workload to log."""
    return ctx.cli_worker("etcd-job", 'w=$(cat); sleep %s; printf "%%s\\n" "$w" >> %s; echo ok'
                          % (sleep, log))


def ran_once(log, n):
    runs = run_counts(log)
    check_eq(len(runs), n, "jobs run: %r" % sorted(runs))
    check_eq({k: v for k, v in runs.items() if v != 1}, {}, "jobs run more than once")


def leader_change_under_load(ctx):
    glog = ctx.path("gearman.log")
    for _ in range(3):
        record_worker(ctx, glog, "0.15")
    h.wait_workers(ctx.port, "etcd-job", 3)
    ids = [ctx.submit("a%d" % i) for i in range(24)]
    h.wait_for(lambda: os.path.exists(glog), 10, "jobs running")
    for r in range(2):
        old, new = ctx.etcd.move_leader()
        check(old is not new, "the leader moved")
        check(len(run_counts(glog)) < len(ids), "jobs still running as the leader moved")
        ids += [ctx.submit("m%d-%d" % (r, i)) for i in range(6)]
        time.sleep(0.5)
    finished_once(ctx, ids, timeout=40)
    ran_once(glog, len(ids))


def minute_without_etcd(ctx):
    glog, plog = ctx.path("gearman.log"), ctx.path("plain.log")
    record_worker(ctx, glog, "0.3")
    record_worker(ctx, glog, "0.3")
    ctx.cli_worker("plain", 'w=$(cat); printf "%%s\\n" "$w" >> %s; printf "ok %%s" "$w"' % plog)
    h.wait_workers(ctx.port, "etcd-job", 2)
    h.wait_workers(ctx.port, "plain")
    ids = [ctx.submit("a%d" % i) for i in range(10)]
    h.wait_for(lambda: os.path.exists(glog), 10, "jobs running")
    ctx.etcd.stop()
    check(len(run_counts(glog)) < len(ids), "jobs still queued or running when etcd went")
    node = ctx.nodes[0]
    gm = ["gearman", "-h", h.HOST, "-p", str(ctx.port), "-f", "plain"]
    t0, n = time.monotonic(), 0
    while time.monotonic() - t0 < OUTAGE:
        # Gearman goes on: foreground jobs answered, background ones run.
        r = h.run(gm + ["fg%d" % n], timeout=10)
        check_eq(r.stdout.strip(), "ok fg%d" % n, "a Gearman job %.0f s into the outage: %s"
                 % (time.monotonic() - t0, r.stderr))
        check_eq(h.run(gm + ["-b", "bg%d" % n], timeout=10).returncode, 0, "background submit")
        n += 1
        time.sleep(4)
    h.wait_for(lambda: "etcd: out of reach" in node.server.log_text(), 5, "the outage logged")
    ctx.etcd.start()
    h.wait_for(lambda: "etcd: reachable again" in node.server.log_text(), 15, "the return logged")
    ids += [ctx.submit("b%d" % i) for i in range(5)]
    finished_once(ctx, ids, timeout=40)
    ran_once(glog, len(ids))
    want = ["fg%d" % i for i in range(n)] + ["bg%d" % i for i in range(n)]
    h.wait_for(lambda: len(open(plog).read().split()) >= len(want), 10, "background jobs ran")
    with open(plog) as f:
        lines = f.read().split()
    check_eq(sorted(lines), sorted(want), "Gearman jobs during the outage, once each")
    counters = node.etcd_counters()
    check_eq(counters.get("etcd_outages"), 1, "gearshift_etcd_total{event=\"etcd_outages\"}")
    check(counters.get("etcd_errors", 0) > 0, "etcd_errors counted: %r" % counters)
    check({d["Status"] for d in ctx.workers().values()} == {"ALIVE"}, "entries ALIVE again")


TESTS = {leader_change_under_load: {"members": 3}}
MINUTE = (minute_without_etcd, {})


def tests(minute=True):
    """(name, test) of the tests here, for test_etcd.py (which runs the
    minute-long one apart: minute=False)."""
    out = [(f.__name__, wrap(f, **kw)) for f, kw in TESTS.items()]
    if minute:
        out.append((MINUTE[0].__name__, wrap(MINUTE[0], **MINUTE[1])))
    return out


if __name__ == "__main__":
    os.environ["SERVER_CMD"] = "%s serve ... --etcd http://127.0.0.1:<own port>" % GEARSHIFT
    sys.exit(h.run_suite("etcd bridge vs etcd's failures", tests()))
