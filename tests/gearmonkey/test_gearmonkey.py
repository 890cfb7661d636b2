#!/usr/bin/env python3
"""GearMonkey bridge suite: `gearshift serve --gearmonkey redis://...` against
a real redis-server (Debian's, on a free port of 127.0.0.1, started here),
the GearMonkey client and worker of gearmonkey.py (written from seed 003),
and unmodified Gearman clients and workers (gearman CLI, PHP, Perl).

Each test gets a fresh Redis (append-only file, fsync always, in its own
temp dir, so a restart keeps what was written) and a fresh Gearshift.

Env: GEARSHIFT (the binary, default target/debug/gearshift), REDIS_SERVER
(default redis-server). Command line: substrings of test names to run.
Ends with `N passed, N failed, N skipped`.
"""

import json
import os
import shutil
import signal
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

from gm_harness import (CLIENTS, GEARSHIFT, PERL, PHP, REDIS_SERVER,  # noqa: E402
                        wait_count, wrap)
from gm_failures import (bad_input_is_logged_counted_and_kept,  # noqa: E402
                         event_stream_wakes_the_bridge,
                         kill9_gearshift_while_bridged_jobs_run, redis_gone_while_jobs_run_both_ways,
                         redis_restart_under_load,
                         roll_call_of_a_crashed_gearshift_is_corrected_by_another)
import harness as h  # noqa: E402  (tests/interop, on the path gm_harness set)
from harness import check, check_eq  # noqa: E402


# --------------------------------------------------------------------------
# GearMonkey clients -> Gearman workers


def gm_client_blocking_to_php_worker(ctx):
    ctx.php_worker("rev", "gm_rev")
    h.wait_workers(ctx.port, "gm_rev")
    wait_count(ctx, "gm_rev", 1)
    jid, job = ctx.gm().run("gm_rev", "hello", blocking=True, timeout=20)
    check(job is not None, "blocking GearMonkey client timed out")
    check_eq(job.get(b"status"), b"success", "status")
    check_eq(job.get(b"output"), b"olleh", "output")
    ttl = ctx.r.ttl("job:gm_rev:%d" % jid)
    check(89000 < ttl <= 90000, "job hash EXPIRE 90000 (ttl %r)" % ttl)
    check_eq(ctx.r.llen("gearshift:processing:gm_rev"), 0, "processing list")
    # The roll call drops when the Gearman worker goes.
    for p in ctx.procs:
        p.stop()
    wait_count(ctx, "gm_rev", 0)


def gm_client_to_perl_and_cli_workers(ctx):
    ctx.perl_worker("upper", "gm_perl")
    ctx.cli_worker("gm_cli", "tr", "a-z", "A-Z")
    h.wait_workers(ctx.port, "gm_perl")
    h.wait_workers(ctx.port, "gm_cli")
    _, job = ctx.gm().run("gm_perl", "perl", blocking=True, timeout=20)
    check_eq(job.get(b"output"), b"PERL", "Perl Gearman::Worker")
    _, job = ctx.gm().run("gm_cli", "cli", blocking=True, timeout=20)
    check_eq(job.get(b"output"), b"CLI", "gearman -w")


def gm_jobs_wait_for_gearman_workers_and_keep_priority(ctx):
    func = "gm_prio"
    for prio in ("low", "normal", "high"):
        for i in range(3):
            ctx.gm().run(func, "%s-%d" % (prio, i), prio=prio)
    time.sleep(0.5)
    # No Gearman worker: nothing is taken into a backlog of Gearshift's.
    check_eq(ctx.r.llen("queue:%s:low" % func), 3, "low queue untouched")
    check_eq(ctx.r.llen("gearshift:processing:%s" % func), 0, "nothing taken")
    ctx.php_worker("record", func)
    for jid in range(1, 10):
        ctx.wait_job(func, jid)
    with open(ctx.path("php-%s.log" % func)) as f:
        order = [line.strip() for line in f if line.strip()]
    check_eq([w.split("-")[0] for w in order], ["high"] * 3 + ["normal"] * 3 + ["low"] * 3,
             "run order %r" % order)


