#!/usr/bin/env python3
"""Lifecycle suite: Gearshift's per-function policies met by unmodified
third-party workers and clients.

Gearshift only: the server under test is started from $SERVER_CMD plus
`--config <policy.toml>` (a small policy file written per test; see
docs/gearshift.example.toml). gearmand has none of this, so when $SERVER_CMD
is not a Gearshift command (no word of it names a `gearshift*` program) the
suite prints why it skips and ends with `0 passed, 0 failed, N skipped`.

What is covered (one fresh server per test):
  * a failing run retried by the server after its backoff while the
    foreground client keeps waiting for exactly one terminal packet
    (PHP WORK_FAIL, PHP WORK_EXCEPTION, Perl undef return, Perl die);
  * kept results: `show job H` (state, attempts, error, history);
  * the dead set: `show dead`, `retry dead all F`, `drop dead all F`;
  * CAN_DO_TIMEOUT from Perl `register_function(name, 2, sub)` read as
    seconds, its expiry (gearmand-style requeue), and a policy retrying on
    timeout;
  * `require_worker`: a submission with no worker gets ERROR NO_WORKER at once.

Workers: clients/worker.php modes flaky, flakyexc; clients/worker.pl modes
flaky, flakyfail, sleep. They number each run of a workload in their log file
("<workload> <handle> <n>"), so a test can count the runs and learn the
handle of a foreground job.

usage: SERVER_CMD='.../gearshift serve -L 127.0.0.1 -p {port} ...' python3 lifecycle.py [name-substring ...]
Final line: `N passed, N failed, N skipped`; exit status 1 on any failure.
"""

import json
import os
import re
import shlex
import sys
import time
import urllib.request
from datetime import datetime, timezone

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.dont_write_bytecode = True  # keep tests/interop free of __pycache__

import harness as h  # noqa: E402
from harness import check, check_eq, wait_for  # noqa: E402

CLIENTS = os.path.join(HERE, "clients")
PHP = ["php", "-d", "display_errors=stderr"]
PERL = ["perl"]
GEARMAN = "gearman"
HANDLE_RE = re.compile(r"^H:[^\s:]*:\d+$")
TIME_RE = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$")

# Every retry rule below uses this backoff: short, fixed, no jitter, so the
# delays are exact and the suite stays fast.
FAST_RETRY = 'initial_delay = "100ms"\nbackoff = "fixed"\njitter = false\nkeep_results = "1h"\n'

TESTS = []


def test(fn):
    TESTS.append((fn.__name__, h.with_ctx(fn, with_server=False)))
    return fn


def is_gearshift(cmd):
    """True when the command template runs a Gearshift binary."""
    try:
        words = shlex.split(cmd)
    except ValueError:
        return False
    return any(os.path.basename(w).startswith("gearshift") for w in words)


# ---------------------------------------------------------------- server

def start_server(ctx, policy, http_port=None):
    """Write `policy` (TOML) to the test's temp dir and start the server under
    test with `--config <that file>` added to $SERVER_CMD (and its HTTP API
    on `http_port`, if given)."""
    path = ctx.path("policy.toml")
    with open(path, "w") as f:
        f.write(policy)
    cmd = h.server_cmd()
    if http_port is not None:
        cmd = re.sub(r" --http \S+", "", cmd) + " --http %s:%d" % (h.HOST, http_port)
    ctx.server = h.Server(cmd + " --config " + shlex.quote(path), label="gearshift").start()
    ctx.port = ctx.server.port
    return ctx.server


def admin(ctx, line):
    return h.admin(ctx.port, line)


def parse_time(text):
    check(TIME_RE.match(text), "RFC 3339 time with milliseconds: %r" % text)
    return datetime.strptime(text, "%Y-%m-%dT%H:%M:%S.%fZ").replace(tzinfo=timezone.utc)


def show_job(ctx, handle):
    """`show job H` -> {key: value, "history": [(time, event, detail)]}."""
    text = admin(ctx, "show job " + handle)
    check(text.endswith("\n.\n"), "show job %s: not a listing: %r" % (handle, text))
    job = {"history": []}
    for line in text.split("\n")[:-2]:
        key, sep, value = line.partition(": ")
        check(sep, "show job line %r" % line)
        if key == "history":
            at, _, rest = value.partition(" ")
            event, _, detail = rest.partition(" ")
            job["history"].append((parse_time(at), event, detail))
        else:
            check(key not in job, "show job: key %r twice in %r" % (key, text))
            job[key] = value
    for key in ("handle", "function", "unique", "priority", "state", "attempts", "created",
                "started", "finished", "worker", "error", "result_size"):
        check(key in job, "show job %s lacks %r: %r" % (handle, key, text))
    return job


