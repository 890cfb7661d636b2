"""A Gearshift cluster: several `gearshift serve` nodes on one PostgreSQL.

Starts a throwaway PostgreSQL cluster (as the import suite does) and
Gearshift nodes on port 0 with the same `--store`, then checks, with raw
packets and real PHP and Perl clients and workers spread over the nodes:
jobs submitted on one node run on workers of another, foreground results
come back through the relays, unique ids coalesce and admin `status`,
`show job` and the HTTP API agree on every node; a leader killed with
SIGKILL is replaced within `--node-timeout` and its acknowledged jobs run;
a leader frozen past its lease (SIGSTOP) is fenced when it wakes up; and a
seeded chaos run kills the leader under load, several rounds, losing no
acknowledged job and running no job again unless its run was cut off.

Python 3 stdlib only; reuses tests/interop/harness.py and the import
suite's PostgreSQL helper. Every wait is bounded. Ends with
`N passed, N failed, N skipped`.

usage: python3 tests/cluster/test_cluster.py [name-substring ...]
  GEARSHIFT  the gearshift binary (default: target/debug/gearshift)
  PG_BIN     PostgreSQL's server programs (default: the newest
             /usr/lib/postgresql/*/bin)
  CHAOS_SEED the chaos tests' seed (default: 19 for the leader-mode one,
             random and printed for test_seeded_chaos_partitioned);
             CHAOS_ROUNDS (default 4); CHAOS_SECONDS, the partitioned chaos
             run's length (default 40)
"""

import json
import os
import random
import signal
import subprocess
import sys
import threading
import time
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(ROOT, "tests", "interop"))
sys.path.insert(0, os.path.join(ROOT, "tests", "import"))

import harness as h  # noqa: E402
from harness import check, check_eq  # noqa: E402
from test_import import Postgres  # noqa: E402

GEARSHIFT = os.environ.get("GEARSHIFT") or os.path.join(ROOT, "target", "debug", "gearshift")
CLIENTS = os.path.join(ROOT, "tests", "interop", "clients")
TIMEOUT_MS = 1000


class Cluster:
    """Nodes sharing one database, started and killed by name."""

    def __init__(self, pg, timeout_ms=TIMEOUT_MS):
        self.pg = pg
        self.url = "postgres://gearshift@127.0.0.1:%d/postgres" % pg.port
        self.timeout_ms = timeout_ms
        self.nodes = {}

    def start(self, name, wait_leader=False, extra=""):
        cmd = ("%s serve -L 127.0.0.1 -p {port} --http 127.0.0.1:0 --store %s "
               "--node-name %s --node-timeout %dms --verbose INFO %s"
               % (GEARSHIFT, self.url, name, self.timeout_ms, extra))
        node = h.Server(cmd, "node-" + name).start(ready_timeout=30)
        self.nodes[name] = node
        if wait_leader:
            h.wait_for(lambda: self.leader() == name, 15, "node %s to lead" % name)
        return node

    def leader(self):
        rows = self.pg.sql("SELECT node FROM gearshift_leader WHERE expires_at >= now()")
        return rows[0][0] if rows and rows[0] and rows[0][0] else None

    def http_port(self, name):
        """The node's HTTP port, from the node table."""
        rows = self.pg.sql("SELECT http_addr FROM gearshift_nodes WHERE name = '%s'" % name)
        check(rows and rows[0][0], "node %s has no HTTP address" % name)
        return int(rows[0][0].rsplit(":", 1)[1])

    def kill(self, name, sig=signal.SIGKILL):
        node = self.nodes[name]
        os.kill(node.pid, sig)
        if sig == signal.SIGKILL:
            node.proc.wait(timeout=10)
            del self.nodes[name]

    def stop_all(self):
        for node in list(self.nodes.values()):
            try:
                os.kill(node.pid, signal.SIGCONT)
            except OSError:
                pass
            node.stop()
        self.nodes.clear()

    def logs(self):
        return "\n".join("--- %s\n%s" % (n, s.log_text()[-3000:]) for n, s in self.nodes.items())


