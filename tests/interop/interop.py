#!/usr/bin/env python3
"""Interop suite: real third-party Gearman clients against the server under test.

The server is started from $SERVER_CMD (a command template; `{port}` becomes a
free loopback port), one fresh server per test.  Default: gearmand 1.1.20
(`/usr/sbin/gearmand -L 127.0.0.1 -p {port} -t 0 --log-file=none -P /tmp/gm-{port}.pid`).

Clients exercised:
  * gearman / gearadmin CLI (gearman-tools 1.1.20, libgearman)
  * PHP php-gearman (clients/client.php, clients/worker.php)
  * Perl Gearman::Client / Gearman::Worker (clients/client.pl, clients/worker.pl)

Synchronisation never relies on fixed sleeps: tests poll the admin protocol
(`status`, `prioritystatus`, GET_STATUS_UNIQUE) or log files with deadlines.
Every child process runs with a timeout and is killed (by pid) at test end.

usage: SERVER_CMD='...' python3 interop.py [name-substring ...]
Final line: `N passed, N failed, N skipped`; exit status 1 on any failure.
"""

import os
import re
import shutil
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.dont_write_bytecode = True  # keep tests/interop free of __pycache__

import harness as h  # noqa: E402
from harness import check, check_eq, wait_for  # noqa: E402

CLIENTS = os.path.join(HERE, "clients")
PHP = ["php", "-d", "display_errors=stderr"]
PERL = ["perl"]
GEARMAN = "gearman"
GEARADMIN = "gearadmin"
HANDLE_RE = re.compile(r"^H:[^\s:]*:\d+$")

TESTS = []


def test(fn):
    TESTS.append((fn.__name__, h.with_ctx(fn)))
    return fn


# ---------------------------------------------------------------- helpers

def php_worker(ctx, mode, funcs, count=0, log="", gate=""):
    argv = PHP + [os.path.join(CLIENTS, "worker.php"), str(ctx.port), mode, funcs,
                  str(count), log]
    if gate:
        argv.append(gate)
    return ctx.spawn(argv, "php-worker-" + mode)


def php_client(ctx, *args, timeout=20):
    r = h.run(PHP + [os.path.join(CLIENTS, "client.php"), str(ctx.port)] + list(args),
              timeout=timeout)
    check(r.returncode == 0, "client.php %s exited %d: %s %s"
          % (" ".join(args), r.returncode, r.stdout, r.stderr))
    return r.stdout


def php_client_bg(ctx, *args):
    return ctx.spawn(PHP + [os.path.join(CLIENTS, "client.php"), str(ctx.port)] + list(args),
                     "php-client-" + args[0])


def perl_worker(ctx, mode, funcs, count=0, log=""):
    return ctx.spawn(PERL + [os.path.join(CLIENTS, "worker.pl"), str(ctx.port), mode, funcs,
                             str(count), log], "perl-worker-" + mode)


def perl_client(ctx, *args, timeout=20):
    r = h.run(PERL + [os.path.join(CLIENTS, "client.pl"), str(ctx.port)] + list(args),
              timeout=timeout)
    check(r.returncode == 0, "client.pl %s exited %d: %s %s"
          % (" ".join(args), r.returncode, r.stdout, r.stderr))
    return r.stdout


def cli_worker(ctx, func, *cmd, extra=()):
    argv = [GEARMAN, "-w", "-h", h.HOST, "-p", str(ctx.port), "-f", func] + list(extra)
    if cmd:
        argv += ["--"] + list(cmd)
    return ctx.spawn(argv, "gearman-worker-" + func)


def cli_client(ctx, func, *args, timeout=20):
    r = h.run([GEARMAN, "-h", h.HOST, "-p", str(ctx.port), "-f", func] + list(args),
              timeout=timeout)
    check(r.returncode == 0, "gearman client exited %d: %r %r" % (r.returncode, r.stdout, r.stderr))
    return r.stdout


def gearadmin(ctx, *opts, timeout=10):
    r = h.run([GEARADMIN, "-h", h.HOST, "-p", str(ctx.port)] + list(opts), timeout=timeout)
    check(r.returncode == 0, "gearadmin %s exited %d: %r" % (opts, r.returncode, r.stderr))
    return r


def read_lines(path):
    try:
        with open(path) as f:
            return [line.rstrip("\n") for line in f]
    except FileNotFoundError:
        return []


