#!/usr/bin/env python3
"""etcd bridge suite: `gearshift serve --etcd http://...` against a real etcd
(Debian's etcd-server, on free ports of 127.0.0.1, started here), the seed's
submitter, worker and harvester of etcdqueue.py (written from seed 004), and
unmodified Gearman workers (PHP, Perl, the gearman CLI).

Each test gets a fresh etcd (its own temp data dir) and fresh Gearshift
nodes (harvest after 3 s, so heartbeats every second).

Env: GEARSHIFT (the binary, built with `--features gearshift/etcd`; default
target/debug/gearshift), ETCD (default etcd). Command line: substrings of
test names to run. Ends with `N passed, N failed, N skipped`.
"""

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

from etcd_harness import ETCD, GEARSHIFT, PERL, PHP, run_counts, wrap  # noqa: E402
import etcdqueue as eq  # noqa: E402
import test_etcd_cluster  # noqa: E402
import test_etcd_registry  # noqa: E402
import harness as h  # noqa: E402  (tests/interop, on the path etcd_harness set)
from harness import check, check_eq  # noqa: E402


def states(doc):
    return [s["State"] for s in doc["States"]]


def finished_once(ctx, ids, status="SUCCESS", timeout=30):
    """Every job FINISHED with `status`, with one FINISHED state each."""
    docs = {}
    for jid in ids:
        doc = ctx.wait_state(jid, timeout=timeout)
        check_eq(doc["Result"]["Status"], status, "job %s's Result" % jid)
        check_eq(states(doc).count("FINISHED"), 1, "FINISHED states of %s: %r"
                 % (jid, states(doc)))
        docs[jid] = doc
    return docs


def record_worker(ctx, func, log, port=None, sleep="0"):
    """A gearman CLI worker appending each workload (one JSON line) to log."""
    return ctx.cli_worker(func, 'w=$(cat); sleep %s; printf "%%s\\n" "$w" >> %s; echo ok'
                          % (sleep, log), port=port, name="rec-%s-%s" % (func, port or ""))


# --------------------------------------------------------------------------
# etcd jobs on Gearman workers


def php_and_perl_workers_run_etcd_jobs(ctx):
    ctx.php_worker("upper", "etcd-job")
    ctx.perl_worker("rev", "perl_rev")
    h.wait_workers(ctx.port, "etcd-job")
    h.wait_workers(ctx.port, "perl_rev")
    a = ctx.submit("via-default")
    b = ctx.submit("via-field", function="perl_rev")
    docs = finished_once(ctx, [a, b])
    for jid, cfg in ((a, "via-default"), (b, "via-field")):
        doc = docs[jid]
        check_eq(states(doc), ["QUEUED", "STARTED", "FINISHED"], "states of %s" % jid)
        check(doc.get("Owner"), "Owner set on the claim: %r" % doc.get("Owner"))
        check(all(eq.parse_time(s["Date"]) for s in doc["States"]),
              "RFC 3339 Dates: %r" % doc["States"])
    # The workload is the job's document: upper-cased by PHP, reversed by Perl.
    up = json.loads(docs[a]["Result"]["Info"])
    check_eq(up["CONTAINER"]["CONFIG"], "VIA-DEFAULT", "PHP's output in Info")
    rev = json.loads(docs[b]["Result"]["Info"][::-1])
    check_eq((rev["Container"]["Config"], rev["Function"]), ("via-field", "perl_rev"),
             "Perl's output in Info")