def with_cluster(fn):
    def run(tmp):
        pg = Postgres(tmp).start()
        cluster = Cluster(pg)
        try:
            fn(cluster)
        except h.TestFailure as e:
            raise h.TestFailure("%s\n%s" % (e, cluster.logs()))
        finally:
            cluster.stop_all()
            pg.stop()
    run.__name__ = fn.__name__
    return run


def raw_worker(port, *funcs):
    w = h.Conn(port, timeout=10)
    for f in funcs:
        w.send_pkt(h.CAN_DO, f)
    w.echo_sync()
    return w


def grab(w, timeout=5.0):
    """(handle, func, data), or None on NO_JOB."""
    w.send_pkt(h.GRAB_JOB)
    while True:
        _, t, body = w.read_pkt(timeout=timeout)
        if t == h.NOOP:
            continue
        if t == h.NO_JOB:
            return None
        check(t == h.JOB_ASSIGN, "expected JOB_ASSIGN, got %s %r" % (h.PACKET_NAMES.get(t, t), body))
        handle, func, data = body.split(b"\0", 2)
        return handle, func, data


def work_jobs(w, go_on, on_job, nap=0.3):
    """While go_on(): grabs a job on worker connection `w` and hands it to
    on_job (which completes it); with none, PRE_SLEEP and up to `nap` s for
    the NOOP. A closed connection raises."""
    while go_on():
        job = grab(w, timeout=5)
        if job is None:
            w.send_pkt(h.PRE_SLEEP)
            try:
                w.expect_pkt(h.NOOP, timeout=nap)
            except h.TestFailure as e:
                if "closed" in str(e):
                    raise
            continue
        on_job(job)


def submit_bg(port, func, unique, data):
    c = h.Conn(port)
    try:
        c.send_pkt(h.SUBMIT_JOB_BG, func, unique, data)
        return c.expect_pkt(h.JOB_CREATED)
    finally:
        c.close()


def http_get(port, path):
    with urllib.request.urlopen("http://127.0.0.1:%d%s" % (port, path), timeout=10) as r:
        return json.loads(r.read().decode())


# --------------------------------------------------------------------------


