#!/usr/bin/env python3
"""Library interop suite: Gearshift's own client library (through the
`gearshift submit` / `work` / `admin` tools) against real third-party
Gearman libraries, on the server under test.

  * `gearshift work` (our Rust worker) serving jobs from PHP GearmanClient
    (doNormal/doHigh, doBackground, addTask + runTasks, callbacks) and Perl
    Gearman::Client (do_task, dispatch_background, task sets);
  * `gearshift submit` (our Rust client) submitting to PHP GearmanWorker and
    Perl Gearman::Worker: results, stdin workloads, background jobs,
    priorities, unique coalescing, WORK_DATA streamed to stdout, warnings on
    stderr, WORK_FAIL and WORK_EXCEPTION (exit code 1), `--lines` batches;
  * `gearshift admin ... --json` while PHP, Perl and Rust workers are
    registered.

The server is started from $SERVER_CMD (a command template; `{port}` becomes
a free loopback port), one fresh server per test; default: gearmand 1.1.20.
The gearshift binary is $GEARSHIFT_BIN, default target/debug/gearshift of
this repository (build it first: `cargo build -p gearshift`).

Synchronisation never relies on fixed sleeps: tests poll the admin protocol
or log files with deadlines. Every child process runs with a timeout and is
stopped (by pid) at test end. Tests that cannot apply to gearmand are listed
in GEARMAND_SKIPS and skipped only there, with the reason printed and counted.

usage: SERVER_CMD='...' [GEARSHIFT_BIN=...] python3 library.py [name-substring ...]
Final line: `N passed, N failed, N skipped`; exit status 1 on any failure.
"""

import json
import os
import re
import shutil
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.dont_write_bytecode = True  # keep tests/interop free of __pycache__

import harness as h  # noqa: E402
from harness import check, check_eq, wait_for  # noqa: E402
# The PHP/Perl helpers and polling helpers of the third-party suite.
from interop import (  # noqa: E402
    HANDLE_RE, PERL, PHP, perl_client, perl_worker, php_client, php_worker,
    read_lines, wait_lines, wait_queued, wait_unique_clients)

GEARSHIFT = os.environ.get("GEARSHIFT_BIN") or os.path.normpath(
    os.path.join(HERE, "..", "..", "target", "debug", "gearshift"))

# Tests that cannot apply to gearmand: name -> reason. Skipped (the reason
# printed, counted in `N skipped`) only when the server under test is gearmand.
GEARMAND_SKIPS = {}

TESTS = []


def test(fn):
    TESTS.append((fn.__name__, h.with_ctx(fn)))
    return fn


# ---------------------------------------------------------------- helpers

def gs_argv(ctx, sub, *args):
    return [GEARSHIFT, sub, "--server", "%s:%d" % (h.HOST, ctx.port)] + list(args)


def gs_work(ctx, funcs, *cmd, extra=()):
    """`gearshift work -f F [-f G ...] EXTRA [-- CMD...]` as a child process."""
    argv = gs_argv(ctx, "work")
    for f in funcs.split(","):
        argv += ["-f", f]
    argv += list(extra)
    if cmd:
        argv += ["--"] + list(cmd)
    return ctx.spawn(argv, "gearshift-work-" + funcs.replace(",", "+"))


def gs_submit(ctx, func, *args, input=None, timeout=20):
    """Run `gearshift submit -f FUNC ARGS...` to completion (CompletedProcess)."""
    return h.run(gs_argv(ctx, "submit", "-f", func, "--timeout", "15s", *args),
                 timeout=timeout, input=input)


def gs_submit_ok(ctx, func, *args, input=None):
    r = gs_submit(ctx, func, *args, input=input)
    check(r.returncode == 0, "gearshift submit -f %s %s exited %d: stdout=%r stderr=%r"
          % (func, " ".join(args), r.returncode, r.stdout, r.stderr))
    return r.stdout


def gs_submit_bg(ctx, func, *args):
    """`gearshift submit` left running (a foreground job that waits)."""
    return ctx.spawn(gs_argv(ctx, "submit", "-f", func, "--timeout", "20s", *args),
                     "gearshift-submit-" + func)