def gm_scheduled_job_runs_when_due(ctx):
    func = "gm_sched"
    ctx.php_worker("rev", func)
    h.wait_workers(ctx.port, func)
    now = int(time.time())
    past = ctx.gm().run(func, "past", prio="scheduled", scheduled=now - 5)
    future = ctx.gm().run(func, "future", prio="scheduled", scheduled=now + 3)
    check_eq(ctx.wait_job(func, past, timeout=5).get(b"output"), b"tsap", "due job")
    check_eq(ctx.r.hget("job:%s:%d" % (func, future), "status"), b"idle", "future job waits")
    job = ctx.wait_job(func, future, timeout=15)
    check(time.time() >= now + 3, "ran before its time")
    check_eq(job.get(b"output"), b"erutuf", "scheduled job")


def idle_taker_waits_for_announcements(ctx):
    # An idle taker does not poll Redis: it waits for GearMonkey's
    # `create:` announcement (or looks every half second), and a job pushed
    # without one is still taken.
    func = "gm_idle"
    ctx.php_worker("rev", func)
    h.wait_workers(ctx.port, func)
    _, job = ctx.gm().run(func, "warm", blocking=True, timeout=20)
    check_eq(job.get(b"output"), b"mraw", "first job")
    time.sleep(1)

    def takes():
        stats = ctx.r.info("commandstats")
        return sum(v.get("calls", 0) for k, v in stats.items() if k in ("cmdstat_evalsha", "cmdstat_eval"))
    before = takes()
    time.sleep(3)
    idle_calls = takes() - before
    # Polling every 20 ms made ~150 calls here; the heartbeat adds a few.
    check(idle_calls <= 30, "Lua calls in 3 idle seconds: %d" % idle_calls)
    started = time.monotonic()
    _, job = ctx.gm().run(func, "fast", blocking=True, timeout=20)
    check_eq(job.get(b"output"), b"tsaf", "announced job")
    check(time.monotonic() - started < 0.4, "an announced job waits for no safety look")
    # Pushed without PUBLISH: found by the half-second look.
    jid = ctx.r.incr("uid:%s" % func)
    ctx.r.hset("job:%s:%d" % (func, jid), mapping={"status": "idle", "input": "quiet"})
    ctx.r.lpush("queue:%s:normal" % func, jid)
    check_eq(ctx.wait_job(func, jid, timeout=5).get(b"output"), b"teiuq", "unannounced job")


def gm_client_sees_gearman_progress(ctx):
    func = "gm_chatty"
    ctx.php_worker("chatty", func)
    h.wait_workers(ctx.port, func)
    jid = ctx.gm().run(func, "x")
    job = ctx.wait_job(func, jid)
    check_eq(job.get(b"output"), b"done:x", "output")
    check_eq((job.get(b"status:dividend"), job.get(b"status:divisor")), (b"2", b"3"),
             "last WORK_STATUS as dividend/divisor")


def gm_client_errors_from_gearman_worker(ctx):
    ctx.php_worker("exception", "gm_exc")
    ctx.php_worker("fail", "gm_fail")
    h.wait_workers(ctx.port, "gm_exc")
    h.wait_workers(ctx.port, "gm_fail")
    _, job = ctx.gm().run("gm_exc", "x", blocking=True, timeout=20)
    check_eq((job.get(b"status"), job.get(b"output")), (b"error", b"boom:x"), "exception")
    _, job = ctx.gm().run("gm_fail", "y", blocking=True, timeout=20)
    check_eq(job.get(b"status"), b"error", "WORK_FAIL")


RETRY_CONFIG = """\
[[function]]
match = "gm_flaky"
max_attempts = 3
retry_on = ["fail"]
backoff = "fixed"
initial_delay = "100ms"
max_delay = "100ms"
jitter = false

[[function]]
match = "gm_hangs"
max_attempts = 1
timeout = "1s"

[[function]]
match = "gm_dies"
max_attempts = 2
retry_on = ["fail", "exception"]
backoff = "fixed"
initial_delay = "100ms"
max_delay = "100ms"
jitter = false

[[function]]
match = "gm_outretry"
max_attempts = 2
retry_on = ["exception"]
backoff = "fixed"
initial_delay = "100ms"
max_delay = "100ms"
jitter = false
"""