@with_cluster
def test_jobs_cross_nodes(cl):
    a = cl.start("a", wait_leader=True)
    b = cl.start("b")
    c = cl.start("c")
    # A worker on c sleeps; a foreground client on b submits.
    w = raw_worker(c.port, "rev")
    w.send_pkt(h.PRE_SLEEP)
    h.wait_workers(b.port, "rev")
    client = h.Conn(b.port)
    client.send_pkt(h.SUBMIT_JOB, "rev", "", "hello")
    handle = client.expect_pkt(h.JOB_CREATED)
    w.expect_pkt(h.NOOP)
    got = grab(w)
    check(got is not None, "the worker on c got no job")
    check_eq(got, (handle, b"rev", b"hello"), "the job on c")
    w.send_pkt(h.WORK_DATA, handle, "part")
    w.send_pkt(h.WORK_STATUS, handle, "1", "2")
    w.send_pkt(h.WORK_COMPLETE, handle, "olleh")
    check_eq(client.expect_pkt(h.WORK_DATA), handle + b"\0part", "WORK_DATA on b")
    check_eq(client.expect_pkt(h.WORK_STATUS), handle + b"\0" + b"1\0" + b"2", "WORK_STATUS on b")
    check_eq(client.expect_pkt(h.WORK_COMPLETE), handle + b"\0olleh", "WORK_COMPLETE on b")
    client.close()
    w.close()
    # Priorities hold across nodes: low on a, normal on b, high on c; a
    # worker on b gets high, normal, low.
    for port, ptype, data in ((a.port, h.SUBMIT_JOB_LOW_BG, "low"),
                              (b.port, h.SUBMIT_JOB_BG, "normal"),
                              (c.port, h.SUBMIT_JOB_HIGH_BG, "high")):
        conn = h.Conn(port)
        conn.send_pkt(ptype, "prio", "", data)
        conn.expect_pkt(h.JOB_CREATED)
        conn.close()
    w = raw_worker(b.port, "prio")
    order = []
    for _ in range(3):
        job = grab(w)
        order.append(job[2])
        w.send_pkt(h.WORK_COMPLETE, job[0], "")
    check_eq(order, [b"high", b"normal", b"low"], "the order a worker got jobs from three nodes")
    w.close()
    # Unique ids coalesce across nodes.
    handles = [submit_bg(n.port, "later", "same-unique", "x") for n in (a, b, c)]
    check_eq(len(set(handles)), 1, "handles of one unique id submitted on three nodes")
    for i in range(3):
        submit_bg(b.port, "later", "u%d" % i, "x")
    # Every node shows the cluster's counts and finds the job by handle.
    for n in (a, b, c):
        check_eq(h.status(n.port).get("later"), (4, 0, 0), "status of 'later' on %d" % n.port)
        text = h.admin(n.port, "show job %s" % handles[0].decode())
        check("later" in text, "show job on port %d: %r" % (n.port, text))
        funcs = http_get(cl.http_port([k for k, v in cl.nodes.items() if v is n][0]),
                         "/api/v1/functions")
        rows = [f for f in funcs["functions"] if f["name"] == "later"]
        check(rows and sum(rows[0]["queued"].values()) == 4,
              "HTTP functions on %d: %r" % (n.port, funcs))
    # The members, with the workers each node relays, from any node.
    w = raw_worker(c.port, "later")
    w2 = raw_worker(a.port, "other")

    def members():
        got = http_get(cl.http_port("b"), "/api/v1/cluster")
        nodes = {n["name"]: (n["leader"], n["workers"]) for n in got["nodes"]}
        return got if nodes == {"a": (True, 1), "b": (False, 0), "c": (False, 1)} else None
    got = h.wait_for(members, 10, "the cluster view")
    check_eq(got["workers"], 2, "workers in total")
    # Pausing through a relaying node's HTTP pauses the cluster's function.
    req = urllib.request.Request("http://127.0.0.1:%d/api/v1/functions/later/pause"
                                 % cl.http_port("c"), method="POST", data=b"")
    with urllib.request.urlopen(req, timeout=10) as r:
        check_eq(r.status, 200, "pause through c")
    w.send_pkt(h.GRAB_JOB)
    check_eq(w.read_pkt()[1], h.NO_JOB, "a paused function's job")
    w.close()
    w2.close()


@with_cluster
def test_php_and_perl_across_nodes(cl):
    cl.start("a", wait_leader=True)
    b = cl.start("b")
    c = cl.start("c")
    for lang, worker, client in (("perl", "worker.pl", "client.php"),
                                 ("php", "worker.php", "client.pl")):
        func = "rev_" + lang
        wcmd = (["perl"] if worker.endswith(".pl") else ["php"]) + [
            os.path.join(CLIENTS, worker), str(c.port), "rev", func, "0"]
        wp = subprocess.Popen(wcmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                              start_new_session=True)
        try:
            h.wait_workers(b.port, func)
            if client.endswith(".pl"):
                ccmd = ["perl", os.path.join(CLIENTS, client), str(b.port), "do", func, "cluster"]
            else:
                ccmd = ["php", os.path.join(CLIENTS, client), str(b.port), "do", "normal", func,
                        "cluster"]
            r = h.run(ccmd, timeout=30)
            check(r.returncode == 0 and "RESULT:retsulc" in r.stdout,
                  "%s via b, %s worker on c: %r %r" % (client, worker, r.stdout, r.stderr))
        finally:
            wp.kill()
            wp.wait(timeout=10)