def work_status_updates_step(ctx):
    gate, log = ctx.path("gate"), ctx.path("php.log")
    ctx.php_worker("gated", "etcd-job", log=log, gate=gate)
    h.wait_workers(ctx.port, "etcd-job")
    jid = ctx.submit("g")
    h.wait_for(lambda: "1/2" in (ctx.q.job(jid)[1]["States"][-1].get("Step") or ""), 10,
               "WORK_STATUS 1/2 in the STARTED state's Step")
    doc = ctx.q.job(jid)[1]
    check_eq(states(doc), ["QUEUED", "STARTED"], "running")
    # An ordinary Gearshift job, marked as etcd's in the JSON API.
    # worker.php's gated mode logs its handle just after WORK_STATUS.
    handle = h.wait_for(lambda: os.path.exists(log) and (open(log).read().split() or [None])[-1],
                        10, "the PHP worker's log of its handle")
    with ctx.nodes[0].http("/api/v1/jobs/%s" % handle) as resp:
        check_eq(json.loads(resp.read()).get("unique"), "etcd:/" + jid, "the API's unique")
    open(gate, "w").close()
    doc = finished_once(ctx, [jid])[jid]
    check_eq(doc["Result"]["Info"][:6], "gated:", "Info")


def failures_finish_with_failure(ctx):
    ctx.php_worker("fail", "f_fail")
    ctx.php_worker("exception", "f_exc")
    h.wait_workers(ctx.port, "f_fail")
    h.wait_workers(ctx.port, "f_exc")
    a = ctx.submit("x", function="f_fail")
    b = ctx.submit("y", function="f_exc")
    docs = finished_once(ctx, [a, b], status="FAILURE")
    check("boom:" in docs[b]["Result"]["Info"], "the exception text in Info: %r"
          % docs[b]["Result"])


RETRY_CONFIG = """\
[[function]]
match = "flaky_fn"
max_attempts = 3
retry_on = ["fail"]
backoff = "fixed"
initial_delay = "200ms"
max_delay = "200ms"
jitter = false
"""


def retry_policy_writes_a_state_per_attempt(ctx):
    # WORK_FAIL twice, then success: QUEUED with the retry time in Step
    # after each failed attempt, STARTED again when due, one FINISHED.
    ctx.php_worker("flaky", "flaky_fn", log=ctx.path("flaky.log"), gate="2")
    h.wait_workers(ctx.port, "flaky_fn")
    jid = ctx.submit("r", function="flaky_fn")
    doc = finished_once(ctx, [jid])[jid]
    check_eq(states(doc), ["QUEUED", "STARTED", "QUEUED", "STARTED", "QUEUED", "STARTED",
                           "FINISHED"], "a state per attempt")
    for s in (doc["States"][2], doc["States"][4]):
        check("retry" in s["Step"] and eq.parse_time(s["Step"].split()[-1]),
              "the retry time in Step: %r" % s)
    check(doc["Result"]["Info"].endswith(":3"), "the third run's output: %r" % doc["Result"])


def jobs_wait_for_a_gearman_worker(ctx):
    # No worker for the function: nothing is claimed; one connects: it runs.
    jid = ctx.submit("later", function="late_fn")
    time.sleep(1.5)
    check_eq(states(ctx.q.job(jid)[1]), ["QUEUED"], "unclaimed without a worker")
    ctx.php_worker("rev", "late_fn")
    finished_once(ctx, [jid])


# --------------------------------------------------------------------------
# The registry


def gearman_workers_in_registry(ctx):
    gate = ctx.path("gate")
    w = ctx.php_worker("gated", "reg_fn", gate=gate)
    h.wait_workers(ctx.port, "reg_fn")

    def entry():
        for key, doc in ctx.workers().items():
            if doc and doc.get("Name") == "php-gated":
                return key, doc
        return None
    key, doc = h.wait_for(entry, 10, "an entry named php-gated under workers/")
    check(key.startswith("gearshift-node0-"), "key is gearshift-<node>-<conn>: %r" % key)
    check_eq((doc["InstanceId"], doc["Status"]), (key, "ALIVE"), "entry")
    check(doc.get("PrivateIp", "").startswith("127.0.0.1"), "PrivateIp %r" % doc.get("PrivateIp"))
    beat = doc["Heartbeat"]
    check(eq.parse_time(beat) is not None, "Heartbeat is RFC 3339: %r" % beat)
    h.wait_for(lambda: ctx.workers()[key]["Heartbeat"] != beat, 5, "the Heartbeat moves")
    jid = ctx.submit("r", function="reg_fn")
    h.wait_for(lambda: str(ctx.workers()[key].get("Job")).lstrip("0") == jid.lstrip("0"), 10,
               "Job names the etcd job while it runs")
    # Claimed as the bridge (gearshift-<node>), then owned by the entry of
    # the connection that runs it; the bridge keeps an entry of its own.
    h.wait_for(lambda: ctx.q.job(jid)[1].get("Owner") == key, 5,
               "the job's Owner becomes %s" % key)
    check_eq(ctx.workers()["gearshift-node0"]["Status"], "ALIVE", "the bridge's entry")
    open(gate, "w").close()
    finished_once(ctx, [jid])
    w.stop()
    h.wait_for(lambda: ctx.workers()[key]["Status"] == "DEAD", 10, "DEAD on disconnect")


