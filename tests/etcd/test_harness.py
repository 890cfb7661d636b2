#!/usr/bin/env python3
"""The etcd suite's own plumbing, without Gearshift: a real etcd
(etcd_harness.Etcd) and the seed's queue of etcdqueue.py (submitter, native
workers as processes, harvester), so test_etcd.py's yardsticks are proven
on their own. Command line: substrings of test names. Ends with
`N passed, N failed, N skipped`.
"""

import os
import shutil
import signal
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

from etcd_harness import ETCD, Ctx, run_counts  # noqa: E402
import etcdqueue as eq  # noqa: E402
import harness as h  # noqa: E402
from harness import check, check_eq  # noqa: E402


def native_jobs_run_once_each(ctx):
    ids = [ctx.submit("cfg-%d" % i, function="f" if i % 2 else None) for i in range(12)]
    check_eq(ids[0], "0" * 19 + "1", "the first id, zero-padded")
    check_eq(ctx.e.get("/seq/jobs").raw, b"12", "the counter holds the last id")
    check_eq(ctx.q.job(ids[1])[1].get("Function"), "f", "Function field")
    check("Function" not in ctx.q.job(ids[0])[1], "no Function unless asked")
    log = ctx.path("runs.log")
    for i in range(3):
        ctx.native_worker("w%d" % i, "echo", log=log)
    for i, jid in enumerate(ids):
        doc = ctx.wait_state(jid)
        check_eq([s["State"] for s in doc["States"]], ["QUEUED", "STARTED", "FINISHED"],
                 "states of %s" % jid)
        check_eq(doc["Result"], {"Status": "SUCCESS", "Info": "cfg-%d" % i}, "result")
        check(doc["Owner"] in ("w0", "w1", "w2"), "Owner %r" % doc.get("Owner"))
        check(all(eq.parse_time(s["Date"]) for s in doc["States"]), "RFC 3339 dates")
    check_eq(run_counts(log), {jid: 1 for jid in ids}, "runs per job")
    h.wait_for(lambda: len(ctx.workers()) == 3, 10, "three entries under workers/")
    ws = ctx.workers()
    check_eq(sorted(ws), ["w0", "w1", "w2"], "registry")
    for name, w in ws.items():
        check_eq((w["Status"], w["Job"], w["Name"]), ("ALIVE", "", name), "entry of " + name)


def failure_and_steps(ctx):
    a = ctx.submit("x")
    ctx.native_worker("bad", "fail")
    doc = ctx.wait_state(a)
    check_eq(doc["Result"], {"Status": "FAILURE", "Info": "boom:x"}, "failure")
    for p in ctx.procs:
        p.stop()
    b = ctx.submit("y")
    ctx.native_worker("stepper", "steps")
    h.wait_for(lambda: ctx.q.job(b)[1]["States"][-1].get("Step") == "1/3", 10, "Step 1/3")
    doc = ctx.wait_state(b)
    check_eq(doc["States"][1]["Step"], "2/3", "the STARTED state's last Step")


def stale_worker_harvested_and_fenced(ctx):
    # A worker stopped mid-job (SIGSTOP: no heartbeat) is harvested by
    # another; its job runs again there; woken, its FINISHED write is fenced.
    slow_log, other_log = ctx.path("slow.log"), ctx.path("other.log")
    slow = ctx.native_worker("slow", "sleep", log=slow_log, harvest=False)
    jid = ctx.submit("2.5")
    h.wait_for(lambda: "run %s" % jid in open(slow_log).read(), 10, "slow took the job")
    os.kill(slow.pid, signal.SIGSTOP)
    try:
        ctx.native_worker("other", "echo", log=other_log)
        doc = ctx.wait_state(jid, timeout=20)
        states = [(s["State"], s["Step"]) for s in doc["States"]]
        check_eq(states[:4], [("QUEUED", ""), ("STARTED", ""),
                              ("QUEUED", "harvested: worker slow lost"), ("STARTED", "")],
                 "states")
        check_eq(doc["Owner"], "other", "Owner after the harvest")
        check_eq(ctx.workers()["slow"]["Status"], "DEAD", "the stale worker's entry")
    finally:
        os.kill(slow.pid, signal.SIGCONT)
    check_eq(slow.wait(timeout=15), 0, "the harvested worker exits")
    with open(slow_log) as f:
        text = f.read()
    check("fenced %s" % jid in text and "finished" not in text, "slow's log: %r" % text)
    doc = ctx.wait_state(jid)
    check_eq(doc["Result"]["Info"], "2.5", "the result is the second run's")
    check_eq(sum(1 for s in doc["States"] if s["State"] == "FINISHED"), 1, "finished once")


