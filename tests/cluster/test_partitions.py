#!/usr/bin/env python3
"""The cluster suite's tests of partitioned nodes (`--partitioned`): every
node owns a share of the partitions, each function lives in one, and a
connection stays on the node it reached while its packets go to their
partition's owner. Run by test_cluster.py, whose cluster helpers they use.
"""

import os
import signal
import subprocess
import sys
import threading
import time
import json
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(ROOT, "tests", "interop"))

import harness as h  # noqa: E402
from harness import check, check_eq  # noqa: E402
from test_cluster import CLIENTS, grab, http_get, raw_worker, submit_bg, with_cluster  # noqa: E402

PARTS = 64
MASK = (1 << 64) - 1


def partition_of(func):
    """The partition a function lives in (gearshift_core::placement)."""
    x = 0xcbf29ce484222325
    for b in func.encode():
        x = ((x ^ b) * 0x100000001b3) & MASK
    x ^= x >> 33
    x = (x * 0xff51afd7ed558ccd) & MASK
    x ^= x >> 33
    x = (x * 0xc4ceb9fe1a85ec53) & MASK
    x ^= x >> 33
    return x % PARTS


def owners(cl):
    """Live partition -> owning node, from the database."""
    rows = cl.pg.sql("SELECT partition, node FROM gearshift_partitions "
                     "WHERE node IS NOT NULL AND expires_at >= now()")
    return {int(r[0]): r[1] for r in rows if r and r[1]}


def start(cl, names):
    """Starts partitioned nodes and waits until they share every partition."""
    for n in names:
        cl.start(n, extra="--partitioned")
    shared_by(cl, sorted(cl.nodes))


def shared_by(cl, names, timeout=30):
    """Waits until `names` share every partition evenly, and every node's
    own view (refreshed by its beats) says so."""
    def even():
        got = owners(cl)
        counts = [sum(1 for o in got.values() if o == n) for n in names]
        return len(got) == PARTS and set(got.values()) == set(names) \
            and max(counts) - min(counts) <= 1
    h.wait_for(even, timeout, "the partitions shared by %s" % names)
    want = owners(cl)

    def seen_everywhere():
        for n in names:
            try:
                view = http_get(cl.http_port(n), "/api/v1/cluster").get("partitions", [])
            except OSError:  # its job server is starting again
                return False
            if {p["partition"]: p["node"] for p in view} != want:
                return False
        return True
    h.wait_for(seen_everywhere, timeout, "every node's view of the partitions")


def functions_on(cl, per_node, prefix="f"):
    """`per_node` function names owned by each node, by node."""
    own = owners(cl)
    out = {n: [] for n in cl.nodes}
    i = 0
    while any(len(v) < per_node for v in out.values()):
        f = "%s%d" % (prefix, i)
        i += 1
        node = own.get(partition_of(f))
        if node in out and len(out[node]) < per_node:
            out[node].append(f)
    return out


@with_cluster
def test_partitions_spread(cl):
    start(cl, ["a", "b", "c"])
    got = owners(cl)
    counts = sorted(sum(1 for o in got.values() if o == n) for n in "abc")
    check_eq(counts, [21, 21, 22], "partitions per node")
    view = http_get(cl.http_port("b"), "/api/v1/cluster")
    check_eq(view.get("mode"), "partitioned", "cluster mode")
    check_eq(len(view.get("partitions", [])), PARTS, "partitions in the cluster view")
    check(all(p["node"] in ("a", "b", "c") for p in view["partitions"]),
          "every partition has an owner: %r" % view["partitions"][:5])


@with_cluster
def test_worker_gets_every_partition_in_priority_order(cl):
    start(cl, ["a", "b", "c"])
    funcs = [f for fs in functions_on(cl, 4).values() for f in fs]
    a, b = cl.nodes["a"], cl.nodes["b"]
    c = h.Conn(a.port)
    kinds = ((h.SUBMIT_JOB_LOW_BG, "low"), (h.SUBMIT_JOB_BG, "normal"),
             (h.SUBMIT_JOB_HIGH_BG, "high"))
    for f in funcs:
        for kind, name in kinds:
            c.send_pkt(kind, f, "%s-%s" % (f, name), name)
            c.expect_pkt(h.JOB_CREATED)
    c.close()
    w = raw_worker(b.port, *funcs)
    got = {}
    for _ in range(len(funcs) * 3):
        job = grab(w)
        check(job is not None, "a job for every submission (got %d)" % sum(map(len, got.values())))
        got.setdefault(job[1].decode(), []).append(job[2].decode())
        w.send_pkt(h.WORK_COMPLETE, job[0], "")
    check_eq(grab(w), None, "nothing more")
    w.close()
    check_eq(sorted(got), sorted(funcs), "functions served")
    for f, order in got.items():
        check_eq(order, ["high", "normal", "low"], "priority order within %s" % f)