def events(job):
    return [e for _, e, _ in job["history"]]


def show_dead(ctx, func=None):
    """`show dead [F]` -> list of [HANDLE, FUNCTION, ATTEMPTS, DIED_AT, ERROR]."""
    text = admin(ctx, "show dead" + (" " + func if func else ""))
    check(text.endswith(".\n"), "show dead: not a listing: %r" % text)
    rows = [line.split("\t") for line in text.split("\n")[:-2]]
    for r in rows:
        check(len(r) == 5, "show dead line has 5 tab-separated fields: %r" % text)
    return rows


# ---------------------------------------------------------------- clients

def php_worker(ctx, mode, funcs, log, arg=""):
    return ctx.spawn(PHP + [os.path.join(CLIENTS, "worker.php"), str(ctx.port), mode, funcs,
                            "0", log, str(arg)], "php-worker-" + mode)


def perl_worker(ctx, mode, funcs, log, arg="", env=None):
    return ctx.spawn(PERL + [os.path.join(CLIENTS, "worker.pl"), str(ctx.port), mode, funcs,
                             "0", log, str(arg)], "perl-worker-" + mode, env=env)


def php_client(ctx, *args, timeout=20, ok=True):
    r = h.run(PHP + [os.path.join(CLIENTS, "client.php"), str(ctx.port)] + list(args),
              timeout=timeout)
    if ok:
        check(r.returncode == 0, "client.php %s exited %d: %s %s"
              % (" ".join(args), r.returncode, r.stdout, r.stderr))
    return r


def perl_client(ctx, *args, timeout=20, env=None):
    r = h.run(PERL + [os.path.join(CLIENTS, "client.pl"), str(ctx.port)] + list(args),
              timeout=timeout, env=env)
    check(r.returncode == 0, "client.pl %s exited %d: %s %s"
          % (" ".join(args), r.returncode, r.stdout, r.stderr))
    return r.stdout


def cli(ctx, func, *args, timeout=20):
    return h.run([GEARMAN, "-h", h.HOST, "-p", str(ctx.port), "-f", func] + list(args),
                 timeout=timeout)


def raw_submit(ctx, func, data, exceptions=False, quiet=0.3, timeout=15):
    """SUBMIT_JOB on a raw connection; returns (handle, [(packet name, body)])
    from JOB_CREATED to the first terminal packet, after checking that nothing
    else arrives for `quiet` seconds (longer than any retry delay here)."""
    c = h.Conn(ctx.port, timeout)
    try:
        if exceptions:
            c.send_pkt(h.OPTION_REQ, b"exceptions")
            check_eq(c.expect_pkt(h.OPTION_RES), b"exceptions", "OPTION_RES")
        c.send_pkt(h.SUBMIT_JOB, func, "", data)
        handle = c.expect_pkt(h.JOB_CREATED).decode()
        got = [("JOB_CREATED", handle.encode())]
        while True:
            _, t, body = c.read_pkt(timeout)
            got.append((h.PACKET_NAMES.get(t, t), body))
            if t in (h.WORK_COMPLETE, h.WORK_FAIL, h.WORK_EXCEPTION, h.ERROR):
                break
        time.sleep(quiet)
        c.echo_sync(b"after-terminal")  # fails if any other packet came first
        return handle, got
    finally:
        c.close()


# ---------------------------------------------------------------- logs

def read_runs(path):
    """The workers' run log -> [(workload, handle, n)]."""
    try:
        with open(path) as f:
            lines = [line.rstrip("\n") for line in f]
    except FileNotFoundError:
        return []
    out = []
    for line in lines:
        w, hd, n = line.split(" ")
        out.append((w, hd, int(n)))
    return out


def runs_of(path, workload):
    return [r for r in read_runs(path) if r[0] == workload]


def wait_runs(path, workload, n, timeout=10):
    return wait_for(lambda: len(runs_of(path, workload)) >= n and runs_of(path, workload),
                    timeout, "%d run(s) of %r" % (n, workload))