def stale_native_worker_harvested_and_run_by_gearshift(ctx):
    log = ctx.path("native.log")
    native = ctx.native_worker("sleepy", "sleep", log=log, harvest=False)
    jid = ctx.submit("2", function="rescue_fn")
    h.wait_for(lambda: os.path.exists(log) and "run %s" % jid in open(log).read(), 10,
               "the native worker took the job")
    os.kill(native.pid, signal.SIGSTOP)
    try:
        ctx.php_worker("rev", "rescue_fn")
        doc = finished_once(ctx, [jid], timeout=20)[jid]
        check_eq(states(doc), ["QUEUED", "STARTED", "QUEUED", "STARTED", "FINISHED"], "states")
        check("sleepy" in doc["States"][2]["Step"], "why in Step: %r" % doc["States"][2])
        check(doc["Owner"] != "sleepy", "Owner after the harvest: %r" % doc["Owner"])
        check_eq(ctx.workers()["sleepy"]["Status"], "DEAD", "the stale worker's entry")
    finally:
        os.kill(native.pid, signal.SIGCONT)
    # Woken, the old owner cannot complete the job taken away from it.
    h.wait_for(lambda: "fenced %s" % jid in open(log).read(), 10, "the native write fenced")
    doc = ctx.wait_state(jid)
    check_eq(states(doc).count("FINISHED"), 1, "finished once")
    check(doc["Result"]["Info"] != "2", "the result is Gearshift's: %r" % doc["Result"])


# --------------------------------------------------------------------------
# Several claimers, kills, restarts


def two_nodes_and_a_native_worker_share_the_queue(ctx):
    node1 = ctx.start_node()
    glog, nlog = ctx.path("gearman.log"), ctx.path("native.log")
    record_worker(ctx, "etcd-job", glog, sleep="0.05")
    record_worker(ctx, "etcd-job", glog, port=node1.port, sleep="0.05")
    ctx.native_worker("native", "sleep", log=nlog)
    h.wait_workers(ctx.port, "etcd-job")
    h.wait_workers(node1.port, "etcd-job")
    ids = [ctx.submit("0.05") for _ in range(30)]
    docs = finished_once(ctx, ids)
    by_id = run_counts(nlog)
    # The Gearman workers log the documents; their key is Config, the same
    # for all: count the ids through the documents' runs instead.
    gruns = 0
    with open(glog) as f:
        gruns = sum(1 for line in f if line.startswith("{"))
    check_eq(gruns + sum(by_id.values()), len(ids), "runs in all (%d Gearman, %r native)"
             % (gruns, by_id))
    check(all(n == 1 for n in by_id.values()), "native runs once each: %r" % by_id)
    owners = {d["Owner"] for d in docs.values()}
    check(any(o.startswith("gearshift-node0") for o in owners)
          and any(o.startswith("gearshift-node1") for o in owners),
          "both nodes claimed: %r" % owners)