@with_cluster
def test_foreground_across_nodes(cl):
    start(cl, ["a", "b", "c"])
    by_node = functions_on(cl, 1, prefix="fg")
    fa, fb = by_node["a"][0], by_node["b"][0]
    stop = threading.Event()

    def work():
        w = raw_worker(cl.nodes["a"].port, fa, fb)
        while not stop.is_set():
            try:
                job = grab(w, timeout=2)
            except h.TestFailure:
                break
            if job is None:
                time.sleep(0.01)
                continue
            handle, _, data = job
            w.send_pkt(h.WORK_DATA, handle, b"part-" + data)
            w.send_pkt(h.WORK_STATUS, handle, "1", "2")
            w.send_pkt(h.WORK_COMPLETE, handle, b"done-" + data)
        w.close()
    t = threading.Thread(target=work, daemon=True)
    t.start()
    try:
        h.wait_workers(cl.nodes["a"].port, fa)
        h.wait_workers(cl.nodes["b"].port, fb)
        c = h.Conn(cl.nodes["c"].port)
        # Pipelined to two owners: JOB_CREATED in submission order.
        jobs = [(fa, "x1"), (fb, "x2"), (fa, "x3"), (fb, "x4")]
        for f, data in jobs:
            c.send_pkt(h.SUBMIT_JOB, f, "", data)
        handles, seen = [], {}

        def complete():
            return len(handles) == len(jobs) and all(
                any(e[0] == h.WORK_COMPLETE for e in seen.get(hd, [])) for hd in handles)
        while not complete():
            _, t_, body = c.read_pkt(timeout=10)
            if t_ == h.JOB_CREATED:
                handles.append(body)
                continue
            handle = body.split(b"\0", 1)[0]
            check(handle in handles, "an event for a created job: %r" % body)
            seen.setdefault(handle, []).append((t_, body))
        for (f, data), handle in zip(jobs, handles):
            kinds = [e[0] for e in seen[handle]]
            check_eq(kinds, [h.WORK_DATA, h.WORK_STATUS, h.WORK_COMPLETE],
                     "events of %s" % data)
            check_eq(seen[handle][-1][1], handle + b"\0done-" + data.encode(),
                     "the result of %s reached its submitter" % data)
        c.close()
    finally:
        stop.set()
        t.join(timeout=10)


@with_cluster
def test_nodes_with_one_two_and_three_io_threads(cl):
    # One I/O thread runs on the router's thread; two and three run on their
    # own (three with a router thread each). Jobs cross all of them.
    for n, threads in (("a", 1), ("b", 2), ("c", 3)):
        cl.start(n, extra="--partitioned --io-threads %d" % threads)
    shared_by(cl, ["a", "b", "c"])

    def io_threads(n):
        task = "/proc/%d/task" % cl.nodes[n].pid
        names = [open(os.path.join(task, t, "comm")).read().strip() for t in os.listdir(task)]
        return sorted(x for x in names if x.startswith("gearshift-io"))
    check_eq(io_threads("a"), [], "a's I/O runs on its router thread")
    check_eq(io_threads("b"), ["gearshift-io-0", "gearshift-io-1"], "b's I/O threads")
    by_node = functions_on(cl, 1, prefix="io")
    funcs = [by_node[n][0] for n in ("a", "b", "c")]
    for worker_on, client_on in (("a", "c"), ("c", "b"), ("b", "a")):
        w = raw_worker(cl.nodes[worker_on].port, *funcs)
        c = h.Conn(cl.nodes[client_on].port)
        try:
            for f in funcs:
                h.wait_workers(cl.nodes[client_on].port, f)
                data = ("%s-%s" % (worker_on, client_on)).encode()
                c.send_pkt(h.SUBMIT_JOB, f, "", data)
                handle = c.expect_pkt(h.JOB_CREATED)
                job = grab(w)
                check(job is not None and job[0] == handle and job[1] == f.encode(),
                      "worker on %s got %r for %s" % (worker_on, job, f))
                w.send_pkt(h.WORK_COMPLETE, handle, b"done-" + data)
                got = c.expect_pkt(h.WORK_COMPLETE)
                check_eq(got, handle + b"\0done-" + data, "result of %s" % f)
        finally:
            w.close()
            c.close()