def check_runs(path, workload, n):
    """Exactly n runs of workload, all of one job (one handle), numbered 1..n;
    returns the handle."""
    runs = runs_of(path, workload)
    check_eq([r[2] for r in runs], list(range(1, n + 1)), "runs of %r" % workload)
    handles = {r[1] for r in runs}
    check(len(handles) == 1 and HANDLE_RE.match(runs[0][1]),
          "all runs of %r are one job: %r" % (workload, runs))
    return runs[0][1]


def check_retry_history(job, attempts, failure, delay_ms=100):
    """History of a job retried under FAST_RETRY: `attempts` starts, a
    `failed` per failing run, each retried run due exactly delay_ms after
    its failure and requeued no earlier than that."""
    hist = job["history"]
    ev = events(job)
    check_eq(ev[0], "queued", "first history event")
    check_eq(ev.count("started"), attempts, "started events in %r" % ev)
    for i, (at, e, detail) in enumerate(hist):
        if e == "retry":
            check(i > 0 and hist[i - 1][1] == "failed", "retry follows a failure: %r" % ev)
            due = parse_time(detail)
            delay = (due - hist[i - 1][0]).total_seconds() * 1000
            check(abs(delay - delay_ms) < 1.5, "retry due %dms after the failure, got %.0fms"
                  % (delay_ms, delay))
            check(i + 1 < len(hist) and hist[i + 1][1] == "requeued" and hist[i + 1][0] >= due,
                  "requeued when the retry was due: %r" % hist[i:i + 2])
    fails = [d for _, e, d in hist if e == "failed"]
    for d in fails:
        check(d == failure or d.startswith(failure + ": "),
              "failed events say %r: %r" % (failure, fails))
    return fails


# ---------------------------------------------------------------- gate

def gearshift_under_test():
    """Not a test: the suite is skipped (see __main__) unless Gearshift runs."""
    return is_gearshift(h.server_cmd())


def prerequisites():
    missing = h.missing_clients(PHP, PERL, (GEARMAN,))
    check(not missing, "missing prerequisites: %s" % ", ".join(missing))


TESTS.append(("prerequisites", prerequisites))


# ---------------------------------------------------------------- 1. PHP WORK_FAIL

@test
def php_fail_retried_until_complete(ctx):
    """PHP worker WORK_FAILs the first 2 runs of each workload, then completes;
    under max_attempts=3 every client sees one result and nothing of the
    failed runs."""
    start_server(ctx, '[[function]]\nmatch = "lc_php_*"\nmax_attempts = 3\n' + FAST_RETRY)
    log = ctx.path("runs")
    php_worker(ctx, "flaky", "lc_php_fail", log, 2)
    h.wait_workers(ctx.port, "lc_php_fail")

    # doNormal: one result, from the third run
    t0 = time.monotonic()
    out = php_client(ctx, "do", "normal", "lc_php_fail", "one").stdout
    elapsed = time.monotonic() - t0
    check_eq(out, "RESULT:ok:one:3\n", "doNormal output")
    check(elapsed >= 0.2, "two 100ms retry delays passed before the result (%.3fs)" % elapsed)
    handle = check_runs(log, "one", 3)

    # the kept result: completed after 3 attempts, with the whole history
    job = show_job(ctx, handle)
    check_eq((job["handle"], job["function"], job["state"], job["attempts"]),
             (handle, "lc_php_fail", "completed", "3"), "show job handle/function/state/attempts")
    check_eq(job["result_size"], str(len("ok:one:3")), "show job result_size")
    check(job["worker"].startswith("php-flaky@"), "show job worker %r" % job["worker"])
    for key in ("created", "started", "finished"):
        parse_time(job[key])
    check(parse_time(job["created"]) <= parse_time(job["started"]) <= parse_time(job["finished"]),
          "created <= started <= finished: %r" % job)
    fails = check_retry_history(job, 3, "fail")
    check_eq(len(fails), 2, "failed events")
    check_eq(events(job), ["queued"] + ["started", "failed", "retry", "requeued"] * 2
             + ["started", "completed"], "history events")
    check_eq(job["history"][-1][2], "8 bytes", "completed detail")

    # callbacks: no data/warning/status/fail event leaks from the failed runs
    out = php_client(ctx, "callbacks", "lc_php_fail", "two").stdout
    check_eq(out.splitlines(), ["COMPLETE:ok:two:3"], "every callback event")
    check_runs(log, "two", 3)

    # raw: JOB_CREATED, then WORK_COMPLETE alone (no WORK_FAIL in between or after)
    handle, got = raw_submit(ctx, "lc_php_fail", "three")
    check_eq(got, [("JOB_CREATED", handle.encode()),
                   ("WORK_COMPLETE", handle.encode() + b"\0ok:three:3")], "packets to the client")
    check_eq(check_runs(log, "three", 3), handle, "the runs were of the submitted job")
    check_eq(h.status(ctx.port).get("lc_php_fail"), (0, 0, 1), "status after the jobs")