def kill9_gearshift_node_under_load(ctx):
    node1 = ctx.start_node()
    glog = ctx.path("gearman.log")
    victims = [record_worker(ctx, "etcd-job", glog, sleep="0.4") for _ in range(2)]
    record_worker(ctx, "etcd-job", glog, port=node1.port, sleep="0.1")
    h.wait_workers(ctx.port, "etcd-job", 2)
    h.wait_workers(node1.port, "etcd-job")
    ids = [ctx.submit("k%d" % i) for i in range(12)]

    def node0_holds():
        return [j for j in ids if eq.last_state(ctx.q.job(j)[1]) == "STARTED"
                and ctx.q.job(j)[1].get("Owner", "").startswith("gearshift-node0")]
    held = h.wait_for(node0_holds, 10, "node0 running jobs")
    ctx.nodes[0].kill()
    for v in victims:
        v.kill()
    docs = finished_once(ctx, ids, timeout=30)
    for j in held:
        check(docs[j]["Owner"].startswith("gearshift-node1"),
              "%s finished on node1: %r" % (j, docs[j]["Owner"]))
        check("QUEUED" in states(docs[j])[2:], "%s harvested: %r" % (j, states(docs[j])))
    runs = run_counts(glog)
    check_eq(sorted(runs), sorted("k%d" % i for i in range(12)), "every job ran")


def native_harvester_rescues_a_killed_gearshift(ctx):
    # No other Gearshift: a native worker's harvester takes the dead node's
    # connection entries, whose Job names the jobs they ran, and runs them.
    glog, nlog = ctx.path("gearman.log"), ctx.path("native.log")
    victims = [record_worker(ctx, "etcd-job", glog, sleep="5") for _ in range(2)]
    h.wait_workers(ctx.port, "etcd-job", 2)
    ids = [ctx.submit("n%d" % i) for i in range(4)]

    def handed_over():
        docs = [ctx.q.job(j)[1] for j in ids[:2]]
        return all(d.get("Owner", "").startswith("gearshift-node0-") for d in docs)
    h.wait_for(handed_over, 10, "the first two jobs owned by node0's connections")
    ctx.nodes[0].kill()
    for v in victims:
        v.kill()
    ctx.native_worker("rescuer", "echo", log=nlog)
    docs = finished_once(ctx, ids, timeout=20)
    for j in ids:
        check_eq(docs[j]["Owner"], "rescuer", "%s finished by the native worker" % j)
    for j in ids[:2]:
        check("QUEUED" in states(docs[j])[2:], "%s harvested: %r" % (j, states(docs[j])))
    dead = {k: d["Status"] for k, d in ctx.workers().items() if k.startswith("gearshift-node0-")}
    check(dead and set(dead.values()) == {"DEAD"}, "connection entries DEAD: %r" % dead)


def graceful_stop_finishes_running_jobs(ctx):
    # SIGTERM: nothing more is claimed; the running job finishes on its
    # worker and is written back; the node's entries end DEAD; a job queued
    # meanwhile is left for another node.
    gate, log = ctx.path("gate"), ctx.path("php.log")
    ctx.php_worker("gated", "etcd-job", log=log, gate=gate)
    ctx.php_worker("gated", "etcd-job", log=log, gate=gate)  # free while stopping
    h.wait_workers(ctx.port, "etcd-job", 2)
    first = ctx.submit("t")
    h.wait_for(lambda: os.path.exists(log), 10, "the gated PHP worker runs a job")
    proc = ctx.nodes[0].server.proc
    proc.send_signal(signal.SIGTERM)
    time.sleep(0.3)
    later = ctx.submit("u")
    time.sleep(0.5)
    check_eq(states(ctx.q.job(later)[1]), ["QUEUED"], "not claimed while stopping")
    open(gate, "w").close()
    check_eq(proc.wait(timeout=10), 0, "exit status after the drain")
    doc = finished_once(ctx, [first], timeout=2)[first]
    check_eq(states(doc), ["QUEUED", "STARTED", "FINISHED"], "written back once")
    check(doc["Result"]["Info"].startswith("gated:"), "the PHP output: %r" % doc["Result"])
    ws = {k: d["Status"] for k, d in ctx.workers().items()}
    check(ws and set(ws.values()) == {"DEAD"}, "node0's entries DEAD: %r" % ws)
    node1 = ctx.start_node()
    ctx.php_worker("rev", "etcd-job", port=node1.port)
    doc = finished_once(ctx, [later])[later]
    check(doc["Owner"].startswith("gearshift-node1"), "run by node1: %r" % doc["Owner"])