@with_cluster
def test_admin_answers_for_the_whole_cluster(cl):
    start(cl, ["a", "b", "c"])
    by_node = functions_on(cl, 1, prefix="adm")
    fa, fb, fc = by_node["a"][0], by_node["b"][0], by_node["c"][0]
    port = {n: cl.nodes[n].port for n in "abc"}
    c = h.Conn(port["c"])
    handles = {}
    for f in (fa, fb, fc):
        c.send_pkt(h.SUBMIT_JOB_BG, f, "u-" + f, "x")
        handles[f] = c.expect_pkt(h.JOB_CREATED).decode()
    c.close()
    w3 = raw_worker(port["b"], fa, fb, fc)
    for n in "abc":
        st = h.parse_status(h.admin(port[n], "status"))
        check_eq({f: st.get(f) for f in (fa, fb, fc)},
                 {fa: (1, 0, 1), fb: (1, 0, 1), fc: (1, 0, 1)}, "status on %s" % n)
        jobs = h.admin(port[n], "show jobs")
        check(all(handles[f] in jobs for f in handles), "show jobs on %s: %r" % (n, jobs))
        check(jobs.endswith("\n.\n") and jobs.count(".\n") == 1, "one list end: %r" % jobs)
        # One line for the worker, though each owner has a sub-connection.
        workers = h.admin(port[n], "workers")
        mine = [line for line in workers.split("\n") if " : " in line
                and set(line.split(" : ", 1)[1].split()) & {fa, fb, fc}]
        check(len(mine) == 1 and set(mine[0].split(" : ", 1)[1].split()) == {fa, fb, fc},
              "the worker on b in workers on %s: %r" % (n, workers))
        job = h.admin(port[n], "show job " + handles[fb])
        check(not job.startswith("ERR") and handles[fb] in job, "show job on %s: %r" % (n, job))
    w3.close()
    w = raw_worker(port["b"], fa)
    # A pause sent to any node holds where the function lives.
    check_eq(h.admin(port["c"], "pause " + fa), "OK\r\n", "pause through c")
    check_eq(grab(w), None, "a paused function hands out nothing")
    check_eq(h.admin(port["b"], "resume " + fa), "OK\r\n", "resume through b")
    job = grab(w)
    check(job is not None and job[1].decode() == fa, "the job after resume: %r" % (job,))
    w.send_pkt(h.WORK_COMPLETE, job[0], "")
    w.close()
    # A handle finds its owner from any node; unknown ones stay unknown.
    check_eq(h.admin(port["a"], "cancel job " + handles[fc]), "OK\r\n", "cancel through a")
    check_eq(h.admin(port["a"], "cancel job H:nowhere:1"), "ERR UNKNOWN_JOB\r\n",
             "cancel of an unknown handle")
    check_eq(h.admin(port["b"], "maxqueue %s 5" % fc), "OK\r\n", "maxqueue through b")
    h.wait_for(lambda: h.parse_status(h.admin(port["b"], "status")).get(fc, (0,))[0] == 0,
               10, "the cancelled job gone from status")


def http_text(port, path):
    with urllib.request.urlopen("http://127.0.0.1:%d%s" % (port, path), timeout=10) as r:
        return r.read().decode()