def wait_lines(path, n, timeout=15, desc=None):
    return wait_for(lambda: len(read_lines(path)) >= n and read_lines(path), timeout,
                    desc or "%d line(s) in %s" % (n, os.path.basename(path)))


def wait_queued(ctx, func, n, timeout=10):
    """Poll `status` until func has total == n."""
    return wait_for(lambda: h.status(ctx.port).get(func, (None,))[0] == n, timeout,
                    "status total %d for %r" % (n, func))


def wait_unique_clients(ctx, unique, n, timeout=10):
    """Poll GET_STATUS_UNIQUE until n foreground clients wait on the job."""
    def ok():
        f = h.status_unique(ctx.port, unique)
        return len(f) == 6 and f[1] == b"1" and int(f[5]) >= n
    return wait_for(ok, timeout, "%d client(s) waiting on unique %r" % (n, unique))


# ---------------------------------------------------------------- prerequisites

def prerequisites():
    """The third-party clients must be installed, or every other test is meaningless."""
    missing = h.missing_clients(PHP, PERL, (GEARMAN, GEARADMIN))
    check(not missing, "missing prerequisites: %s" % ", ".join(missing))


TESTS.append(("prerequisites", prerequisites))


# ---------------------------------------------------------------- gearman CLI

@test
def cli_foreground_rev(ctx):
    cli_worker(ctx, "rev", "rev")
    h.wait_workers(ctx.port, "rev")
    check_eq(cli_client(ctx, "rev", "hello").strip(), "olleh", "gearman -f rev hello")
    check_eq(cli_client(ctx, "rev", "second job").strip(), "boj dnoces", "second job")


@test
def cli_foreground_tr_stdin(ctx):
    cli_worker(ctx, "upcase", "tr", "a-z", "A-Z")
    h.wait_workers(ctx.port, "upcase")
    r = h.run([GEARMAN, "-h", h.HOST, "-p", str(ctx.port), "-f", "upcase"],
              input="from stdin\n", timeout=20)
    check_eq(r.returncode, 0, "exit code")
    check_eq(r.stdout, "FROM STDIN\n", "stdin workload result")


@test
def cli_background(ctx):
    out = cli_client(ctx, "bgjob", "-b", "payload-1")
    check_eq(out, "", "background client output")
    wait_queued(ctx, "bgjob", 1)
    check_eq(h.status(ctx.port)["bgjob"], (1, 0, 0), "status bgjob")
    jobs = gearadmin(ctx, "--show-jobs").stdout.splitlines()
    check(len(jobs) == 2 and jobs[-1] == ".", "show-jobs listing %r" % jobs)
    fields = jobs[0].split("\t")
    check(HANDLE_RE.match(fields[0]) and fields[1:] == ["0", "0", "1"],
          "show-jobs line for a queued background job: %r" % jobs[0])
    w = cli_worker(ctx, "bgjob", extra=["-c", "1"])  # no command: echo workload to stdout
    check_eq(w.wait(15), 0, "worker exit")
    check_eq(w.stdout(), "payload-1", "worker received workload")
    wait_queued(ctx, "bgjob", 0)


@test
def cli_priorities(ctx):
    for args in (["-L", "low1"], ["norm1"], ["-I", "high1"], ["-L", "low2"], ["norm2"],
                 ["-I", "high2"]):
        cli_client(ctx, "prio", "-b", *args)
    ps = h.parse_priority_status(gearadmin(ctx, "--priority-status").stdout)
    check_eq(ps.get("prio"), (2, 2, 2, 0), "priority-status for prio")
    w = cli_worker(ctx, "prio", extra=["-c", "6"])
    check_eq(w.wait(15), 0, "worker exit")
    check_eq(w.stdout(), "high1high2norm1norm2low1low2", "execution order")