def sigterm_just_after_a_claim(ctx):
    # SIGTERM as soon as a job is STARTED (claimed, perhaps not yet handed to
    # Gearshift or its worker): the node still exits, and the job ends
    # FINISHED or back to QUEUED, never STARTED under a DEAD owner. Three
    # rounds, as the window is narrow.
    for r in range(3):
        node = ctx.nodes[0] if r == 0 else ctx.start_node()
        func = "term_%d" % r
        ctx.php_worker("rev", func, port=node.port)
        h.wait_workers(node.port, func)
        jid = ctx.submit("r%d" % r, function=func)
        deadline = time.monotonic() + 10
        while eq.last_state(ctx.q.job(jid)[1]) != "STARTED" and time.monotonic() < deadline:
            time.sleep(0.001)
        node.server.proc.send_signal(signal.SIGTERM)
        try:
            node.server.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            log = node.server.log_text()
            at = log.find("panicked")
            raise h.TestFailure("round %d: no exit 10 s after SIGTERM; log %r"
                                % (r, log[at - 300:at + 200] if at >= 0 else log[-1500:]))
        doc = ctx.q.job(jid)[1]
        check(eq.last_state(doc) in ("FINISHED", "QUEUED"), "round %d: job left %r (Owner %r)"
              % (r, states(doc), doc.get("Owner")))


def kill9_native_worker_under_load(ctx):
    nlog, glog = ctx.path("native.log"), ctx.path("gearman.log")
    victim = ctx.native_worker("victim", "sleep", log=nlog, harvest=False)
    ids = [ctx.submit("0.5") for _ in range(3)]
    h.wait_for(lambda: os.path.exists(nlog) and "run " in open(nlog).read(), 10, "victim runs")
    victim.kill()
    taken = open(nlog).read().split()[1]
    record_worker(ctx, "etcd-job", glog)
    docs = finished_once(ctx, ids, timeout=20)
    check(docs[taken]["Owner"] != "victim", "the victim's job finished by Gearshift")
    check("QUEUED" in states(docs[taken])[2:], "harvested: %r" % states(docs[taken]))
    check_eq(ctx.workers()["victim"]["Status"], "DEAD", "victim's entry")


def etcd_restarted_under_load(ctx):
    glog = ctx.path("gearman.log")
    record_worker(ctx, "etcd-job", glog, sleep="0.1")
    record_worker(ctx, "etcd-job", glog, sleep="0.1")
    h.wait_workers(ctx.port, "etcd-job", 2)
    ids = [ctx.submit("a%d" % i) for i in range(12)]
    h.wait_for(lambda: os.path.exists(glog), 10, "jobs running")
    ctx.etcd.stop()
    check(len(run_counts(glog)) < 12, "jobs still in flight when etcd went")
    # Gearman alone keeps working while etcd is gone.
    ctx.php_worker("rev", "plain")
    h.wait_workers(ctx.port, "plain")
    time.sleep(2)
    ctx.etcd.start()
    ids += [ctx.submit("b%d" % i) for i in range(8)]
    finished_once(ctx, ids, timeout=20)
    runs = run_counts(glog)
    check_eq(len(runs), 20, "every job ran: %r" % runs)


def etcd_gone_longer_than_harvest_after(ctx):
    # etcd away for twice the harvest timeout while a job runs: when it is
    # back, no one (this node included) takes the job from its live worker;
    # it finishes once, having run once.
    gate, log = ctx.path("gate"), ctx.path("php.log")
    ctx.php_worker("gated", "etcd-job", log=log, gate=gate)
    h.wait_workers(ctx.port, "etcd-job")
    jid = ctx.submit("long")
    h.wait_for(lambda: os.path.exists(log), 10, "the PHP worker runs the job")
    ctx.etcd.stop()
    time.sleep(2 * ctx.harvest_after)
    ctx.etcd.start()
    time.sleep(ctx.harvest_after)
    doc = ctx.q.job(jid)[1]
    check_eq(states(doc), ["QUEUED", "STARTED"], "still running, not taken back")
    open(gate, "w").close()
    doc = finished_once(ctx, [jid])[jid]
    with open(log) as f:
        check_eq(len(f.read().split("\n")) - 1, 1, "runs of the job")
    check_eq({d["Status"] for k, d in ctx.workers().items()}, {"ALIVE"}, "entries ALIVE")