@with_cluster
def test_http_api_answers_for_the_whole_cluster(cl):
    start(cl, ["a", "b", "c"])
    by_node = functions_on(cl, 1, prefix="api")
    fa, fb, fc = by_node["a"][0], by_node["b"][0], by_node["c"][0]
    c = h.Conn(cl.nodes["c"].port)
    handles = {}
    for f in (fa, fb, fc):
        c.send_pkt(h.SUBMIT_JOB_BG, f, "u-" + f, "x")
        handles[f] = c.expect_pkt(h.JOB_CREATED).decode()
    c.close()
    w = raw_worker(cl.nodes["b"].port, fa, fb, fc)
    for n in "abc":
        port = cl.http_port(n)
        placed = {f["name"]: (f["partition"], f["node"])
                  for f in http_get(port, "/api/v1/functions")["functions"]}
        check({fa, fb, fc} <= set(placed), "functions on %s: %r" % (n, placed))
        for owner, f in (("a", fa), ("b", fb), ("c", fc)):
            check_eq(placed[f], (partition_of(f), owner), "%s's partition and node on %s" % (f, n))
        over = http_get(port, "/api/v1/overview")
        check_eq(over["totals"]["queued"], 3, "queued jobs in the overview on %s" % n)
        # One worker connection, though it has a sub-connection on each owner.
        check_eq(over["connections"]["worker"], 1, "worker connections on %s" % n)
        check_eq(over["unreachable"], [], "every node answered on %s" % n)
        check_eq(over["store"], {"failures": 0, "last_failure_ms": None, "refused": 0},
                 "the stores' health in the overview on %s" % n)
        # The worker has a sub-connection on each owner: listed once.
        workers = [wk for wk in http_get(port, "/api/v1/workers")["workers"]
                   if set(wk["functions"]) & {fa, fb, fc}]
        check_eq(len(workers), 1, "entries of the worker on %s: %r" % (n, workers))
        check_eq(sorted(workers[0]["functions"]), sorted([fa, fb, fc]),
                 "the worker's functions on %s" % n)
        metrics = http_text(port, "/metrics")
        for f in (fa, fb, fc):
            line = 'gearshift_jobs_queued{function="%s",priority="normal"} 1\n' % f
            check(line in metrics, "%s's queue in %s's /metrics" % (f, n))
        check('gearshift_cluster_scrape_nodes{state="answered"} 3\n' in metrics,
              "three nodes in %s's /metrics" % n)
        own = http_text(port, "/metrics?scope=node")
        others = [f for f in (fa, fb, fc) if f != by_node[n][0]]
        check(all('function="%s"' % f not in own for f in others),
              "only %s's own functions with scope=node" % n)
        h.wait_for(lambda: sum(s["submitted"] for s in
                               http_get(port, "/api/v1/overview")["series"]) >= 3,
                   5, "every node's submissions in %s's chart" % n)
        job = http_get(port, "/api/v1/jobs/" + handles[fb])
        check_eq(job.get("handle"), handles[fb], "a job on another node, asked on %s" % n)
        # Pages of two, cursor to cursor, list every node's jobs once.
        seen, cursor = [], None
        for _ in range(10):
            page = http_get(port, "/api/v1/jobs?limit=2" + ("&cursor=" + cursor if cursor else ""))
            check(len(page["jobs"]) <= 2, "a page of at most two: %r" % page)
            seen += [j["handle"] for j in page["jobs"]]
            cursor = page["next_cursor"]
            if cursor is None:
                break
        check_eq(sorted(seen), sorted(handles.values()), "every job once, paged on %s" % n)
    # Node a's event stream carries c's events too.
    stream = urllib.request.urlopen("http://127.0.0.1:%d/api/v1/events?kinds=created,stats"
                                    % cl.http_port("a"), timeout=10)
    got, deadline = None, time.monotonic() + 10
    sub = h.Conn(cl.nodes["b"].port)
    event = None
    while got is None and time.monotonic() < deadline:
        sub.send_pkt(h.SUBMIT_JOB_BG, fc, "", "ev")
        sub.expect_pkt(h.JOB_CREATED)
        t_end = time.monotonic() + 0.5
        while time.monotonic() < t_end:
            line = stream.readline().decode().strip()
            if line.startswith("event:"):
                event = line.split(":", 1)[1].strip()
            elif line.startswith("data:") and event == "created" and fc in line:
                got = json.loads(line[5:])
                break
    sub.close()
    stream.close()
    check(got is not None, "a created event of c's function on a's stream")
    check_eq(got["function"], fc, "the event's function")
    req = urllib.request.Request("http://127.0.0.1:%d/api/v1/functions/%s/pause"
                                 % (cl.http_port("a"), fc), data=b"", method="POST")
    with urllib.request.urlopen(req, timeout=10) as r:
        body = json.loads(r.read().decode())
    check_eq(body.get("paused"), True, "a pause through a of c's function")
    check(fc in h.admin(cl.nodes["c"].port, "status"), "c's status lists its function")
    paused = [f for f in http_get(cl.http_port("c"), "/api/v1/functions")["functions"]
              if f["name"] == fc]
    check(paused and paused[0].get("paused") is True, "paused where it lives: %r" % paused)
    w.close()


