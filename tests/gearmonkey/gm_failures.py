"""The GearMonkey bridge suite's failure tests (run by test_gearmonkey.py):
Gearshift killed -9, a crashed Gearshift's roll call, the event stream,
Redis restarted or gone, and bad input in Redis.
"""

import os
import signal
import time

from gm_harness import CLIENTS, PHP, wait_count
import harness as h
from harness import check, check_eq


# --------------------------------------------------------------------------
# Failures


def kill9_gearshift_while_bridged_jobs_run(ctx):
    func = "gm_kill"
    n = 12
    events = ctx.r.pubsub(ignore_subscribe_messages=True)
    events.subscribe("channel:%s" % func)
    for i in range(n):
        ctx.gm().run(func, "0.4")
    ctx.php_worker("sleep", func)
    ctx.php_worker("sleep", func)
    h.wait_for(lambda: ctx.r.llen("gearshift:processing:%s" % func) > 0, 20, "jobs taken")
    time.sleep(0.5)
    # Killed while jobs are taken (between two runs the list is empty a moment).
    h.wait_for(lambda: ctx.r.llen("gearshift:processing:%s" % func) > 0, 20, "jobs in flight")
    os.kill(ctx.server.pid, signal.SIGKILL)
    ctx.server.proc.wait(timeout=5)
    check(ctx.r.llen("gearshift:processing:%s" % func) > 0, "jobs were in flight at the kill")
    for p in list(ctx.procs):
        p.stop()
    # Back with the same data dir and Redis: every job ends success.
    ctx.start_server()
    wait_count(ctx, func, 0)
    ctx.php_worker("sleep", func)
    ctx.php_worker("sleep", func)
    for jid in range(1, n + 1):
        check_eq(ctx.wait_job(func, jid, timeout=40).get(b"status"), b"success", "job %d" % jid)
    check_eq(ctx.r.llen("gearshift:processing:%s" % func), 0, "processing list empty")
    wait_count(ctx, func, 2)
    finishes = {}
    quiet = time.monotonic() + 1.0
    while time.monotonic() < quiet:
        # (None also for the ignored subscribe confirmation: read until 1 s of quiet)
        m = events.get_message(timeout=0.2)
        if m is None:
            continue
        quiet = time.monotonic() + 1.0
        kind, _, jid = m["data"].decode().partition(":")
        if kind == "finish":
            finishes[jid] = finishes.get(jid, 0) + 1
    check_eq(finishes, {str(j): 1 for j in range(1, n + 1)},
             "finish events: each job finished once on the Redis side")


def roll_call_of_a_crashed_gearshift_is_corrected_by_another(ctx):
    # A Gearshift killed -9 and never started again: its Gearman workers stay
    # in count:F until another Gearshift on the same Redis sees its liveness
    # key expire and takes its share out; GearMonkey's own worker stays.
    func = "gm_leak"
    ctx.gm_worker(func, "upper")
    wait_count(ctx, func, 1)
    ctx.php_worker("rev", func)
    ctx.php_worker("rev", func)
    wait_count(ctx, func, 3)
    os.kill(ctx.server.pid, signal.SIGKILL)
    ctx.server.proc.wait(timeout=5)
    for p in [p for p in ctx.procs if "php-worker" in p.name]:
        p.stop()
    time.sleep(1)
    check_eq(ctx.r.get("count:%s" % func), b"3", "the crashed Gearshift's share is still counted")
    # Another Gearshift (memory store: a new instance name) on the same Redis.
    ctx.start_server()
    wait_count(ctx, func, 1, timeout=12)
    check_eq(ctx.r.hgetall("gearshift:shares:%s" % func), {}, "no share left")


def event_stream_wakes_the_bridge(ctx):
    # With Gearshift's event stream up the bridge looks every 2 s on its own;
    # a Gearman worker's arrival is in count:F well before that.
    func = "gm_push"
    for n in (1, 2, 3):
        time.sleep(0.3)
        ctx.php_worker("rev", func)
        wait_count(ctx, func, n, timeout=1.0)
    _, job = ctx.gm().run(func, "abc", blocking=True, timeout=20)
    check_eq(job.get(b"output"), b"cba", "a job through the bridge")
    check("polling instead" not in ctx.server.log_text(), "the stream stayed up")
    events = [x for x in ctx.metrics().splitlines()
              if x.startswith('gearshift_gearmonkey_total{event="events"}')]
    check(events and int(events[0].split()[-1]) >= 4, "events counted: %r" % events)