# ---------------------------------------------------------------- 2. Perl fail / die

@test
def perl_fail_retried_until_complete(ctx):
    """Perl worker returns undef (Gearman::Worker: WORK_FAIL alone) on the first
    2 runs; Perl do_task gets the third run's result once."""
    start_server(ctx, '[[function]]\nmatch = "lc_perl_*"\nmax_attempts = 3\n' + FAST_RETRY)
    log = ctx.path("runs")
    w = perl_worker(ctx, "flakyfail", "lc_perl_fail", log, 2)
    h.wait_workers(ctx.port, "lc_perl_fail")
    check_eq(perl_client(ctx, "do", "lc_perl_fail", "one"), "RESULT:ok:one:3\n", "do_task output")
    handle = check_runs(log, "one", 3)
    job = show_job(ctx, handle)
    check_eq((job["state"], job["attempts"]), ("completed", "3"), "show job state/attempts")
    check_retry_history(job, 3, "fail")
    check_eq(perl_client(ctx, "do", "lc_perl_fail", "two"), "RESULT:ok:two:3\n", "second job")
    check(w.proc.poll() is None, "the Perl worker is still running: %r" % w.stderr())


# The bug this test guards against: Gearman::Worker answers a die with
# WORK_EXCEPTION (Storable-frozen error) immediately followed by WORK_FAIL for
# the same handle; a server that ends the run on the WORK_EXCEPTION (retry
# scheduled) and answers the trailing WORK_FAIL with ERROR JOB_NOT_FOUND
# makes Gearman::Worker die ('unexpected packet type: error'), so no worker
# is left to run the retry.
DIE_BUG = ("the old bug: the trailing WORK_FAIL of a die got ERROR and Gearman::Worker "
           "died ('unexpected packet type: error'), so no worker was left for the retry")


@test
def perl_die_retried_until_complete(ctx):
    """Perl worker dies in its sub on the first run; the server retries
    (retry_on exception) and Perl do_task gets the second run's result once."""
    start_server(ctx, '[[function]]\nmatch = "lc_perl_*"\nmax_attempts = 3\n' + FAST_RETRY)
    log = ctx.path("runs")
    w = perl_worker(ctx, "flaky", "lc_perl_die", log, 1)
    h.wait_workers(ctx.port, "lc_perl_die")
    client = ctx.spawn(PERL + [os.path.join(CLIENTS, "client.pl"), str(ctx.port), "do",
                               "lc_perl_die", "one"], "perl-client-do")
    wait_for(lambda: client.proc.poll() is not None or w.proc.poll() is not None, 20,
             "the client to finish (or the worker to exit)")
    if "unexpected packet type: error" in w.stderr():
        runs = runs_of(log, "one")
        state = show_job(ctx, runs[0][1]) if runs else {}
        raise h.TestFailure("%s [runs: %d, job state: %s, attempts: %s; worker stderr: %r]"
                            % (DIE_BUG, len(runs), state.get("state"), state.get("attempts"),
                               w.stderr().strip().splitlines()[-1:]))
    check_eq(client.wait(20), 0, "client exit")
    check_eq(client.stdout(), "RESULT:ok:one:2\n", "do_task output")
    handle = check_runs(log, "one", 2)
    job = show_job(ctx, handle)
    check_eq((job["state"], job["attempts"]), ("completed", "2"), "show job state/attempts")
    check_retry_history(job, 2, "exception")
    check(w.proc.poll() is None, "the Perl worker is still running: %r" % w.stderr())


# ---------------------------------------------------------------- 3. PHP WORK_EXCEPTION