# --------------------------------------------------------------------------
# Bad input, layouts, configuration


def bad_documents_logged_counted_and_skipped(ctx):
    p = ctx.prefix + "jobs/"
    ctx.e.put(p + eq.job_id(1), "not json {")
    ctx.e.put(p + eq.job_id(2), eq.dump({"States": [{"State": "PAUSED", "Step": "",
                                                     "Date": eq.now()}]}))
    ctx.e.put(p + eq.job_id(3), eq.dump({"Container": {"Config": "no states"}}))
    big = {"Container": {"Config": "x" * (1200 * 1024)},
           "States": [{"State": "QUEUED", "Step": "", "Date": eq.now()}]}
    ctx.e.put(p + eq.job_id(4), eq.dump(big))
    ctx.e.put(ctx.prefix + "seq/jobs", "4")
    good = ctx.submit("good")
    ctx.php_worker("rev", "etcd-job")
    finished_once(ctx, [good])
    check_eq(ctx.e.get(p + eq.job_id(1)).raw, b"not json {", "malformed document untouched")
    check_eq(states(ctx.q.job(2)[1]), ["PAUSED"], "unknown state untouched")
    check_eq(ctx.q.job(3)[1], {"Container": {"Config": "no states"}}, "no States: untouched")
    check_eq(states(ctx.q.job(4)[1]), ["QUEUED"], "the huge job left alone")
    counters = ctx.nodes[0].etcd_counters()
    log = ctx.nodes[0].server.log_text()
    for jid in ("1", "2", "3", "4"):
        check(eq.job_id(jid) in log, "a log line names job %s" % eq.job_id(jid))
    want = {"bad_json": 1, "unknown_state": 2, "too_big": 1, "finished": 1}
    check_eq({k: counters.get(k) for k in want}, want, "gearshift_etcd_total counters")
    # The rest keeps working.
    again = ctx.submit("again")
    finished_once(ctx, [again])


def split_layout_moves_jobs(ctx):
    ctx.php_worker("upper", "etcd-job")
    h.wait_workers(ctx.port, "etcd-job")
    ids = [ctx.submit("s%d" % i) for i in range(3)]
    finished_once(ctx, ids)
    for d, n in (("new/", 0), ("running/", 0), ("finished/", 3), ("jobs/", 0)):
        kvs, _, _ = ctx.e.range(ctx.prefix + d, eq.prefix_end(ctx.prefix + d))
        check_eq(len(kvs), n, "keys under %s%s" % (ctx.prefix, d))


CONFIG = """\
[etcd]
endpoints = ["{url}"]
prefix = "/cfg/"
default_function = "cfg-job"
function_field = "Fn"
harvest_after = 3
"""


def config_file_prefix_and_fields(ctx):
    # No --etcd flags: the [etcd] table gives the endpoint, the prefix, the
    # field the function comes from and the default function.
    ctx.php_worker("rev", "cfg-job")
    ctx.php_worker("upper", "by_fn")
    h.wait_workers(ctx.port, "cfg-job")
    h.wait_workers(ctx.port, "by_fn")
    a = ctx.submit("d")
    b = ctx.submit("f", extra={"Fn": "by_fn", "Function": "ignored"})
    docs = finished_once(ctx, [a, b])
    check(docs[a]["Result"]["Info"].startswith("}"), "cfg-job reversed: %r"
          % docs[a]["Result"]["Info"][:20])
    check(docs[b]["Result"]["Info"].startswith("{"), "by_fn upper-cased")
    outside = eq.Queue(ctx.e, "/", "single").submit("other prefix")
    time.sleep(1.0)
    check_eq(states(eq.Queue(ctx.e, "/").job(outside)[1]), ["QUEUED"],
             "a job outside the prefix untouched")