def gs_admin_json(ctx, *args):
    r = h.run(gs_argv(ctx, "admin", "--json", *args), timeout=15)
    check(r.returncode == 0, "gearshift admin --json %s exited %d: %r"
          % (" ".join(args), r.returncode, r.stderr))
    try:
        rows = json.loads(r.stdout)
    except ValueError as e:
        raise h.TestFailure("gearshift admin --json %s: not JSON (%s): %r"
                            % (" ".join(args), e, r.stdout))
    check(isinstance(rows, list), "JSON array expected: %r" % rows)
    server = "%s:%d" % (h.HOST, ctx.port)
    for row in rows:
        check(isinstance(row, dict) and row.get("server") == server,
              "every row carries \"server\": %r: %r" % (server, row))
    return rows


def by_function(rows):
    return {r["function"]: r for r in rows}


def worker_rows(rows, client_id):
    return [r for r in rows if r.get("client_id") == client_id]


# ---------------------------------------------------------------- prerequisites

def prerequisites():
    """The gearshift binary and the third-party libraries must be there."""
    missing = []
    if not os.access(GEARSHIFT, os.X_OK):
        missing.append("%s (GEARSHIFT_BIN; cargo build -p gearshift)" % GEARSHIFT)
    missing += h.missing_clients(PHP, PERL, ("sh", "tr"))
    check(not missing, "missing prerequisites: %s" % ", ".join(missing))


TESTS.append(("prerequisites", prerequisites))


# ------------------------------------------- gearshift work <- PHP / Perl clients

@test
def work_php_do_normal_high_low(ctx):
    gs_work(ctx, "up", "tr", "a-z", "A-Z")
    h.wait_workers(ctx.port, "up")
    for prio in ("normal", "high", "low"):
        check_eq(php_client(ctx, "do", prio, "up", "hello-" + prio).strip(),
                 "RESULT:HELLO-" + prio.upper(), "PHP do " + prio)


@test
def work_php_do_background(ctx):
    # Queued first, no worker: the Rust worker then takes exactly --count jobs
    # and leaves the third one queued (a graceful stop takes no further job).
    handles = php_client(ctx, "bg", "echo", "normal:bg1", "normal:bg2", "normal:bg3").split()
    check(len(handles) == 3 and all(HANDLE_RE.match(x) for x in handles),
          "doBackground handles %r" % handles)
    wait_queued(ctx, "echo", 3)
    w = gs_work(ctx, "echo", extra=["--count", "2"])  # no command: echo the workload
    check_eq(w.wait(15), 0, "gearshift work --count 2 exit")
    check_eq(w.stdout(), "bg1bg2", "the worker ran the first two PHP background jobs")
    wait_for(lambda: h.status(ctx.port).get("echo") == (1, 0, 0), 10,
             "the third job still queued, no worker")
    check_eq(php_client(ctx, "status", handles[0]).strip(), "0 0 0 0", "jobStatus of a done job")
    check_eq(php_client(ctx, "status", handles[2]).strip(), "1 0 0 0", "jobStatus of a queued job")
    w2 = gs_work(ctx, "echo", extra=["--count", "1"])
    check_eq(w2.wait(15), 0, "second worker exit")
    check_eq(w2.stdout(), "bg3", "the second worker ran the third job")
    wait_queued(ctx, "echo", 0)


@test
def work_php_run_tasks_concurrently(ctx):
    # Every job waits (bounded) until all four have started: four PHP tasks
    # must run at once on one `gearshift work -c 4`.
    barrier = ctx.path("barrier")
    os.mkdir(barrier)
    script = ('d="$1"; n="$2"; touch "$d/$$"; i=0; '
              'while [ "$(ls "$d" | wc -l)" -lt "$n" ] && [ "$i" -lt 400 ]; do '
              'sleep 0.02; i=$((i+1)); done; '
              '[ "$(ls "$d" | wc -l)" -ge "$n" ] || { echo "barrier: alone" >&2; exit 1; }; '
              'tr a-z A-Z')
    gs_work(ctx, "up", "sh", "-c", script, "sh", barrier, "4", extra=["-c", "4"])
    h.wait_workers(ctx.port, "up")
    out = php_client(ctx, "tasks", "up", "one", "two", "three", "four").splitlines()
    check_eq(out, ["one=ONE", "two=TWO", "three=THREE", "four=FOUR"], "runTasks results")
    check_eq(len(os.listdir(barrier)), 4, "jobs started")