@test
def php_exception_every_attempt(ctx):
    """PHP worker always sends WORK_EXCEPTION; under max_attempts=3 the job runs
    exactly 3 times and each client gets one failure, after the last run."""
    start_server(ctx, '[[function]]\nmatch = "lc_exc"\nmax_attempts = 3\n' + FAST_RETRY)
    log = ctx.path("runs")
    php_worker(ctx, "flakyexc", "lc_exc", log, 1000)
    h.wait_workers(ctx.port, "lc_exc")

    # PHP addTask with exception/fail/complete callbacks: one exception, the last run's
    out = php_client(ctx, "exccb", "lc_exc", "x").stdout
    check_eq(out.splitlines(), ["EXCEPTION:boom:x:3"], "every callback event")
    # PHP doNormal: one GEARMAN_WORK_EXCEPTION return
    out = php_client(ctx, "do", "normal", "lc_exc", "y").stdout
    check_eq(out, "EXCEPTION:\n", "doNormal output")

    # raw: with OPTION_REQ exceptions, one WORK_EXCEPTION; without, one WORK_FAIL (handle alone)
    h_exc, got = raw_submit(ctx, "lc_exc", "z", exceptions=True)
    check_eq(got, [("JOB_CREATED", h_exc.encode()),
                   ("WORK_EXCEPTION", h_exc.encode() + b"\0boom:z:3")], "packets (exceptions on)")
    h_fail, got = raw_submit(ctx, "lc_exc", "v")
    check_eq(got, [("JOB_CREATED", h_fail.encode()), ("WORK_FAIL", h_fail.encode())],
             "packets (exceptions off)")

    # runs: exactly max_attempts per job, and no more after the final failure
    time.sleep(0.3)
    for w in ("x", "y", "z", "v"):
        check_runs(log, w, 3)
    job = show_job(ctx, runs_of(log, "x")[0][1])
    check_eq((job["state"], job["attempts"], job["error"]), ("failed", "3", "boom:x:3"),
             "show job state/attempts/error")
    fails = check_retry_history(job, 3, "exception")
    check_eq(fails, ["exception: boom:x:%d" % i for i in (1, 2, 3)], "failed events")
    check_eq(events(job)[-1], "failed", "a foreground job ends failed, not dead")
    check_eq(show_dead(ctx), [], "show dead (foreground jobs never go to the dead set)")
    check_eq(h.status(ctx.port).get("lc_exc"), (0, 0, 1), "status after the jobs")


# ---------------------------------------------------------------- 4. dead set

@test
def background_dead_retry_drop(ctx):
    """A background job failing all its attempts goes to `show dead`;
    `retry dead all F` runs it again, `drop dead all F` forgets it."""
    start_server(ctx, '[[function]]\nmatch = "lc_bg"\nmax_attempts = 2\n' + FAST_RETRY)
    log = ctx.path("runs")
    # fails the first 2 runs of each workload: a job dies after its 2 attempts
    # and, revived with a fresh set of attempts, completes on its 3rd run
    php_worker(ctx, "flaky", "lc_bg", log, 2)
    h.wait_workers(ctx.port, "lc_bg")

    # PHP doBackground -> dead after 2 attempts
    handle = php_client(ctx, "bg", "lc_bg", "normal:one").stdout.strip()
    check(HANDLE_RE.match(handle), "background handle %r" % handle)
    rows = wait_for(lambda: show_dead(ctx), 10, "the job in show dead")
    check_eq([r[:3] + r[4:] for r in rows], [[handle, "lc_bg", "2", "fail"]], "show dead")
    parse_time(rows[0][3])
    check_eq(check_runs(log, "one", 2), handle, "runs of the dead job")
    check_eq(show_dead(ctx, "lc_bg"), rows, "show dead lc_bg")
    check_eq(show_dead(ctx, "lc_other"), [], "show dead lc_other")
    job = show_job(ctx, handle)
    check_eq((job["state"], job["attempts"]), ("dead", "2"), "show job of the dead job")
    check_eq(events(job)[-2:], ["failed", "dead"], "history ends in dead")
    check_eq(h.status(ctx.port).get("lc_bg"), (0, 0, 1), "a dead job is not queued")

    # retry dead: filtered by function, then back to the queue and run again
    check_eq(admin(ctx, "retry dead all lc_other"), "OK 0\r\n", "retry dead all lc_other")
    check_eq(admin(ctx, "retry dead all lc_bg"), "OK 1\r\n", "retry dead all lc_bg")
    wait_runs(log, "one", 3)
    job = wait_for(lambda: (lambda j: j["state"] == "completed" and j)(show_job(ctx, handle)),
                   10, "the revived job to complete")
    check_eq(check_runs(log, "one", 3), handle, "the revived job is the same job")
    check("revived" in events(job), "history records the revival: %r" % events(job))
    check_eq(events(job)[-3:], ["revived", "started", "completed"], "history after retry dead")
    check_eq(show_dead(ctx), [], "show dead after the retried job completed")

    # gearman -b -> dead again; drop dead forgets it and it never runs again
    r = cli(ctx, "lc_bg", "-b", "two")
    check_eq((r.returncode, r.stdout, r.stderr), (0, "", ""), "gearman -b")
    rows = wait_for(lambda: show_dead(ctx), 10, "the second job in show dead")
    handle2 = check_runs(log, "two", 2)
    check_eq([r[:3] for r in rows], [[handle2, "lc_bg", "2"]], "show dead")
    check_eq(admin(ctx, "drop dead all lc_other"), "OK 0\r\n", "drop dead all lc_other")
    check_eq(admin(ctx, "drop dead all lc_bg"), "OK 1\r\n", "drop dead all lc_bg")
    check_eq(show_dead(ctx), [], "show dead after drop")
    check_eq(admin(ctx, "drop dead all lc_bg"), "OK 0\r\n", "drop dead all lc_bg again")
    check_eq(admin(ctx, "retry dead all lc_bg"), "OK 0\r\n", "retry dead all after drop")
    check(admin(ctx, "show job " + handle2).startswith("ERR "), "show job of a dropped job")
    time.sleep(0.3)
    check_runs(log, "two", 2)
    check_eq(h.status(ctx.port).get("lc_bg"), (0, 0, 1), "status at the end")