def gm_job_gets_gearshift_retries(ctx):
    # flaky: WORK_FAIL on the first 2 runs of a workload, then success.
    ctx.php_worker("flaky", "gm_flaky", gate="2")
    ctx.php_worker("flakyexc", "gm_dies", gate="5")
    h.wait_workers(ctx.port, "gm_flaky")
    h.wait_workers(ctx.port, "gm_dies")
    _, job = ctx.gm().run("gm_flaky", "w", blocking=True, timeout=20)
    check_eq((job.get(b"status"), job.get(b"output")), (b"success", b"ok:w:3"),
             "retried twice by Gearshift's policy")
    check_eq(h.admin(ctx.port, "show dead"), ".\n", "a job that succeeded is not dead")
    jid, job = ctx.gm().run("gm_dies", "d", blocking=True, timeout=20)
    check_eq((job.get(b"status"), job.get(b"output")), (b"error", b"boom:d:2"),
             "failed for good after 2 attempts, the last error as output")
    with open(ctx.path("php-gm_dies.log")) as f:
        runs = [line for line in f if line.startswith("d ")]
    check_eq(len(runs), 2, "runs of the job (max_attempts 2): %r" % runs)
    # In Gearshift's dead set, marked as GearMonkey's by its unique.
    dead = [line.split("\t") for line in h.admin(ctx.port, "show dead").splitlines()[:-1]]
    check_eq([(d[1], d[2], d[4]) for d in dead], [("gm_dies", "2", "boom:d:2")],
             "show dead: function, attempts, error")
    with ctx.http("/api/v1/dead") as resp:
        body = json.loads(resp.read().decode())
    uniques = [j.get("unique") for j in body["dead"]]
    check_eq(uniques, ["gearmonkey:gm_dies:%d" % jid], "the dead job's unique: %r" % body)
    check_eq(ctx.r.llen("gearshift:processing:gm_dies"), 0, "processing list empty")
    check_eq(h.admin(ctx.port, "show jobs"), ".\n", "no live job left in Gearshift")


def gearman_job_retried_on_gm_worker_is_a_new_gm_job(ctx):
    # A Gearman job a GearMonkey worker failed, retried by Gearshift's
    # policy: each attempt is a GearMonkey job of its own (the retry does not
    # read the first attempt's error back).
    func = "gm_outretry"
    log = ctx.path("gm-outretry.log")
    ctx.gm_worker(func, "fail", log=log)
    wait_count(ctx, func, 1)
    check_eq(ctx.php_client("exccb", func, "r").splitlines(), ["EXCEPTION:boom:r"],
             "the last attempt's error")
    check_eq(ctx.r.get("uid:%s" % func), b"2", "two GearMonkey jobs, one per attempt")
    with open(log) as f:
        check_eq(len([line for line in f if line.split()[1:2] == ["r"]]), 2,
                 "the GearMonkey worker ran both")


def gm_job_gets_gearshift_run_timeout(ctx):
    # The policy's run timeout ends a bridged job that hangs: status error,
    # and (one attempt only) Gearshift's dead set.
    ctx.php_worker("hang", "gm_hangs")
    h.wait_workers(ctx.port, "gm_hangs")
    started = time.monotonic()
    jid, job = ctx.gm().run("gm_hangs", "z", blocking=True, timeout=20)
    check(time.monotonic() - started < 10, "ended by the 1 s timeout, not the worker")
    check_eq(job.get(b"status"), b"error", "status: %r" % job)
    check(b"timeout" in job.get(b"output", b""), "the timeout as output: %r" % job)
    dead = h.admin(ctx.port, "show dead").splitlines()[:-1]
    check_eq([d.split("\t")[1] for d in dead], ["gm_hangs"], "in the dead set: %r" % dead)


def only_matching_functions_are_bridged(ctx):
    # --gearmonkey-match "img_*": other functions' queues and roll call stay GearMonkey's.
    ctx.php_worker("rev", "img_a")
    ctx.php_worker("rev", "txt_a")
    h.wait_workers(ctx.port, "img_a")
    h.wait_workers(ctx.port, "txt_a")
    wait_count(ctx, "img_a", 1)
    _, job = ctx.gm().run("img_a", "abc", blocking=True, rollcall=True, timeout=20)
    check_eq(job.get(b"output"), b"cba", "matched function bridged")
    ctx.gm().run("txt_a", "abc")
    time.sleep(0.6)
    check_eq(ctx.r.lrange("queue:txt_a:normal", 0, -1), [b"1"], "unmatched queue untouched")
    check_eq(ctx.r.get("count:txt_a"), None, "unmatched roll call untouched")