@test
def cli_gearadmin(ctx):
    cli_worker(ctx, "rev", "rev")
    h.wait_workers(ctx.port, "rev")
    cli_client(ctx, "queued", "-b", "x")
    wait_queued(ctx, "queued", 1)

    st = h.parse_status(gearadmin(ctx, "--status").stdout)
    check_eq(st.get("rev"), (0, 0, 1), "--status rev")
    check_eq(st.get("queued"), (1, 0, 0), "--status queued")

    ps = h.parse_priority_status(gearadmin(ctx, "--priority-status").stdout)
    check_eq(ps.get("queued"), (0, 1, 0, 0), "--priority-status queued")
    check_eq(ps.get("rev"), (0, 0, 0, 1), "--priority-status rev")

    workers = gearadmin(ctx, "--workers").stdout.splitlines()
    check(workers and workers[-1] == ".", "--workers terminator: %r" % workers)
    wl = [re.match(r"^(\d+) (\S+) (\S*) :(.*)$", line) for line in workers[:-1]]
    check(all(wl), "--workers line format: %r" % workers)
    check(any(m.group(4) == " rev" and m.group(2) == "127.0.0.1" for m in wl),
          "--workers lists the rev worker: %r" % workers)

    jobs = gearadmin(ctx, "--show-jobs").stdout.splitlines()
    check(len(jobs) == 2 and HANDLE_RE.match(jobs[0].split("\t")[0]), "--show-jobs %r" % jobs)
    handle = jobs[0].split("\t")[0]
    uniq = gearadmin(ctx, "--show-unique-jobs").stdout.splitlines()
    check(len(uniq) == 2 and uniq[0] and uniq[1] == ".", "--show-unique-jobs %r" % uniq)

    pid = gearadmin(ctx, "--getpid").stdout.strip()
    check_eq(pid, str(ctx.server.pid), "--getpid (server started with exec semantics)")
    ver = gearadmin(ctx, "--server-version").stdout.strip()
    # The version string itself is deliberately not compared (Gearshift has its own).
    check(ver and "\n" not in ver and not ver.startswith("Error"), "--server-version %r" % ver)

    r = gearadmin(ctx, "--create-function", "made")
    check_eq(r.stdout.strip(), "OK", "--create-function output")
    check_eq(h.status(ctx.port).get("made"), (0, 0, 0), "created function in status")
    r = gearadmin(ctx, "--drop-function", "made")
    check_eq(r.stdout.strip(), "OK", "--drop-function output")
    check("made" not in h.status(ctx.port), "dropped function gone")
    r = gearadmin(ctx, "--drop-function", "nosuch")
    check_eq(r.stderr.strip(), "Error: function not found", "--drop-function unknown stderr")

    r = gearadmin(ctx, "--cancel-job", handle)
    check_eq(r.stdout.strip(), "OK", "--cancel-job output")
    jobs = gearadmin(ctx, "--show-jobs").stdout.splitlines()
    # gearmand keeps a cancelled job listed (IGNORE_JOB=1) until a worker reaches it;
    # dropping it at once is also acceptable here (differential.py pins the exact bytes).
    check(jobs in ([handle + "\t0\t1\t0", "."], ["."]), "--show-jobs after cancel: %r" % jobs)
    w = cli_worker(ctx, "queued", extra=["-c", "1"])
    h.wait_workers(ctx.port, "queued")
    cli_client(ctx, "queued", "-b", "after-cancel")
    check_eq(w.wait(15), 0, "worker exit")
    check_eq(w.stdout(), "after-cancel", "the cancelled job never reached a worker")
    r = gearadmin(ctx, "--cancel-job", "H:nowhere:424242")
    check_eq(r.stderr.strip(), "Error: UNKNOWN_JOB", "--cancel-job unknown stderr")


# ---------------------------------------------------------------- PHP

@test
def php_do_normal_high_low(ctx):
    php_worker(ctx, "rev", "rev")
    h.wait_workers(ctx.port, "rev")
    for prio in ("normal", "high", "low"):
        check_eq(php_client(ctx, "do", prio, "rev", "hello-" + prio).strip(),
                 "RESULT:" + ("hello-" + prio)[::-1], "do " + prio)


@test
def php_background_and_job_status(ctx):
    log, gate = ctx.path("log"), ctx.path("gate")
    handle = php_client(ctx, "bg", "slowbg", "normal:work-1").strip()
    check(HANDLE_RE.match(handle), "background handle %r" % handle)
    check_eq(php_client(ctx, "status", handle).strip(), "1 0 0 0", "jobStatus while queued")
    php_worker(ctx, "gated", "slowbg", 1, log, gate)
    wait_lines(log, 1)  # worker logged "started" after sending status 1/2
    wait_for(lambda: php_client(ctx, "status", handle).strip() == "1 1 1 2", 10,
             "jobStatus running 1/2")
    open(gate, "w").close()
    wait_for(lambda: php_client(ctx, "status", handle).strip() == "0 0 0 0", 10,
             "jobStatus unknown after completion")
    check_eq(read_lines(log), ["started " + handle], "worker saw the job")
    wait_queued(ctx, "slowbg", 0)