# ---------------------------------------------------------------- 5. CAN_DO_TIMEOUT

@test
def perl_can_do_timeout_read_as_seconds(ctx):
    """Perl register_function(F, 2, sub) sends CAN_DO_TIMEOUT "2": 2 seconds
    under Gearshift, so a 1.5 s job completes once and is not requeued
    (gearmand reads "2" as milliseconds and requeues it after 1 s)."""
    start_server(ctx, '# no rule matches lc_cdt: gearmand 1.1 behaviour but for the units\n'
                      '[[function]]\nmatch = "lc_unrelated"\nmax_attempts = 2\n')
    log = ctx.path("runs")
    w1 = perl_worker(ctx, "sleep", "lc_cdt", log, 2)
    w2 = perl_worker(ctx, "sleep", "lc_cdt", log, 2)  # would pick up a requeued job
    h.wait_workers(ctx.port, "lc_cdt", 2)
    check_eq(perl_client(ctx, "do", "lc_cdt", "1.5"), "RESULT:slept:1.5\n", "do_task output")
    check_runs(log, "1.5", 1)
    check(w1.proc.poll() is None and w2.proc.poll() is None,
          "both Perl workers still run: %r %r" % (w1.stderr(), w2.stderr()))
    check_eq(h.status(ctx.port).get("lc_cdt"), (0, 0, 2), "status after the job")


@test
def php_can_do_timeout_read_as_seconds(ctx):
    """PHP addFunction(F, cb, null, 2) (php.net: seconds) sends CAN_DO_TIMEOUT
    "2" through libgearman: a 1.5 s job completes once, not requeued after 1 s;
    a 4 s job is timed out after 2 s and requeued to the other worker."""
    start_server(ctx, '[[function]]\nmatch = "lc_unrelated"\nmax_attempts = 2\n')
    log = ctx.path("runs")
    php_worker(ctx, "sleep", "lc_pcdt", log, 2)
    php_worker(ctx, "sleep", "lc_pcdt", log, 2)
    h.wait_workers(ctx.port, "lc_pcdt", 2)
    out = php_client(ctx, "do", "normal", "lc_pcdt", "1.5").stdout
    check("slept:1.5" in out, "doNormal output %r" % out)
    check_runs(log, "1.5", 1)
    handle = php_client(ctx, "bg", "lc_pcdt", "normal:4").stdout.strip()
    wait_runs(log, "4", 2, timeout=10)
    check_rerun_after_timeout(ctx, handle)
    check_eq(check_runs(log, "4", 2), handle, "both runs are the submitted job")


def check_rerun_after_timeout(ctx, handle):
    """The 4 s job `handle`, on its second run now, was taken from its first
    worker by the 2 s CAN_DO_TIMEOUT: by the server's clock its second run
    started 2 s after its creation or later (its first run started at
    once), and before the first run's 4 s were over. (No policy keeps its
    history; `show job` of the live job has both times. The clients' start-up
    is not in this figure.)"""
    job = show_job(ctx, handle)
    check_eq((job["state"], job["attempts"]), ("running", "2"),
             "show job %s state/attempts during the second run" % handle)
    took = (parse_time(job["started"]) - parse_time(job["created"])).total_seconds()
    check(1.95 <= took < 3.9, "second run started %.3fs after the submission: after the "
          "2 s timeout, before the first run's 4 s were over" % took)