def secured_etcd(ctx):
    """https with client certificates (--etcd-ca/-cert/-key), or a user with
    the password from GEARSHIFT_ETCD_PASSWORD: jobs run, the registry is
    written, the password stays out of the log."""
    ctx.php_worker("rev", "etcd-job")
    h.wait_workers(ctx.port, "etcd-job")
    jid = ctx.submit("secure")
    finished_once(ctx, [jid])
    h.wait_for(lambda: any(d and d.get("Name") == "php-rev" for d in ctx.workers().values()),
               10, "the PHP worker's entry")
    if ctx.etcd.password:
        check(ctx.etcd.password not in ctx.nodes[0].server.log_text(), "password not logged")


TESTS = [
    php_and_perl_workers_run_etcd_jobs,
    work_status_updates_step,
    failures_finish_with_failure,
    jobs_wait_for_a_gearman_worker,
    gearman_workers_in_registry,
    stale_native_worker_harvested_and_run_by_gearshift,
    two_nodes_and_a_native_worker_share_the_queue,
    kill9_gearshift_node_under_load,
    native_harvester_rescues_a_killed_gearshift,
    graceful_stop_finishes_running_jobs,
    sigterm_just_after_a_claim,
    kill9_native_worker_under_load,
    etcd_restarted_under_load,
    etcd_gone_longer_than_harvest_after,
    bad_documents_logged_counted_and_skipped,
]

SPECIAL = {
    split_layout_moves_jobs: {"layout": "split", "prefix": "/split/"},
    retry_policy_writes_a_state_per_attempt: {"config": RETRY_CONFIG},
    config_file_prefix_and_fields: {"config": CONFIG, "prefix": "/cfg/"},
}
SECURED = {"etcd_tls_client_certificates": {"tls": True},
           "etcd_user_password_from_env": {"password": "etcd-secret-pw"}}


def main():
    missing = [t for t in (ETCD, "gearman") if not shutil.which(t)]
    missing += h.missing_clients(PHP, PERL)
    if not os.path.exists(GEARSHIFT):
        missing.append(GEARSHIFT)
    tests = [(f.__name__, wrap(f)) for f in TESTS]
    tests += [(f.__name__, wrap(f, **kw)) for f, kw in SPECIAL.items()]
    tests += [(name, wrap(secured_etcd, **kw)) for name, kw in SECURED.items()]
    tests += test_etcd_registry.tests() + test_etcd_cluster.tests(minute=False)
    if missing:
        # scripts/test.sh installs them: their absence is a failure, not a skip.
        print("== etcd: missing prerequisites: %s" % ", ".join(missing))
        print(h.summary(0, 1, len(tests)))
        return 1
    os.environ["SERVER_CMD"] = "%s serve ... --etcd http://127.0.0.1:<own port>" % GEARSHIFT
    wanted = [a for a in sys.argv[1:] if not a.startswith("-")]
    minute = test_etcd_cluster.MINUTE[0].__name__
    if not wanted or any(w in minute for w in wanted):
        tests.append((minute, minute_apart(minute)))
    return h.run_suite("etcd bridge (etcd + gearshift serve --etcd)", tests)


def minute_apart(name):
    """Starts test_etcd_cluster.py's minute-long test now, in a process of
    its own (it mostly waits), and returns the test that collects it."""
    log = open(os.path.join(tempfile.gettempdir(), "gearshift-etcd-%s-%d.log"
                            % (name, os.getpid())), "w+")
    proc = subprocess.Popen([sys.executable, os.path.join(HERE, "test_etcd_cluster.py"), name],
                            stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)

    def collect():
        try:
            proc.wait(timeout=240)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        log.seek(0)
        out = log.read()
        log.close()
        check("\nPASS %s" % name in "\n" + out, "%s (run apart): %s" % (name, out[-3000:]))
    return collect


if __name__ == "__main__":
    sys.exit(main())