@test
def php_add_task_run_tasks(ctx):
    php_worker(ctx, "upper", "up")
    h.wait_workers(ctx.port, "up")
    out = php_client(ctx, "tasks", "up", "one", "two", "three", "four").splitlines()
    check_eq(out, ["one=ONE", "two=TWO", "three=THREE", "four=FOUR"], "runTasks results")


@test
def php_data_status_warning_callbacks(ctx):
    php_worker(ctx, "chatty", "chat")
    h.wait_workers(ctx.port, "chat")
    out = php_client(ctx, "callbacks", "chat", "payload").splitlines()
    check_eq(out, ["DATA:d1", "STATUS:1/3", "WARNING:w1", "STATUS:2/3", "DATA:d2",
                   "COMPLETE:done:payload"], "callback sequence")


@test
def php_work_fail(ctx):
    php_worker(ctx, "fail", "failer")
    h.wait_workers(ctx.port, "failer")
    check_eq(php_client(ctx, "do", "normal", "failer", "x").strip(), "FAIL", "doNormal on failure")
    check_eq(php_client(ctx, "failcb", "failer", "y").strip(), "FAILED", "fail callback")
    wait_queued(ctx, "failer", 0)


@test
def php_work_exception(ctx):
    php_worker(ctx, "exception", "thrower")
    h.wait_workers(ctx.port, "thrower")
    check_eq(php_client(ctx, "exccb", "thrower", "x").splitlines(), ["EXCEPTION:boom:x"],
             "exception callback")
    wait_queued(ctx, "thrower", 0)


@test
def php_unique_coalescing(ctx):
    log = ctx.path("log")
    c1 = php_client_bg(ctx, "do", "normal", "once", "data", "same-unique")
    wait_unique_clients(ctx, "same-unique", 1)
    c2 = php_client_bg(ctx, "do", "normal", "once", "data", "same-unique")
    wait_unique_clients(ctx, "same-unique", 2)
    check_eq(h.status(ctx.port).get("once"), (1, 0, 0), "one job for two submissions")
    w = php_worker(ctx, "count", "once", 0, log)
    check_eq(c1.wait(20), 0, "client 1 exit")
    check_eq(c2.wait(20), 0, "client 2 exit")
    want = "RESULT:ran:%d\n" % w.pid
    check_eq(c1.stdout(), want, "client 1 result")
    check_eq(c2.stdout(), want, "client 2 result")
    check_eq(read_lines(log), ["ran %d" % w.pid], "worker ran once")


# ---------------------------------------------------------------- Perl

@test
def perl_do_task(ctx):
    perl_worker(ctx, "rev", "rev")
    h.wait_workers(ctx.port, "rev")
    check_eq(perl_client(ctx, "do", "rev", "hello").strip(), "RESULT:olleh", "do_task")
    check_eq(perl_client(ctx, "do", "rev", "high one", "high").strip(), "RESULT:eno hgih",
             "do_task high")


@test
def perl_dispatch_background(ctx):
    log = ctx.path("log")
    out = perl_client(ctx, "bg", "bgperl", "bg-payload").strip()
    check(re.match(r"^127\.0\.0\.1:%d//H:[^\s:]*:\d+$" % ctx.port, out),
          "dispatch_background handle %r" % out)
    wait_queued(ctx, "bgperl", 1)
    w = perl_worker(ctx, "record", "bgperl", 1, log)
    check_eq(w.wait(15), 0, "worker exit")
    check_eq(read_lines(log), ["bg-payload"], "background job ran")
    wait_queued(ctx, "bgperl", 0)


@test
def perl_taskset(ctx):
    perl_worker(ctx, "upper", "up")
    h.wait_workers(ctx.port, "up")
    out = perl_client(ctx, "taskset", "up", "alpha", "beta", "gamma").splitlines()
    check_eq(out, ["alpha=ALPHA", "beta=BETA", "gamma=GAMMA"], "task set results")