@with_cluster
def test_sleeping_worker_woken_from_another_node(cl):
    start(cl, ["a", "b", "c"])
    f = functions_on(cl, 1, prefix="wake")["b"][0]
    w = raw_worker(cl.nodes["a"].port, f)
    check_eq(grab(w), None, "nothing queued yet")
    w.send_pkt(h.PRE_SLEEP)
    time.sleep(0.2)
    t0 = time.monotonic()
    c = h.Conn(cl.nodes["c"].port)
    c.send_pkt(h.SUBMIT_JOB_BG, f, "", "wake")
    c.expect_pkt(h.JOB_CREATED)
    w.expect_pkt(h.NOOP, timeout=2)
    check(time.monotonic() - t0 < 2, "woken within 2 s")
    job = grab(w)
    check(job is not None and job[2] == b"wake", "the job after the NOOP: %r" % (job,))
    w.close()
    c.close()


@with_cluster
def test_php_and_perl_across_partitioned_nodes(cl):
    start(cl, ["a", "b", "c"])
    for lang, worker, client in (("perl", "worker.pl", "client.php"),
                                 ("php", "worker.php", "client.pl")):
        # A function owned by a, a worker on c, a client on b.
        func = next("rev_%s%d" % (lang, i) for i in range(1000)
                    if owners(cl).get(partition_of("rev_%s%d" % (lang, i))) == "a")
        wcmd = (["perl"] if worker.endswith(".pl") else ["php"]) + [
            os.path.join(CLIENTS, worker), str(cl.nodes["c"].port), "rev", func, "0"]
        wp = subprocess.Popen(wcmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                              start_new_session=True)
        try:
            h.wait_workers(cl.nodes["a"].port, func)
            if client.endswith(".pl"):
                ccmd = ["perl", os.path.join(CLIENTS, client), str(cl.nodes["b"].port), "do",
                        func, "cluster"]
            else:
                ccmd = ["php", os.path.join(CLIENTS, client), str(cl.nodes["b"].port), "do",
                        "normal", func, "cluster"]
            r = h.run(ccmd, timeout=30)
            check(r.returncode == 0 and "RESULT:retsulc" in r.stdout,
                  "%s via b, %s worker on c, owner a: %r %r"
                  % (client, worker, r.stdout, r.stderr))
        finally:
            os.killpg(wp.pid, signal.SIGKILL)
            wp.wait(timeout=10)


def lang_cmd(script):
    return ["perl" if script.endswith(".pl") else "php", os.path.join(CLIENTS, script)]


@with_cluster
def test_five_nodes_php_perl(cl):
    names = ["a", "b", "c", "d", "e"]
    start(cl, names)
    got = owners(cl)
    counts = {n: sum(1 for o in got.values() if o == n) for n in names}
    check_eq(sorted(counts.values()), [12, 13, 13, 13, 13], "partitions per node: %r" % counts)
    by_node = functions_on(cl, 2, prefix="pp")
    # A Perl worker on a for functions owned by b, c, d and e; a PHP worker
    # on e for functions owned by a, b, c and d.
    perl_funcs = [by_node[n][0] for n in "bcde"]
    php_funcs = [by_node[n][1] for n in "abcd"]
    workers = [subprocess.Popen(lang_cmd("worker.pl") + [str(cl.nodes["a"].port), "rev",
                                                        ",".join(perl_funcs), "0"],
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                start_new_session=True),
               subprocess.Popen(lang_cmd("worker.php") + [str(cl.nodes["e"].port), "rev",
                                                         ",".join(php_funcs), "0"],
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                start_new_session=True)]
    try:
        for f in perl_funcs + php_funcs:
            h.wait_workers(cl.nodes[got[partition_of(f)]].port, f)
        # Each function's client on a node that is neither its worker's
        # nor its owner's; Perl and PHP clients by turns, all at once.
        runs = []
        for i, f in enumerate(perl_funcs + php_funcs):
            owner = got[partition_of(f)]
            wnode = "a" if f in perl_funcs else "e"
            cnode = [n for n in names if n not in (owner, wnode)][i % 3]
            data = ["%s-%d" % (f, k) for k in range(6)]
            if i % 2:
                cmd = lang_cmd("client.pl") + [str(cl.nodes[cnode].port), "taskset", f] + data
            else:
                cmd = lang_cmd("client.php") + [str(cl.nodes[cnode].port), "tasks", f] + data
            p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                 text=True, start_new_session=True)
            runs.append((f, owner, wnode, cnode, cmd[0], data, p))
        for f, owner, wnode, cnode, lang, data, p in runs:
            try:
                out, err = p.communicate(timeout=40)
            except subprocess.TimeoutExpired:
                os.killpg(p.pid, signal.SIGKILL)
                out, err = p.communicate()
            want = "".join("%s=%s\n" % (d, d[::-1]) for d in data)
            check(p.returncode == 0 and out == want,
                  "%s client on %s, %s owned by %s, worker on %s: rc %s %r %r"
                  % (lang, cnode, f, owner, wnode, p.returncode, out, err))
    finally:
        for wp in workers:
            os.killpg(wp.pid, signal.SIGKILL)
            wp.wait(timeout=10)