@with_cluster
def test_takeover_after_kill(cl):
    cl.start("a", wait_leader=True)
    b = cl.start("b")
    c = cl.start("c")
    handles = {submit_bg(b.port, "t", "k%d" % i, "d%d" % i) for i in range(40)}
    # An epoch job due after the takeover runs once, on the new leader.
    due = int(time.time()) + 3
    c_epoch = h.Conn(c.port)
    c_epoch.send_pkt(h.SUBMIT_JOB_EPOCH, "t", "later", str(due), "at")
    handles.add(c_epoch.expect_pkt(h.JOB_CREATED))
    c_epoch.close()
    w = raw_worker(c.port, "t")
    running = grab(w)
    check(running is not None, "no job to hold")
    # Its start reaches the store with the next group commit.
    h.wait_for(lambda: cl.pg.sql("SELECT count(*) FROM gearshift_running")[0][0] == "1", 5,
               "the run's start to be stored")
    killed = time.monotonic()
    cl.kill("a")
    new = h.wait_for(lambda: cl.leader() in ("b", "c") and cl.leader(), 10, "a new leader")
    took = time.monotonic() - killed
    check(took < cl.timeout_ms / 1000 + 3, "takeover took %.1fs" % took)
    # The relayed worker's link went with the old leader; it reconnects.
    w.close()
    survivor = cl.nodes["c" if new == "b" else "b"]
    # The cut-off run counts as an attempt lost with its worker.
    shown = h.admin(survivor.port, "show job %s" % running[0].decode())
    check("attempts\t1\n" in shown or "attempts: 1\n" in shown,
          "the held job after the takeover: %r" % shown)
    seen = []
    w = h.wait_for(lambda: raw_worker(survivor.port, "t"), 10, "a worker link")
    deadline = time.monotonic() + 15
    while len(seen) < len(handles) and time.monotonic() < deadline:
        job = grab(w)
        if job is None:
            w.send_pkt(h.PRE_SLEEP)
            try:
                w.expect_pkt(h.NOOP, timeout=1)
            except h.TestFailure:
                pass
            continue
        seen.append(job[0])
        w.send_pkt(h.WORK_COMPLETE, job[0], "")
    check_eq(sorted(seen), sorted(handles),
             "jobs run after the takeover, once each (the held one and the epoch one included)")
    check(time.time() >= due, "the epoch job ran before it was due")
    h.wait_for(lambda: cl.pg.sql("SELECT count(*) FROM gearshift_jobs")[0][0] == "0", 10,
               "the store to empty")


@with_cluster
def test_frozen_leader_is_fenced(cl):
    a = cl.start("a", wait_leader=True)
    b = cl.start("b")
    for i in range(5):
        submit_bg(a.port, "f", "k%d" % i, "d")
    direct = raw_worker(a.port, "f")
    held = grab(direct)
    check(held is not None, "no job to hold")
    cl.kill("a", signal.SIGSTOP)
    h.wait_for(lambda: cl.leader() == "b", 10, "b to take over")
    w = h.wait_for(lambda: raw_worker(b.port, "f"), 10, "a worker link to b")
    done = set()
    while True:
        job = grab(w)
        if job is None:
            break
        done.add(job[0])
        w.send_pkt(h.WORK_COMPLETE, job[0], "")
    check_eq(len(done), 5, "jobs b ran")
    os.kill(a.pid, signal.SIGCONT)
    # The woken leader hands nothing out and stores nothing: its hub drops
    # every effect once the lease is past its trusted time, and the node,
    # deposed, drops its server, which closes the connection. So the worker
    # connected to it reads no packet, only the end of the connection (EOF,
    # or a reset); 10 s is only a bound on how late that comes.
    answer = None
    try:
        direct.send_pkt(h.WORK_COMPLETE, held[0], "late")
        direct.send_pkt(h.GRAB_JOB)
        answer = direct.read_pkt(timeout=10)
    except h.TestFailure as e:  # from read_pkt: closed (EOF) or timed out
        check(direct.eof and direct.buf == b"",
              "the fenced node's connection should close with nothing sent: %s" % e)
    except (ConnectionResetError, BrokenPipeError):
        pass  # closed with a reset
    if answer is not None:
        _, t, body = answer
        raise h.TestFailure("the fenced node answered %s %r" % (h.PACKET_NAMES.get(t, t), body))
    h.wait_for(lambda: "no longer" in a.log_text() or "lost the cluster lease" in a.log_text(),
               10, "a to log that it stopped leading")
    check_eq(cl.leader(), "b", "leader after a woke up")
    check_eq(cl.pg.sql("SELECT count(*) FROM gearshift_jobs")[0][0], "0", "jobs left")