def bridged_job_is_marked_in_gearshift(ctx):
    # A running bridged job: its unique names it GearMonkey's, in `show unique
    # jobs` and `show job`, and its WORK_STATUS is already in the hash.
    func = "gm_gate"
    gate = ctx.path("gate")
    ctx.php_worker("gated", func, gate=gate)
    h.wait_workers(ctx.port, func)
    jid = ctx.gm().run(func, "g")
    unique = "gearmonkey:%s:%d" % (func, jid)
    h.wait_for(lambda: unique in h.admin(ctx.port, "show unique jobs"), 10,
               "%s in show unique jobs" % unique)
    h.wait_for(lambda: ctx.r.hget("job:%s:%d" % (func, jid), "status:divisor") == b"2", 10,
               "WORK_STATUS 1/2 in the hash while running")
    check_eq(ctx.r.hget("job:%s:%d" % (func, jid), "status"), b"busy", "status while running")
    handle = gated_handle(ctx, func)
    detail = h.admin(ctx.port, "show job %s" % handle)
    check("unique: %s" % unique in detail, "show job names the GearMonkey job: %r" % detail)
    open(gate, "w").close()
    check_eq(ctx.wait_job(func, jid).get(b"output"), b"gated:g", "finished")


def gated_handle(ctx, func):
    """The handle a "gated" PHP worker logs once it has sent its status (so
    it may not be in the log yet when the status is seen)."""
    path = ctx.path("php-%s.log" % func)

    def logged():
        if not os.path.exists(path):
            return None
        with open(path) as f:
            words = f.read().split()
        return words[-1] if words else None
    return h.wait_for(logged, 10, "the PHP worker's log of its handle")


def bridged_job_in_events_and_api(ctx):
    # The live event stream carries a bridged job's life, and the JSON API
    # shows it under its gearmonkey:F:ID unique.
    func = "gm_ev"
    gate = ctx.path("gate")
    ctx.php_worker("gated", func, gate=gate)
    h.wait_workers(ctx.port, func)
    stream = ctx.http("/api/v1/events?function=%s" % func)
    jid = ctx.gm().run(func, "e")
    kinds = []
    deadline = time.monotonic() + 15
    while "progress" not in kinds and time.monotonic() < deadline:
        line = stream.readline().decode()
        if line.startswith("event: "):
            kinds.append(line[7:].strip())
    handle = gated_handle(ctx, func)
    with ctx.http("/api/v1/jobs/%s" % handle) as resp:
        job = json.loads(resp.read())
    check_eq(job.get("unique"), "gearmonkey:%s:%d" % (func, jid), "the API's unique")
    open(gate, "w").close()
    while "completed" not in kinds and time.monotonic() < deadline:
        line = stream.readline().decode()
        if line.startswith("event: "):
            kinds.append(line[7:].strip())
    stream.close()
    check_eq([k for k in kinds if k in ("created", "started", "progress", "completed")],
             ["created", "started", "progress", "completed"], "events %r" % kinds)
    ctx.wait_job(func, jid)


# --------------------------------------------------------------------------
# Gearman clients -> GearMonkey workers


def gearman_clients_reach_gm_worker(ctx):
    func = "gm_out"
    ctx.gm_worker(func, "rev")
    wait_count(ctx, func, 1)
    check_eq(ctx.php_client("do", "normal", func, "php").strip(), "RESULT:php", "php do")
    check_eq(ctx.perl_client("do", func, "perl").strip(), "RESULT:lrep", "perl do_task")
    check_eq(ctx.cli_client(func, "cli").strip(), "ilc", "gearman CLI")
    check_eq(int(ctx.r.get("uid:%s" % func)), 3, "three GearMonkey jobs created")


def gearman_background_to_gm_worker(ctx):
    func = "gm_outbg"
    log = ctx.path("gm-bg.log")
    ctx.gm_worker(func, "upper", log=log)
    wait_count(ctx, func, 1)
    handles = ctx.php_client("bg", func, "normal:a", "high:b", "low:c").split()
    check_eq(len(handles), 3, "handles")
    for jid in (1, 2, 3):
        ctx.wait_job(func, jid)
    with open(log) as f:
        check_eq(sorted(line.split()[1] for line in f), ["a", "b", "c"], "GearMonkey worker's jobs")
    for hd in handles:
        h.wait_for(lambda: ctx.php_client("status", hd).split()[0] == "0", 10,
                   "GET_STATUS of %s: finished" % hd)