def redis_restart_under_load(ctx):
    func = "gm_rr"
    ctx.php_worker("rev", func)
    h.wait_workers(ctx.port, func)
    n = 60
    for i in range(n // 2):
        ctx.gm().run(func, "a%d" % i)
    ctx.redis.stop()
    time.sleep(1)
    # Gearman keeps working while Redis is gone.
    ctx.php_worker("rev", "plain")
    check_eq(ctx.php_client("do", "normal", "plain", "abc").strip(), "RESULT:cba",
             "Gearman side not blocked by a missing Redis")
    ctx.redis.start()
    for i in range(n // 2, n):
        ctx.gm().run(func, "b%d" % i)
    # (a take whose reply the restart cut off is swept back after 30 s: allow for it)
    for jid in range(1, n + 1):
        check_eq(ctx.wait_job(func, jid, timeout=60).get(b"status"), b"success", "job %d" % jid)
    wait_count(ctx, func, 1)


def redis_gone_while_jobs_run_both_ways(ctx):
    # A bridged job finishes on its Gearman worker while Redis is down: the
    # bridge keeps the result and writes it once Redis is back. A Gearman job
    # on a GearMonkey worker waits out the outage and completes.
    gate = ctx.path("gate")
    ctx.php_worker("gated", "gone_in", gate=gate)
    h.wait_workers(ctx.port, "gone_in")
    jid = ctx.gm().run("gone_in", "x")
    h.wait_for(lambda: ctx.r.hget("job:gone_in:%d" % jid, "status") == b"busy", 10, "running")
    ctx.gm_worker("gone_out", "sleep")
    wait_count(ctx, "gone_out", 1)
    client = ctx.spawn(PHP + [os.path.join(CLIENTS, "client.php"), str(ctx.port), "do",
                              "normal", "gone_out", "1.5"], "php-client-gone_out")
    h.wait_for(lambda: ctx.r.get("uid:gone_out") == b"1", 10, "Gearman job written to Redis")
    ctx.redis.stop()
    open(gate, "w").close()
    time.sleep(4)
    # Gearman alone still works meanwhile.
    ctx.php_worker("rev", "plain")
    check_eq(ctx.php_client("do", "normal", "plain", "up").strip(), "RESULT:pu", "Gearman side")
    ctx.redis.start()
    check_eq(ctx.wait_job("gone_in", jid, timeout=60).get(b"output"), b"gated:x",
             "result written after the outage")
    check_eq(client.wait(timeout=30), 0, "Gearman client exit status")
    check_eq(client.stdout().strip(), "RESULT:slept:1.5", "Gearman client's result")
    check_eq(ctx.r.llen("gearshift:processing:gone_in"), 0, "processing list empty")


def bad_input_is_logged_counted_and_kept(ctx):
    func = "gm_bad"
    r = ctx.r
    r.lpush("queue:%s:normal" % func, "not-a-number")
    r.lpush("queue:%s:normal" % func, "999")  # names no job hash
    r.hset("job:%s:5" % func, "status", "idle")  # no input field
    r.lpush("queue:%s:normal" % func, "5")
    good = ctx.gm().run(func, "ok")
    r.hset("job:%s:%d" % (func, good + 1), mapping={"status": "idle", "input": b"\xff\xfe"})
    r.lpush("queue:%s:normal" % func, good + 1)
    ctx.php_worker("rev", func)
    check_eq(ctx.wait_job(func, good).get(b"output"), b"ko", "the good job")
    check_eq(ctx.wait_job(func, good + 1).get(b"output"), b"\xfe\xff", "binary input")
    # Not an integer, no hash, a hash without input: kept aside, never run.
    # (kept as `{PRIO}:{ENTRY}`, the queue it came from)
    h.wait_for(lambda: set(r.lrange("gearshift:rejected:%s" % func, 0, -1))
               == {b"normal:not-a-number", b"normal:999", b"normal:5"}, 10,
               "bad entries kept aside")
    check_eq(r.hgetall("job:%s:5" % func), {b"status": b"idle"}, "hash without input untouched")
    check_eq(ctx.r.llen("gearshift:processing:%s" % func), 0, "processing list empty")
    check("gearmonkey" in ctx.server.log_text(), "a log line names the bridge")
    text = ctx.metrics()
    for line in ('gearshift_gearmonkey_total{event="bad_id"} 1',
                 'gearshift_gearmonkey_total{event="missing_job"} 2'):
        check(line in text.splitlines(), "/metrics has %r: %r"
              % (line, [x for x in text.splitlines() if "gearmonkey" in x]))