@with_cluster
def test_the_two_modes_do_not_mix(cl):
    start(cl, ["a"])
    r = h.run([GEARSHIFT_BIN(), "serve", "-L", "127.0.0.1", "-p", "0", "--store", cl.url,
               "--node-name", "x", "--node-timeout", "%dms" % cl.timeout_ms], timeout=30)
    check(r.returncode != 0 and "--partitioned" in r.stderr + r.stdout,
          "a leader-mode node refused beside partitioned ones: %r %r" % (r.stdout, r.stderr))


@with_cluster
def test_a_join_moves_partitions_in_place(cl):
    """A node that gives partitions up to a joining node keeps serving the
    others meanwhile: a job running in a kept partition neither holds the
    move up nor is cut off, and submissions to kept partitions are answered
    at once during the join (a restart of the job server would wait for
    that job, refusing them, and then cut it off)."""
    start(cl, ["a", "b"])
    own = owners(cl)
    mine = sorted(p for p, n in own.items() if n == "a")
    kept = []
    i = 0
    while len(kept) < 2:  # two functions in a's lowest partitions, which it keeps
        f = "inplace%d" % i
        i += 1
        if partition_of(f) in mine[:4]:
            kept.append(f)
    held_f, busy_f = kept
    # Queued jobs over many partitions and a worker for them, so some move
    # to c with a worker's ability behind them.
    spread = ["spread%d" % i for i in range(24)]
    for f in spread:
        submit_bg(cl.nodes["a"].port, f, "s-" + f, "")
    spread_w = raw_worker(cl.nodes["b"].port, *spread)
    handle = submit_bg(cl.nodes["b"].port, held_f, "held", "x")
    w = raw_worker(cl.nodes["b"].port, held_f)
    got = grab(w)
    check(got is not None and got[0] == handle, "the held job: %r" % (got,))
    t0 = time.monotonic()
    cl.start("c", extra="--partitioned")
    slowest, n = 0.0, 0
    joiners = []  # workers that say CAN_DO while partitions move
    while True:
        t = time.monotonic()
        submit_bg(cl.nodes["b"].port, busy_f, "busy%d" % n, "")
        joiners.append(raw_worker(cl.nodes["a" if n % 2 else "b"].port, *spread))
        slowest, n = max(slowest, time.monotonic() - t), n + 1
        o = owners(cl)
        if len(o) == PARTS and "c" in o.values() and \
                max(sum(1 for x in o.values() if x == m) for m in "abc") <= 22:
            break
        check(time.monotonic() - t0 < 30, "c to get its share")
        time.sleep(0.01)
    took = time.monotonic() - t0
    shared_by(cl, ["a", "b", "c"])
    check_eq(owners(cl)[partition_of(held_f)], "a", "a kept the held job's partition")
    check(took < 8, "the join done in %.1f s, without waiting for the held job" % took)
    check(slowest < 2, "submissions to a kept partition answered during the join "
          "(slowest %.2f s of %d)" % (slowest, n))
    w.send_pkt(h.WORK_COMPLETE, handle, b"")
    w.echo_sync()
    h.wait_for(lambda: cl.pg.sql("SELECT count(*) FROM gearshift_jobs WHERE unique_id = 'held'")
               [0][0] == "0", 10, "the held job's completion stored")
    w.close()
    # Each function is listed once, by its owner, in every node's answer.
    moved_away = [f for f in spread if owners(cl)[partition_of(f)] == "c"]
    check(moved_away, "some spread functions moved to c")
    for node in "abc":
        def listed():
            fs = http_get(cl.http_port(node), "/api/v1/functions")["functions"]
            return sorted((f["name"], f["queued"]["normal"], f["workers"]) for f in fs
                          if f["name"] in spread)
        want = [(f, 1, 1 + len(joiners)) for f in sorted(spread)]
        h.wait_for(lambda: listed() == want, 10,
                   "each spread function once on %s" % node)
        st = h.admin(cl.nodes[node].port, "status")
        lines = [l.split("\t")[0] for l in st.split("\n") if l.split("\t")[0] in spread]
        check_eq(sorted(lines), sorted(spread), "status lines on %s" % node)
    spread_w.close()
    for j in joiners:
        j.close()
    # a's job server ran throughout: started once, some partitions handed over.
    metrics = http_text(cl.http_port("a"), "/metrics?scope=node")
    check("gearshift_cluster_owner_starts_total 1\n" in metrics,
          "a's job server started once: %r" % [l for l in metrics.splitlines() if "starts" in l])
    moved = [l for l in metrics.splitlines()
             if l.startswith('gearshift_cluster_partitions_moved_total{way="handed_over"}')]
    check(moved and int(moved[0].split()[-1]) >= 10, "a handed partitions over: %r" % moved)
    print("   join in %.1f s; %d submissions meanwhile, slowest %.3f s" % (took, n, slowest),
          flush=True)