def gearman_background_status_from_gm_progress(ctx):
    # GET_STATUS of a background Gearman job follows the GearMonkey worker's
    # dividend/divisor.
    func = "gm_bgprog"
    ctx.gm_worker(func, "progress")
    wait_count(ctx, func, 1)
    handle = ctx.php_client("bg", func, "normal:p").strip()
    seen = set()

    def progressed():
        st = ctx.php_client("status", handle).split()
        seen.add(tuple(st))
        return st[:1] == ["0"]
    h.wait_for(progressed, 20, "background job done")
    check(("1", "1", "1", "3") in seen or ("1", "1", "2", "3") in seen,
          "GET_STATUS showed the GearMonkey progress: %r" % sorted(seen))


def gearman_priorities_map_to_gm_queues(ctx):
    # A roll call of 1 with no GearMonkey worker taking yet: the Gearman jobs
    # wait in the GearMonkey queue of their priority, then run high first.
    func = "gm_outprio"
    ctx.r.set("count:%s" % func, 1)
    ctx.php_client("bg", func, "low:c", "normal:b", "high:a")
    for prio, data in (("high", b"a"), ("normal", b"b"), ("low", b"c")):
        key = "queue:%s:%s" % (func, prio)
        h.wait_for(lambda: ctx.r.llen(key) == 1, 10, "one job in %s" % key)
        jid = int(ctx.r.lindex(key, 0))
        check_eq(ctx.r.hget("job:%s:%d" % (func, jid), "input"), data, "%s's job" % key)
    log = ctx.path("gm-outprio.log")
    ctx.gm_worker(func, "upper", log=log)
    h.wait_for(lambda: os.path.exists(log) and len(open(log).read().split()) == 6, 20,
               "GearMonkey worker ran all three")
    with open(log) as f:
        check_eq([line.split()[1] for line in f], ["a", "b", "c"], "run order")


def gearman_epoch_job_goes_to_gm_scheduled_set(ctx):
    # SUBMIT_JOB_EPOCH for a function only GearMonkey workers serve: the
    # job is in GearMonkey's scheduled set at once, under its time, and a
    # GearMonkey worker runs it then (not before); GET_STATUS follows it.
    func = "gm_outepoch"
    ctx.r.set("count:%s" % func, 1)
    due = int(time.time()) + 4
    out = subprocess.run([GEARSHIFT, "submit", "-s", "127.0.0.1:%d" % ctx.port, "-f", func,
                          "--at", str(due), "later"], capture_output=True, text=True, timeout=20)
    check_eq(out.returncode, 0, "gearshift submit --at: %s" % out.stderr)
    handle = out.stdout.strip()
    key = "queue:%s:scheduled" % func
    h.wait_for(lambda: ctx.r.zcard(key) == 1, 10, "the job in %s" % key)
    jid_raw, score = ctx.r.zrange(key, 0, 0, withscores=True)[0]
    jid = int(jid_raw)
    check_eq(int(score), due, "its score is its time")
    check_eq(ctx.r.hget("job:%s:%d" % (func, jid), "input"), b"later", "the job's input")
    check(time.time() < due - 1, "written well before its time")
    check_eq(ctx.r.llen("queue:%s:normal" % func), 0, "not in a queue")
    log = ctx.path("gm-outepoch.log")
    ctx.gm_worker(func, "upper", log=log)
    job = ctx.wait_job(func, jid, timeout=20)
    check(time.time() >= due, "ran before its time")
    check_eq(job.get(b"output"), b"LATER", "GearMonkey worker's output")
    h.wait_for(lambda: ctx.php_client("status", handle).split()[0] == "0", 10,
               "GET_STATUS of %s: finished" % handle)
    check_eq(ctx.r.get("uid:%s" % func), b"1", "one GearMonkey job, written once")


def given_job_is_read_slowly_and_its_end_seen_at_once(ctx):
    # A Gearman job out at a GearMonkey worker for 4 s: after its first
    # second its hash is read a few times a second (not every 20 ms), and
    # its `finish:` announcement ends the wait at once.
    func = "gm_long"
    ctx.gm_worker(func, "sleep")
    wait_count(ctx, func, 1)
    ctx.php_client("do", "normal", func, "0.1")  # warm: the bridge's workers are up

    def reads():
        return ctx.r.info("commandstats").get("cmdstat_hmget", {}).get("calls", 0)
    before = reads()
    started = time.monotonic()
    check_eq(ctx.php_client("do", "normal", func, "4").strip(), "RESULT:slept:4", "long job")
    took = time.monotonic() - started
    hmgets = reads() - before
    check(hmgets <= 100, "hash reads in a 4 s job: %d (every 20 ms was ~200)" % hmgets)
    check(took < 4.0 + 0.5, "the end is seen at its announcement (took %.2f s)" % took)