@with_cluster
def test_a_stopping_leader_hands_over_at_once(cl):
    cl.timeout_ms = 5000
    a = cl.start("a", wait_leader=True)
    b = cl.start("b")
    submit_bg(b.port, "g", "k", "d")
    # SIGTERM: a finishes, gives the lease up, and b leads long before the
    # 5 s timeout would have passed.
    os.kill(a.pid, signal.SIGTERM)
    check_eq(a.proc.wait(timeout=10), 0, "a's exit code")
    stopped = time.monotonic()
    h.wait_for(lambda: cl.leader() == "b", 10, "b to lead")
    took = time.monotonic() - stopped
    check(took < 2.5, "b took over %.1fs after a stopped (timeout 5s)" % took)
    del cl.nodes["a"]
    w = h.wait_for(lambda: raw_worker(b.port, "g"), 10, "a worker link to b")
    check(grab(w) is not None, "the stored job after the handover")
    check_eq(cl.pg.sql("SELECT count(*) FROM gearshift_nodes WHERE name = 'a'")[0][0], "0",
             "a's row after it left")


class ChaosWorker(threading.Thread):
    """Grabs "chaos" jobs from a random live node, records each run
    (start, completion sent), reconnects when its link breaks."""

    def __init__(self, cl, rng, runs, lock, stop):
        super().__init__(daemon=True)
        self.cl, self.rng, self.runs, self.lock, self.stop = cl, rng, runs, lock, stop

    def run(self):
        while not self.stop.is_set():
            try:
                port = self.rng.choice([n.port for n in list(self.cl.nodes.values())])
                w = raw_worker(port, "chaos")
            except (OSError, h.TestFailure, IndexError):
                time.sleep(0.05)
                continue
            def one(job):
                run = [job[2].decode(), time.monotonic(), None]
                with self.lock:
                    self.runs.append(run)
                time.sleep(self.rng.uniform(0, 0.01))
                w.send_pkt(h.WORK_COMPLETE, job[0], "")
                run[2] = time.monotonic()
            try:
                work_jobs(w, lambda: not self.stop.is_set(), one)
            except (OSError, h.TestFailure):
                pass
            finally:
                w.close()


class ChaosSubmitter(threading.Thread):
    """Submits background jobs with unique ids to random live nodes and
    records the ones acknowledged (JOB_CREATED)."""

    def __init__(self, cl, rng, name, acked, lock, stop):
        super().__init__(daemon=True)
        self.cl, self.rng, self.name = cl, rng, name
        self.acked, self.lock, self.stop = acked, lock, stop

    def run(self):
        i = 0
        while not self.stop.is_set():
            try:
                port = self.rng.choice([n.port for n in list(self.cl.nodes.values())])
                c = h.Conn(port, timeout=5)
            except (OSError, IndexError):
                time.sleep(0.05)
                continue
            try:
                while not self.stop.is_set():
                    i += 1
                    unique = "%s-%d" % (self.name, i)
                    c.send_pkt(h.SUBMIT_JOB_BG, "chaos", unique, unique)
                    c.expect_pkt(h.JOB_CREATED)
                    with self.lock:
                        self.acked.add(unique)
                    time.sleep(self.rng.uniform(0, 0.005))
            except (OSError, h.TestFailure):
                time.sleep(0.02)
            finally:
                c.close()