@test
def work_php_warning_fail_unique(ctx):
    gs_work(ctx, "warner", "sh", "-c", "echo warn1 >&2; tr a-z A-Z")
    gs_work(ctx, "bad", "false")
    gs_work(ctx, "env", "sh", "-c",
            'printf "%s|%s|" "$GEARSHIFT_FUNCTION" "$GEARSHIFT_UNIQUE"; cat')
    for f in ("warner", "bad", "env"):
        h.wait_workers(ctx.port, f)
    check_eq(php_client(ctx, "callbacks", "warner", "payload").splitlines(),
             ["WARNING:warn1", "COMPLETE:PAYLOAD"], "stderr line -> WORK_WARNING, then result")
    check_eq(php_client(ctx, "do", "normal", "bad", "x").strip(), "FAIL",
             "non-zero exit -> doNormal GEARMAN_WORK_FAIL")
    check_eq(php_client(ctx, "failcb", "bad", "y").strip(), "FAILED", "fail callback")
    check_eq(php_client(ctx, "do", "normal", "env", "data", "uniq-7").strip(),
             "RESULT:env|uniq-7|data", "function, PHP's unique and workload reach the command")
    wait_queued(ctx, "bad", 0)


@test
def work_perl_do_task(ctx):
    gs_work(ctx, "up", "tr", "a-z", "A-Z")
    gs_work(ctx, "bad", "false")
    h.wait_workers(ctx.port, "up")
    h.wait_workers(ctx.port, "bad")
    check_eq(perl_client(ctx, "do", "up", "perl-hello").strip(), "RESULT:PERL-HELLO", "do_task")
    check_eq(perl_client(ctx, "do", "up", "high one", "high").strip(), "RESULT:HIGH ONE",
             "do_task high")
    check_eq(perl_client(ctx, "do", "bad", "x").strip(), "FAIL", "do_task on WORK_FAIL")
    check_eq(perl_client(ctx, "taskset", "up", "a", "b", "c").splitlines(),
             ["a=A", "b=B", "c=C"], "task set")


@test
def work_perl_dispatch_background(ctx):
    out = perl_client(ctx, "bg", "echo", "perl-bg").strip()
    check(re.match(r"^127\.0\.0\.1:%d//H:[^\s:]*:\d+$" % ctx.port, out),
          "dispatch_background handle %r" % out)
    wait_queued(ctx, "echo", 1)
    w = gs_work(ctx, "echo", extra=["--count", "1"])
    check_eq(w.wait(15), 0, "gearshift work exit")
    check_eq(w.stdout(), "perl-bg", "the Rust worker ran the Perl background job")
    wait_queued(ctx, "echo", 0)


# ------------------------------------------- gearshift submit -> PHP / Perl workers

@test
def submit_php_worker_foreground(ctx):
    php_worker(ctx, "rev", "rev")
    h.wait_workers(ctx.port, "rev")
    check_eq(gs_submit_ok(ctx, "rev", "hello"), "olleh", "result on stdout, byte for byte")
    check_eq(gs_submit_ok(ctx, "rev", input="from stdin"), "nidts morf", "stdin workload")
    for prio in ("high", "low"):
        check_eq(gs_submit_ok(ctx, "rev", "--priority", prio, prio), prio[::-1],
                 "--priority " + prio)


@test
def submit_php_worker_background(ctx):
    log = ctx.path("log")
    handle = gs_submit_ok(ctx, "rec", "-b", "bg-payload").strip()
    check(HANDLE_RE.match(handle), "background handle %r" % handle)
    wait_queued(ctx, "rec", 1)
    check_eq(php_client(ctx, "status", handle).strip(), "1 0 0 0", "PHP jobStatus of our job")
    w = php_worker(ctx, "record", "rec", 1, log)
    check_eq(w.wait(15), 0, "PHP worker exit")
    check_eq(read_lines(log), ["bg-payload"], "the PHP worker ran the job")
    wait_queued(ctx, "rec", 0)


@test
def submit_priorities_php_worker(ctx):
    log = ctx.path("log")
    for prio, data in (("low", "L1"), ("normal", "N1"), ("high", "H1"),
                       ("low", "L2"), ("normal", "N2"), ("high", "H2")):
        gs_submit_ok(ctx, "ordered", "-b", "--priority", prio, data)
    ps = h.parse_priority_status(h.admin(ctx.port, "prioritystatus"))
    check_eq(ps.get("ordered"), (2, 2, 2, 0), "prioritystatus before the worker starts")
    w = php_worker(ctx, "record", "ordered", 6, log)
    check_eq(w.wait(20), 0, "PHP worker exit")
    check_eq(read_lines(log), ["H1", "H2", "N1", "N2", "L1", "L2"],
             "high, normal, low; FIFO within a priority")