def gearman_client_sees_gm_progress_and_errors(ctx):
    ctx.gm_worker("gm_prog", "progress")
    ctx.gm_worker("gm_err", "fail")
    wait_count(ctx, "gm_prog", 1)
    wait_count(ctx, "gm_err", 1)
    out = ctx.php_client("callbacks", "gm_prog", "p")
    check("STATUS:1/3" in out and "STATUS:2/3" in out, "WORK_STATUS forwarded: %r" % out)
    check("COMPLETE:done:p" in out, "complete: %r" % out)
    check_eq(ctx.php_client("exccb", "gm_err", "e").splitlines(), ["EXCEPTION:boom:e"],
             "the GearMonkey error text as WORK_EXCEPTION")
    check_eq(ctx.php_client("do", "normal", "gm_err", "f").strip()[:9], "EXCEPTION", "do")


def redis_with_password_both_ways(ctx):
    """requirepass, and rediss:// when the Ctx has TLS: jobs go both ways."""
    tag = "tls" if ctx.redis.tls else "pw"
    ctx.php_worker("rev", tag + "_in")
    h.wait_workers(ctx.port, tag + "_in")
    _, job = ctx.gm().run(tag + "_in", "secure", blocking=True, timeout=20)
    check(job is not None, "GearMonkey client -> Gearman worker timed out")
    check_eq(job.get(b"output"), b"eruces", "GearMonkey client -> Gearman worker")
    ctx.gm_worker(tag + "_out", "upper")
    wait_count(ctx, tag + "_out", 1)
    check_eq(ctx.php_client("do", "normal", tag + "_out", "abc").strip(), "RESULT:ABC",
             "Gearman client -> GearMonkey worker")
    check(ctx.redis.password not in ctx.server.log_text(), "the password stays out of the log")


def rediss_both_ways(ctx):
    # rediss:// to a certificate of a private CA given with --gearmonkey-ca.
    check(ctx.redis.url.startswith("rediss://"), ctx.redis.url)
    redis_with_password_both_ways(ctx)


CONFIG_FILE_BRIDGE = """\
[[gearmonkey]]
url = "{url}"
match = "cfg_*"

[[gearmonkey]]
match = "pdf_*"
route = "gearmonkey"
"""


def bridge_from_config_file_with_a_route(ctx):
    # No --gearmonkey flag: [[gearmonkey]] sections give the URL and the
    # functions; route = "gearmonkey" sends Gearman jobs to GearMonkey workers
    # with no roll call needed, and its GearMonkey jobs are never taken.
    ctx.php_worker("rev", "cfg_a")
    ctx.php_worker("rev", "other")
    h.wait_workers(ctx.port, "cfg_a")
    h.wait_workers(ctx.port, "other")
    _, job = ctx.gm().run("cfg_a", "conf", blocking=True, timeout=20)
    check_eq(job.get(b"output"), b"fnoc", "matched by the config's glob")
    ctx.gm().run("other", "x")
    check_eq(ctx.r.get("count:pdf_a"), None, "no GearMonkey worker announced for pdf_a")
    client = ctx.spawn(PHP + [os.path.join(CLIENTS, "client.php"), str(ctx.port), "do",
                              "normal", "pdf_a", "doc"], "php-client-pdf_a")
    h.wait_for(lambda: ctx.r.llen("queue:pdf_a:normal") == 1, 10,
               "the routed Gearman job in queue:pdf_a:normal")
    ctx.gm_worker("pdf_a", "upper")
    check_eq(client.wait(timeout=20), 0, "Gearman client exit status")
    check_eq(client.stdout().strip(), "RESULT:DOC", "the GearMonkey worker's output")
    check_eq(ctx.r.lrange("queue:other:normal", 0, -1), [b"1"], "unmatched function untouched")


RELOAD_BEFORE = """\
[[gearmonkey]]
url = "{url}"
match = "a_*"
"""