@test
def perl_can_do_timeout_expiry_requeues(ctx):
    """The same worker with a 4 s job: after 2 s the run times out and, no rule
    matching, the job is requeued as gearmand does; the other worker runs it."""
    start_server(ctx, '[[function]]\nmatch = "lc_unrelated"\nmax_attempts = 2\n')
    log = ctx.path("runs")
    perl_worker(ctx, "sleep", "lc_cdt", log, 2)
    perl_worker(ctx, "sleep", "lc_cdt", log, 2)
    h.wait_workers(ctx.port, "lc_cdt", 2)
    out = perl_client(ctx, "bg", "lc_cdt", "4").strip()
    check(re.match(r"^127\.0\.0\.1:%d//H:[^\s:]*:\d+$" % ctx.port, out),
          "dispatch_background handle %r" % out)
    wait_runs(log, "4", 2, timeout=10)
    check_rerun_after_timeout(ctx, out.split("//")[1])
    check_eq(check_runs(log, "4", 2), out.split("//")[1], "both runs are the submitted job")
    check_eq(h.status(ctx.port).get("lc_cdt"), (1, 1, 2), "status: the job runs again")


@test
def perl_timeout_policy_fails_after_attempts(ctx):
    """Under retry_on=["timeout"] max_attempts=2, a 3 s job on workers with a
    2 s CAN_DO_TIMEOUT times out twice and the Perl client gets one failure.
    (Each Perl worker exits once its timed-out run ends: its late WORK_COMPLETE
    gets ERROR JOB_NOT_FOUND, as from gearmand, and Gearman::Worker dies on it;
    hence two workers.)"""
    start_server(ctx, '[[function]]\nmatch = "lc_cdt_retry"\nmax_attempts = 2\n'
                      'retry_on = ["timeout"]\n' + FAST_RETRY)
    log = ctx.path("runs")
    perl_worker(ctx, "sleep", "lc_cdt_retry", log, 2)
    perl_worker(ctx, "sleep", "lc_cdt_retry", log, 2)
    h.wait_workers(ctx.port, "lc_cdt_retry", 2)
    t0 = time.monotonic()
    check_eq(perl_client(ctx, "do", "lc_cdt_retry", "3"), "FAIL\n", "do_task output")
    elapsed = time.monotonic() - t0
    # At least the two timeouts; the upper bound only catches a hang (the
    # client's start-up is in this figure; the runs' lengths are checked on
    # the server's clock below).
    check(3.9 <= elapsed < 15, "failure after two 2 s timeouts and a 100ms delay (%.2fs)"
          % elapsed)
    handle = check_runs(log, "3", 2)
    job = show_job(ctx, handle)
    check_eq((job["state"], job["attempts"]), ("failed", "2"), "show job state/attempts")
    fails = check_retry_history(job, 2, "timeout")
    check_eq(len(fails), 2, "failed (timeout) events")
    starts = [at for at, e, _ in job["history"] if e == "started"]
    ends = [at for at, e, _ in job["history"] if e == "failed"]
    for s, e in zip(starts, ends):
        ran = (e - s).total_seconds()
        # 2 s and a late timer at most; a run not cut would take its 3 s.
        check(1.9 <= ran < 2.9, "each run ended by the 2 s timeout (%.3fs)" % ran)


# ---------------------------------------------------------------- 6. require_worker