@test
def submit_php_worker_data_status_warning(ctx):
    php_worker(ctx, "chatty", "chat")
    h.wait_workers(ctx.port, "chat")
    r = gs_submit(ctx, "chat", "payload")
    check_eq(r.returncode, 0, "exit code (stderr %r)" % r.stderr)
    check_eq(r.stdout, "d1d2done:payload", "WORK_DATA then the result on stdout")
    check_eq(r.stderr, "w1\n", "WORK_WARNING on stderr, status not printed")


@test
def submit_php_worker_streams_data(ctx):
    log, gate = ctx.path("log"), ctx.path("gate")
    php_worker(ctx, "stream", "streamer", 0, log, gate)
    h.wait_workers(ctx.port, "streamer")
    sub = gs_submit_bg(ctx, "streamer", "x")
    wait_lines(log, 1, desc="the PHP worker to start the job")
    wait_for(lambda: sub.stdout() == "part1\n", 10,
             "the first WORK_DATA on stdout while the job still runs")
    check(sub.proc.poll() is None, "submit exited before the job completed")
    check_eq(h.status(ctx.port).get("streamer"), (1, 1, 1), "job still running")
    open(gate, "w").close()
    check_eq(sub.wait(15), 0, "gearshift submit exit")
    check_eq(sub.stdout(), "part1\npart2\nend:x", "streamed data, then the result")


@test
def submit_php_worker_fail(ctx):
    php_worker(ctx, "fail", "failer")
    h.wait_workers(ctx.port, "failer")
    r = gs_submit(ctx, "failer", "x")
    check_eq(r.returncode, 1, "exit code on WORK_FAIL (stderr %r)" % r.stderr)
    check_eq(r.stdout, "", "no stdout")
    check(re.match(r"^gearshift: job H:[^\s:]*:\d+ failed\n$", r.stderr), "stderr %r" % r.stderr)
    wait_queued(ctx, "failer", 0)


@test
def submit_php_worker_exception(ctx):
    php_worker(ctx, "exception", "thrower")
    h.wait_workers(ctx.port, "thrower")
    r = gs_submit(ctx, "thrower", "x")
    check_eq(r.returncode, 1, "exit code on WORK_EXCEPTION (stderr %r)" % r.stderr)
    check_eq(r.stdout, "", "no stdout")
    check(re.match(r"^gearshift: job H:[^\s:]*:\d+ raised an exception: boom:x\n$", r.stderr),
          "the exception text on stderr: %r" % r.stderr)
    wait_queued(ctx, "thrower", 0)


@test
def submit_unique_coalescing_php_worker(ctx):
    log = ctx.path("log")
    s1 = gs_submit_bg(ctx, "once", "--unique", "same-unique", "data")
    wait_unique_clients(ctx, "same-unique", 1)
    s2 = gs_submit_bg(ctx, "once", "--unique", "same-unique", "data")
    wait_unique_clients(ctx, "same-unique", 2)
    check_eq(h.status(ctx.port).get("once"), (1, 0, 0), "one job for two submissions")
    w = php_worker(ctx, "count", "once", 0, log)
    check_eq(s1.wait(20), 0, "submit 1 exit")
    check_eq(s2.wait(20), 0, "submit 2 exit")
    want = "ran:%d" % w.pid
    check_eq(s1.stdout(), want, "submit 1 result")
    check_eq(s2.stdout(), want, "submit 2 result")
    check_eq(read_lines(log), ["ran %d" % w.pid], "the PHP worker ran once")


@test
def submit_perl_worker(ctx):
    log = ctx.path("log")
    perl_worker(ctx, "multi", "revp,upperp")
    h.wait_workers(ctx.port, "revp")
    h.wait_workers(ctx.port, "upperp")
    check_eq(gs_submit_ok(ctx, "revp", "abc"), "cba", "Perl worker revp")
    check_eq(gs_submit_ok(ctx, "upperp", "--priority", "high", "abc"), "ABC", "Perl worker upperp")
    handle = gs_submit_ok(ctx, "bgperl", "-b", "perl-bg").strip()
    check(HANDLE_RE.match(handle), "background handle %r" % handle)
    wait_queued(ctx, "bgperl", 1)
    w = perl_worker(ctx, "record", "bgperl", 1, log)
    check_eq(w.wait(15), 0, "Perl worker exit")
    check_eq(read_lines(log), ["perl-bg"], "the Perl worker ran the background job")
    wait_queued(ctx, "bgperl", 0)