def sighup_reloads_the_bridged_functions(ctx):
    # The [[gearmonkey]] globs change under SIGHUP: b_1 becomes bridged (its
    # queued GearMonkey job runs, its roll call counts Gearshift's worker),
    # a_1 stops being bridged (its roll call share goes, its jobs stay).
    ctx.php_worker("rev", "a_1")
    ctx.php_worker("rev", "b_1")
    h.wait_workers(ctx.port, "b_1")
    wait_count(ctx, "a_1", 1)
    jid = ctx.gm().run("b_1", "xy")
    time.sleep(0.6)
    check_eq(ctx.r.lrange("queue:b_1:normal", 0, -1), [str(jid).encode()], "b_1 not bridged yet")
    with open(ctx.path("policy.toml"), "w") as f:
        f.write(RELOAD_BEFORE.replace("{url}", ctx.redis.url).replace("a_*", "b_*"))
    os.kill(ctx.server.pid, signal.SIGHUP)
    check_eq(ctx.wait_job("b_1", jid).get(b"output"), b"yx", "b_1 bridged after SIGHUP")
    wait_count(ctx, "b_1", 1)
    wait_count(ctx, "a_1", 0)
    jid = ctx.gm().run("a_1", "q")
    time.sleep(0.6)
    check_eq(ctx.r.lrange("queue:a_1:normal", 0, -1), [str(jid).encode()], "a_1 no longer bridged")
    check("gearmonkey bridge functions reloaded" in ctx.server.log_text(), "a log line")


TESTS = [
    gm_client_blocking_to_php_worker,
    gm_client_to_perl_and_cli_workers,
    gm_jobs_wait_for_gearman_workers_and_keep_priority,
    gm_scheduled_job_runs_when_due,
    idle_taker_waits_for_announcements,
    gm_client_sees_gearman_progress,
    gm_client_errors_from_gearman_worker,
    gearman_clients_reach_gm_worker,
    gearman_background_to_gm_worker,
    gearman_client_sees_gm_progress_and_errors,
    gearman_background_status_from_gm_progress,
    gearman_priorities_map_to_gm_queues,
    gearman_epoch_job_goes_to_gm_scheduled_set,
    given_job_is_read_slowly_and_its_end_seen_at_once,
    bridged_job_is_marked_in_gearshift,
    bridged_job_in_events_and_api,
    bad_input_is_logged_counted_and_kept,
    redis_restart_under_load,
    redis_gone_while_jobs_run_both_ways,
    roll_call_of_a_crashed_gearshift_is_corrected_by_another,
    event_stream_wakes_the_bridge,
]

SPECIAL = {
    gm_job_gets_gearshift_retries: {"config": RETRY_CONFIG},
    gm_job_gets_gearshift_run_timeout: {"config": RETRY_CONFIG},
    gearman_job_retried_on_gm_worker_is_a_new_gm_job: {"config": RETRY_CONFIG},
    kill9_gearshift_while_bridged_jobs_run: {"durable": True},
    only_matching_functions_are_bridged: {"match": ["img_*"]},
    redis_with_password_both_ways: {"password": "secret-pw"},
    rediss_both_ways: {"tls": True, "password": "secret-pw"},
    bridge_from_config_file_with_a_route: {"config": CONFIG_FILE_BRIDGE},
    sighup_reloads_the_bridged_functions: {"config": RELOAD_BEFORE},
}


def main():
    missing = [t for t in (REDIS_SERVER, "gearman", "openssl") if not shutil.which(t)]
    missing += h.missing_clients(PHP, PERL)
    if not os.path.exists(GEARSHIFT):
        missing.append(GEARSHIFT)
    tests = [(f.__name__, wrap(f)) for f in TESTS]
    tests += [(f.__name__, wrap(f, **kw)) for f, kw in SPECIAL.items()]
    if missing:
        # scripts/test.sh installs them: their absence is a failure, not a skip.
        print("== gearmonkey: missing prerequisites: %s" % ", ".join(missing))
        print(h.summary(0, 1, len(tests)))
        return 1
    os.environ["SERVER_CMD"] = "%s serve ... --gearmonkey redis://127.0.0.1:<own port>" % GEARSHIFT
    return h.run_suite("gearmonkey bridge (redis-server + gearshift serve --gearmonkey)", tests)


if __name__ == "__main__":
    sys.exit(main())