@test
def require_worker_refuses_at_once(ctx):
    """require_worker = true: with no worker registered, the gearman CLI and a
    PHP client get ERROR NO_WORKER at once instead of waiting; functions
    without the rule still queue; with a worker the same submission runs."""
    start_server(ctx, '[[function]]\nmatch = "lc_need_*"\nrequire_worker = true\n')
    # A client left waiting would hang until its 20 s run timeout; the
    # answer comes at once, and 8 s (the client's start-up included) only
    # bounds a loaded machine.
    for args in ([], ["-b"]):
        t0 = time.monotonic()
        r = cli(ctx, "lc_need_w", *args, "x")
        elapsed = time.monotonic() - t0
        check(elapsed < 8, "gearman %s answered in %.2fs" % (" ".join(args), elapsed))
        check("NO_WORKER" in r.stderr and r.stdout == "",
              "gearman %s: stdout %r stderr %r" % (" ".join(args), r.stdout, r.stderr))
    t0 = time.monotonic()
    r = php_client(ctx, "do", "normal", "lc_need_w", "x", ok=False)
    check(time.monotonic() - t0 < 8, "doNormal answered promptly")
    check(r.returncode == 1 and r.stdout.startswith("ERROR ") and "NO_WORKER" in r.stdout,
          "doNormal: %r %r" % (r.stdout, r.stderr))
    c = h.Conn(ctx.port)
    try:
        c.send_pkt(h.SUBMIT_JOB_BG, "lc_need_w", "", "x")
        body = c.expect_pkt(h.ERROR)
        check(body.startswith(b"NO_WORKER\0"), "ERROR packet %r" % body)
    finally:
        c.close()
    check_eq(h.status(ctx.port).get("lc_need_w", (0, 0, 0))[:2], (0, 0), "nothing queued")

    # a function without the rule is queued as usual
    r = cli(ctx, "lc_free", "-b", "x")
    check_eq((r.returncode, r.stdout, r.stderr), (0, "", ""), "gearman -b lc_free")
    check_eq(h.status(ctx.port).get("lc_free"), (1, 0, 0), "lc_free queued")

    # with a worker registered the submission runs
    php_worker(ctx, "rev", "lc_need_w", "")
    h.wait_workers(ctx.port, "lc_need_w")
    r = cli(ctx, "lc_need_w", "abc")
    check_eq((r.stdout, r.stderr), ("cba", ""), "gearman -f lc_need_w with a worker")


# ---------------------------------------------------------------- 6. Perl prefixes

@test
def perl_prefixed_names(ctx):
    """Gearman::Client/Worker with prefix => "app" send "app\\tFUNC": jobs run
    both ways, `status` lists the name with its TAB escaped, `show job` and
    the HTTP functions view (the dashboard's) name it, and a policy matching
    the prefix applies."""
    http_port = h.free_port()
    start_server(ctx, '[[function]]\nmatch = "app\\t*"\nkeep_results = "1h"\n',
                 http_port=http_port)
    env = dict(os.environ, GEARMAN_PREFIX="app")
    log = ctx.path("runs")
    perl_worker(ctx, "record", "rev", log, env=env)
    h.wait_workers(ctx.port, "app\\x09rev")

    check_eq(perl_client(ctx, "do", "rev", "fg-one", env=env).strip(), "RESULT:ok:fg-one",
             "prefixed do_task")
    # Gearman::Client returns "HOST:PORT//HANDLE".
    handle = perl_client(ctx, "bg", "rev", "bg-one", env=env).strip().split("//")[-1]
    h.wait_for(lambda: "bg-one" in read_lines(log), 10, "the background job ran")
    h.wait_for(lambda: h.status(ctx.port).get("app\\x09rev", (1,))[0] == 0, 10,
               "the prefixed queue drained")
    check_eq(h.status(ctx.port).get("app\\x09rev"), (0, 0, 1), "status row of app\\trev")
    check_eq(sorted(read_lines(log)), ["bg-one", "fg-one"], "the worker's runs")

    job = show_job(ctx, handle)
    check_eq((job["function"], job["state"]), ("app\\x09rev", "completed"),
             "show job of the prefixed background job (kept by the policy)")

    url = "http://%s:%d/api/v1/functions" % (h.HOST, http_port)
    with urllib.request.urlopen(url, timeout=5) as r:
        body = json.load(r)
    rows = body if isinstance(body, list) else body.get("functions", [])
    names = [f.get("name") for f in rows]
    check("app\trev" in names, "the functions view names app\\trev: %r" % names)

    # A client with another prefix, or none, reaches another function.
    other = dict(os.environ, GEARMAN_PREFIX="other")
    perl_client(ctx, "bg", "rev", "elsewhere", env=other)
    h.wait_for(lambda: h.status(ctx.port).get("other\\x09rev", (0,))[0] == 1, 10,
               "a job queued under other\\trev")
    check("elsewhere" not in read_lines(log), "app's worker took no job of another prefix")


def read_lines(path):
    try:
        with open(path) as f:
            return f.read().split()
    except FileNotFoundError:
        return []


def main():
    if not gearshift_under_test():
        print("== lifecycle: skipped: it tests Gearshift's policy file (--config), and "
              "SERVER_CMD does not run gearshift: %s" % h.server_cmd())
        print(h.summary(0, 0, len(TESTS)), flush=True)
        return 0
    return h.run_suite("lifecycle", TESTS)


if __name__ == "__main__":
    sys.exit(main())