@with_cluster
def test_chaos_kill_the_leader_under_load(cl):
    seed = int(os.environ.get("CHAOS_SEED", "19"))
    rounds = int(os.environ.get("CHAOS_ROUNDS", "4"))
    rng = random.Random(seed)
    print("   chaos seed %d, %d rounds" % (seed, rounds), flush=True)
    cl.start("a", wait_leader=True)
    cl.start("b")
    cl.start("c")
    lock = threading.Lock()
    acked, runs = set(), []
    stop_submit, stop_work = threading.Event(), threading.Event()
    threads = [ChaosSubmitter(cl, random.Random(seed * 10 + k), "s%d" % k, acked, lock,
                              stop_submit) for k in range(2)]
    threads += [ChaosWorker(cl, random.Random(seed * 100 + k), runs, lock, stop_work)
                for k in range(3)]
    for t in threads:
        t.start()
    kills = []
    timeout = cl.timeout_ms / 1000
    for _ in range(rounds):
        time.sleep(rng.uniform(1.0, 2.0))
        leader = cl.leader()
        check(leader in cl.nodes, "no live leader to kill (%r)" % leader)
        # Mostly the leader; now and then a node that relays.
        victim = leader if rng.random() < 0.7 else rng.choice(
            sorted(n for n in cl.nodes if n != leader))
        kills.append(time.monotonic())
        cl.kill(victim)
        if victim == leader:
            h.wait_for(lambda: cl.leader() not in (None, leader), timeout + 5, "a new leader")
        # The killed node comes back (same name) and follows.
        cl.start(victim)
    time.sleep(1.0)
    stop_submit.set()
    with lock:
        want = set(acked)
    check(len(want) > 100, "only %d jobs acknowledged" % len(want))

    def all_done():
        with lock:
            return want <= {u for u, _, done in runs if done is not None}
    h.wait_for(all_done, 30, "every acknowledged job to run")
    stop_work.set()
    for t in threads:
        t.join(timeout=10)
    # A job ran again only if its earlier run was cut off by a kill: its
    # completion unsent, or sent too close to a kill to have been stored.
    # (An assignment the old leader sent just before dying may reach the
    # worker a little after the kill.)
    by_unique = {}
    for u, started, done in runs:
        by_unique.setdefault(u, []).append((started, done))
    for u, rs in by_unique.items():
        rs.sort()
        for started, done in rs[:-1]:
            cut = any(started < k + 0.5 and (done is None or done > k - 1.0) for k in kills)
            check(cut, "job %s ran again though its run of %.3f-%s was not cut off by a kill "
                  "(kills at %s)" % (u, started, done, kills))
    # After each kill the jobs flowed again within the timeout and a margin.
    for k in kills:
        after = [done for _, _, done in runs if done is not None and done > k]
        check(after and min(after) - k < timeout + 4,
              "no job finished within %.1fs of the kill at %.3f" % (timeout + 4, k))
    h.wait_for(lambda: cl.pg.sql("SELECT count(*) FROM gearshift_jobs")[0][0] == "0", 10,
               "the store to empty")
    again = sum(len(rs) - 1 for rs in by_unique.values())
    print("   %d jobs acknowledged, %d runs, %d run again after a kill"
          % (len(want), len(runs), again), flush=True)


TESTS = [test_jobs_cross_nodes, test_php_and_perl_across_nodes, test_takeover_after_kill,
         test_frozen_leader_is_fenced, test_a_stopping_leader_hands_over_at_once,
         test_chaos_kill_the_leader_under_load]


def main():
    import test_bridge  # their tests use this module's helpers
    import test_links
    import test_partitions
    import test_partition_moves
    import test_pins
    wanted = [a for a in sys.argv[1:] if not a.startswith("-")]
    tests = [t for t in TESTS + test_links.TESTS + test_partitions.TESTS + test_partition_moves.TESTS
             + test_pins.TESTS + test_bridge.TESTS
             if not wanted or any(w in t.__name__ for w in wanted)]
    if not os.access(GEARSHIFT, os.X_OK):
        print("!! %s is not an executable (cargo build -p gearshift)" % GEARSHIFT)
        print(h.summary(0, len(tests)))
        return 1
    return h.run_tmp_suite("cluster suite", tests, "gs-cluster-", "GEARSHIFT=%s" % GEARSHIFT)


if __name__ == "__main__":
    sys.exit(main())