@test
def perl_register_several_functions(ctx):
    perl_worker(ctx, "multi", "revp,upperp")
    h.wait_workers(ctx.port, "revp")
    h.wait_workers(ctx.port, "upperp")
    workers = h.admin(ctx.port, "workers").splitlines()
    check(any(re.match(r"^\d+ 127\.0\.0\.1 perl-multi : (upperp revp|revp upperp)$", line)
              for line in workers), "workers listing %r" % workers)
    check_eq(perl_client(ctx, "do", "revp", "abc").strip(), "RESULT:cba", "revp")
    check_eq(perl_client(ctx, "do", "upperp", "abc").strip(), "RESULT:ABC", "upperp")


# ---------------------------------------------------------------- mixed

@test
def mixed_php_client_perl_worker(ctx):
    perl_worker(ctx, "rev", "mix")
    h.wait_workers(ctx.port, "mix")
    check_eq(php_client(ctx, "do", "normal", "mix", "php->perl").strip(), "RESULT:lrep>-php",
             "php client, perl worker")
    out = php_client(ctx, "tasks", "mix", "ab", "cd").splitlines()
    check_eq(out, ["ab=ba", "cd=dc"], "php tasks, perl worker")


@test
def mixed_perl_client_php_worker(ctx):
    php_worker(ctx, "upper", "mix")
    h.wait_workers(ctx.port, "mix")
    check_eq(perl_client(ctx, "do", "mix", "perl->php").strip(), "RESULT:PERL->PHP",
             "perl client, php worker")
    out = perl_client(ctx, "taskset", "mix", "x", "y").splitlines()
    check_eq(out, ["x=X", "y=Y"], "perl taskset, php worker")


@test
def mixed_cli_client_php_worker(ctx):
    php_worker(ctx, "rev", "mix")
    h.wait_workers(ctx.port, "mix")
    check_eq(cli_client(ctx, "mix", "cli->php"), "php>-ilc", "gearman CLI client, php worker")


@test
def mixed_php_background_cli_worker(ctx):
    php_client(ctx, "bg", "mixbg", "normal:one", "normal:two")
    wait_queued(ctx, "mixbg", 2)
    w = cli_worker(ctx, "mixbg", extra=["-c", "2"])
    check_eq(w.wait(15), 0, "worker exit")
    check_eq(w.stdout(), "onetwo", "CLI worker ran the PHP background jobs in order")


# ---------------------------------------------------------------- scheduling

@test
def priority_order_php(ctx):
    log = ctx.path("log")
    specs = ["low:L1", "normal:N1", "high:H1", "low:L2", "normal:N2", "high:H2",
             "normal:N3", "low:L3", "high:H3"]
    handles = php_client(ctx, "bg", "ordered", *specs).split()
    check(len(handles) == 9 and len(set(handles)) == 9, "9 distinct handles: %r" % handles)
    ps = h.parse_priority_status(h.admin(ctx.port, "prioritystatus"))
    check_eq(ps.get("ordered"), (3, 3, 3, 0), "prioritystatus before the worker starts")
    w = php_worker(ctx, "record", "ordered", 9, log)
    check_eq(w.wait(20), 0, "worker exit")
    check_eq(read_lines(log), ["H1", "H2", "H3", "N1", "N2", "N3", "L1", "L2", "L3"],
             "high first, then normal, then low; FIFO within a priority")


@test
def worker_killed_mid_job(ctx):
    log = ctx.path("log")
    client = php_client_bg(ctx, "do", "normal", "fragile", "survive")
    wait_for(lambda: h.status(ctx.port).get("fragile", (0,))[0] == 1, 10, "job queued")
    w1 = php_worker(ctx, "hang", "fragile", 0, log)
    wait_lines(log, 1, desc="first worker picked the job")
    check_eq(h.status(ctx.port).get("fragile"), (1, 1, 1), "job running on worker 1")
    w1.kill()  # SIGKILL the worker process we started, mid-job
    w1.wait(5)
    wait_for(lambda: h.status(ctx.port).get("fragile") == (1, 0, 0), 10,
             "job requeued after the worker died")
    php_worker(ctx, "rev", "fragile")
    check_eq(client.wait(20), 0, "client exit")
    check_eq(client.stdout().strip(), "RESULT:evivrus", "client got the second worker's result")
    wait_for(lambda: h.status(ctx.port).get("fragile", (0,))[0] == 0, 10, "job finished")


if __name__ == "__main__":
    sys.exit(h.run_suite("interop", TESTS))