@with_cluster
def test_config_schedules_live_with_their_partitions(cl):
    """Every node starts with the same config file: each installs the
    schedules of the functions it owns, so every node serves and each
    schedule is listed (and fires) once in the cluster; after a join the
    schedules of the partitions given up live on their new owner, and a
    reload (SIGHUP) puts a new one in force on its owner only."""
    import tempfile
    names = ["sched%d" % i for i in range(6)]
    conf = tempfile.NamedTemporaryFile("w", suffix=".toml", delete=False)
    for f in names:
        conf.write('[[schedule]]\ncron = "0 0 1 1 *"\nfunction = "%s"\nworkload = "x"\n\n' % f)
    conf.close()
    for n in ["a", "b"]:
        cl.start(n, extra="--partitioned --config %s" % conf.name)
    shared_by(cl, ["a", "b"])
    by_node = functions_on(cl, 1, prefix="served")

    def listed():
        lines = h.admin(cl.nodes["a"].port, "show schedules").splitlines()
        return sorted(l.split("\t")[1] for l in lines if "\t" in l)
    h.wait_for(lambda: listed() == names, 10, "each config schedule listed once: %r" % listed())
    for node, fs in by_node.items():
        w = raw_worker(cl.nodes["a"].port, fs[0])
        handle = submit_bg(cl.nodes["b"].port, fs[0], "", "x")
        got = grab(w)
        check(got is not None and got[0] == handle, "a job of %s's function done" % node)
        w.close()
    cl.start("c", extra="--partitioned --config %s" % conf.name)
    shared_by(cl, ["a", "b", "c"])
    h.wait_for(lambda: listed() == names, 10, "still once each after the join: %r" % listed())
    rows = cl.pg.sql("SELECT count(*) FROM gearshift_schedules")
    check_eq(rows[0][0], str(len(names)), "stored schedules")
    # A reload (SIGHUP on every node) adds one, installed by its owner only.
    with open(conf.name, "a") as f:
        f.write('[[schedule]]\ncron = "0 0 1 1 *"\nfunction = "sched6"\nworkload = "x"\n')
    for node in cl.nodes.values():
        os.kill(node.pid, signal.SIGHUP)
    names = sorted(names + ["sched6"])
    h.wait_for(lambda: listed() == names, 10, "the reloaded schedule listed once: %r" % listed())
    os.unlink(conf.name)


def GEARSHIFT_BIN():
    import test_cluster
    return test_cluster.GEARSHIFT


TESTS = [test_the_two_modes_do_not_mix, test_partitions_spread, test_worker_gets_every_partition_in_priority_order,
         test_foreground_across_nodes, test_nodes_with_one_two_and_three_io_threads,
         test_admin_answers_for_the_whole_cluster,
         test_http_api_answers_for_the_whole_cluster,
         test_sleeping_worker_woken_from_another_node,
         test_php_and_perl_across_partitioned_nodes, test_five_nodes_php_perl,
         test_a_join_moves_partitions_in_place, test_config_schedules_live_with_their_partitions]