def finished_job_left_alone(ctx):
    jid = ctx.submit("done")
    w = ctx.native_worker("once", "echo", harvest=False)
    ctx.wait_state(jid)
    os.kill(w.pid, signal.SIGSTOP)
    try:
        # The entry names no job now; name one anyway, as a worker dying
        # between FINISHED and clearing Job would leave it.
        kv = ctx.e.get("/workers/once")
        doc = dict(kv.json(), Job=jid, Heartbeat="2000-01-01T00:00:00Z")
        ctx.e.put("/workers/once", eq.dump(doc))
        check_eq(ctx.q.harvest(3), ["once"], "harvested")
        check_eq(ctx.workers()["once"]["Status"], "DEAD", "entry")
        check_eq(eq.last_state(ctx.q.job(jid)[1]), "FINISHED", "the finished job untouched")
        check_eq(ctx.q.harvest(3), [], "a DEAD worker is not harvested again")
    finally:
        os.kill(w.pid, signal.SIGCONT)


def split_layout_moves_between_dirs(ctx):
    ids = [ctx.submit("s%d" % i) for i in range(4)]
    check_eq(sorted(ctx.q.jobs()), ids, "listed across the three dirs")
    kvs, _, _ = ctx.e.range("/new/", eq.prefix_end("/new/"))
    check_eq(len(kvs), 4, "new/ holds the queued jobs")
    log = ctx.path("runs.log")
    ctx.native_worker("a", "echo", log=log)
    ctx.native_worker("b", "echo", log=log)
    for jid in ids:
        ctx.wait_state(jid)
    for d, n in (("/new/", 0), ("/running/", 0), ("/finished/", 4), ("/jobs/", 0)):
        kvs, _, _ = ctx.e.range(d, eq.prefix_end(d))
        check_eq(len(kvs), n, "keys under %s" % d)
    check_eq(run_counts(log), {jid: 1 for jid in ids}, "runs per job")


def etcd_restart_under_native_load(ctx):
    log = ctx.path("runs.log")
    for i in range(2):
        ctx.native_worker("r%d" % i, "sleep", log=log)
    ids = [ctx.submit("0.05") for _ in range(10)]
    time.sleep(0.3)
    ctx.etcd.restart()
    ids += [ctx.submit("0.05") for _ in range(10)]
    for jid in ids:
        check_eq(ctx.wait_state(jid, timeout=15)["Result"]["Status"], "SUCCESS", jid)
    counts = run_counts(log)
    check_eq(sorted(counts), ids, "every job ran")
    check(max(counts.values()) == 1, "no job ran twice: %r" % counts)


def kill9_native_worker_under_load(ctx):
    log = ctx.path("runs.log")
    victim = ctx.native_worker("victim", "sleep", log=log, harvest=False)
    ids = [ctx.submit("0.3") for _ in range(6)]
    h.wait_for(lambda: os.path.exists(log) and "run " in open(log).read(), 10, "a job taken")
    victim.kill()
    ctx.native_worker("rescuer", "sleep", log=log)
    for jid in ids:
        doc = ctx.wait_state(jid, timeout=20)
        check_eq(doc["Owner"], "rescuer", "finished by the survivor")
    check_eq(ctx.workers()["victim"]["Status"], "DEAD", "victim harvested")


def tls_client_certificates(ctx):
    # etcd over https with client certificates required: the native side's
    # connection options work (what the bridge's tests reuse).
    check(ctx.etcd.url.startswith("https://"), ctx.etcd.url)
    bare = eq.Etcd(ctx.etcd.url, ca=ctx.etcd.ca)
    try:
        bare.get("/seq/jobs")
        raise h.TestFailure("a request without a client certificate was served")
    except eq.EtcdError:
        pass
    native_worker_with_auth(ctx)


def password(ctx):
    # etcd with auth on (user root): refused without the password.
    bare = eq.Etcd(ctx.etcd.url)
    try:
        bare.get("/seq/jobs")
        raise h.TestFailure("a request without the password was served")
    except eq.EtcdError as e:
        check("user name is empty" in str(e), "refused: %s" % e)
    native_worker_with_auth(ctx)


def native_worker_with_auth(ctx):
    ids = [ctx.submit("t%d" % i) for i in range(3)]
    ctx.native_worker("secure", "echo")
    for jid in ids:
        ctx.wait_state(jid)


TESTS = [native_jobs_run_once_each, failure_and_steps, stale_worker_harvested_and_fenced,
         finished_job_left_alone, etcd_restart_under_native_load,
         kill9_native_worker_under_load]
SPECIAL = {split_layout_moves_between_dirs: {"layout": "split"},
           tls_client_certificates: {"tls": True},
           password: {"password": "etcd-secret"}}


def wrap(fn, **kw):
    """fn(ctx) with etcd alone (no Gearshift node)."""
    return h.with_ctx(fn, ctx_class=Ctx, nodes=0, harvest_after=1, **kw)


def main():
    tests = [(f.__name__, wrap(f)) for f in TESTS]
    tests += [(f.__name__, wrap(f, **kw)) for f, kw in SPECIAL.items()]
    if not shutil.which(ETCD):
        print("== etcd harness: missing prerequisite: %s (etcd-server)" % ETCD)
        print(h.summary(0, 1, len(tests)))
        return 1
    os.environ["SERVER_CMD"] = "(none: etcd and etcdqueue.py alone)"
    return h.run_suite("etcd harness (etcd + the seed's queue in etcdqueue.py)", tests)


if __name__ == "__main__":
    sys.exit(main())