@test
def submit_lines_perl_worker(ctx):
    perl_worker(ctx, "upper", "upl")
    h.wait_workers(ctx.port, "upl")
    r = gs_submit(ctx, "upl", "--lines", "-c", "4", input="alpha\nbeta\n\ngamma\ndelta\nepsilon\n")
    check_eq(r.returncode, 0, "exit code (stderr %r)" % r.stderr)
    check_eq(r.stdout, "ALPHA\nBETA\nGAMMA\nDELTA\nEPSILON\n", "results in input order")
    check(r.stderr.rstrip("\n").endswith("5 succeeded, 0 failed"), "summary %r" % r.stderr)


# ------------------------------------------- gearshift admin --json with PHP/Perl workers

@test
def admin_json_with_php_perl_workers(ctx):
    log, gate = ctx.path("log"), ctx.path("gate")
    php_worker(ctx, "rev", "phprev")
    perl_worker(ctx, "multi", "revp,upperp")
    gs_work(ctx, "rsa,rsb", extra=["--client-id", "rs-worker"])
    # Queued before the gated worker starts, so it takes the high one first.
    handles = php_client(ctx, "bg", "slow", "normal:first", "normal:second", "high:third").split()
    wait_queued(ctx, "slow", 3)
    php_worker(ctx, "gated", "slow", 0, log, gate)
    for f in ("phprev", "revp", "upperp", "slow", "rsa", "rsb"):
        h.wait_workers(ctx.port, f)
    check_eq(wait_lines(log, 1, desc="the gated PHP worker to start a job"),
             ["started " + handles[2]], "the high-priority job runs first")

    status = by_function(gs_admin_json(ctx, "status"))
    for f in ("phprev", "revp", "upperp", "rsa", "rsb"):
        row = status.get(f)
        check(row is not None, "status --json lists %r: %r" % (f, sorted(status)))
        check_eq((row["total"], row["running"], row["workers"]), (0, 0, 1), "status row " + f)
    check_eq(status.get("slow", {}).get("total"), 3, "slow: total")
    check_eq(status["slow"]["running"], 1, "slow: running")
    check_eq(status["slow"]["workers"], 1, "slow: workers")
    for row in status.values():
        check_eq(sorted(row), ["function", "running", "server", "total", "workers"], "status keys")

    ps = by_function(gs_admin_json(ctx, "prioritystatus"))
    check_eq((ps["slow"]["high"], ps["slow"]["normal"], ps["slow"]["low"], ps["slow"]["workers"]),
             (0, 2, 0, 1), "prioritystatus --json: the queued jobs, not the running one")

    workers = gs_admin_json(ctx, "workers")
    for row in workers:
        check_eq(sorted(row), ["client_id", "fd", "functions", "ip", "server"], "workers keys")
        check(isinstance(row["fd"], int) and isinstance(row["functions"], list),
              "workers row types %r" % row)
    want = {"php-rev": ["phprev"], "perl-multi": ["revp", "upperp"],
            "php-gated": ["slow"], "rs-worker": ["rsa", "rsb"]}
    for cid, funcs in want.items():
        rows = worker_rows(workers, cid)
        check(len(rows) == 1, "one workers --json row for %r: %r" % (cid, workers))
        check_eq(sorted(rows[0]["functions"]), funcs, "functions of %s" % cid)
        check_eq(rows[0]["ip"], "127.0.0.1", "ip of %s" % cid)

    jobs = gs_admin_json(ctx, "jobs")
    check_eq(len(jobs), 3, "jobs --json rows (%r)" % jobs)
    check(all(HANDLE_RE.match(j["handle"]) and j["retries"] == 0 and j["ignored"] is False
              for j in jobs), "jobs --json rows %r" % jobs)
    # gearmand's job_queued stays set while a job runs (Gearshift reproduces it).
    check_eq(sorted((j["handle"], j["queued"]) for j in jobs),
             sorted((x, True) for x in handles), "jobs --json: handle and queued flag")

    open(gate, "w").close()
    wait_queued(ctx, "slow", 0)
    status = by_function(gs_admin_json(ctx, "status"))
    check_eq((status["slow"]["total"], status["slow"]["running"]), (0, 0), "slow drained")


def main():
    tests = TESTS
    if "gearmand" in os.path.basename(h.server_cmd().split()[0]):
        tests = [(n, skipped_on_gearmand(GEARMAND_SKIPS[n]) if n in GEARMAND_SKIPS else f)
                 for n, f in TESTS]
    return h.run_suite("library", tests)


def skipped_on_gearmand(reason):
    def skip():
        raise h.Skip("gearmand: " + reason)
    return skip


if __name__ == "__main__":
    sys.exit(main())
