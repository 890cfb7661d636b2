#!/usr/bin/env python3
"""The cluster suite's tests of the GearMonkey and etcd bridges on cluster
nodes: every node is started with --gearmonkey (or --etcd), one at a time
runs it (the leader, or the owner of partition 0), the bridged jobs run on
a Gearman worker of another node, the roll call (or registry) counts that
worker once, and after the bridge's node is killed another node runs it.
Run by test_cluster.py, whose cluster helpers they use; needs redis-server
and redis-py, as the GearMonkey suite does, and etcd, as the etcd suite
does.
"""

import os
import shutil
import sys
import tempfile
import threading

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(ROOT, "tests", "interop"))
sys.path.insert(0, os.path.join(ROOT, "tests", "gearmonkey"))

import harness as h  # noqa: E402
from harness import check, check_eq  # noqa: E402
from test_cluster import GEARSHIFT, grab, raw_worker, with_cluster  # noqa: E402

RUNNING = "running the cluster's GearMonkey bridge here"
STOPPED = "no longer chosen to run the cluster's GearMonkey bridge"
# A leader-mode node's etcd bridge, then a partitioned one's.
ETCD_RUNNING = ("leading: running the etcd bridge here", "running the cluster's etcd bridge here")
ETCD_STOPPED = ("no longer leading: stopping the etcd bridge here",
                "no longer chosen to run the cluster's etcd bridge")


class Worker(threading.Thread):
    """A Gearman worker for `func` on node `name` that reverses each job's
    data (failing the first run of a job whose data holds `flaky`),
    connecting again whenever its connection ends (its node's links break
    when the leader dies)."""

    def __init__(self, cl, name, func):
        super().__init__(daemon=True)
        self.cl, self.name, self.func = cl, name, func
        self.stop = threading.Event()
        self.done = 0
        self.failed = set()

    def run(self):
        while not self.stop.is_set():
            try:
                w = raw_worker(self.cl.nodes[self.name].port, self.func)
                while not self.stop.is_set():
                    job = grab(w, timeout=5)
                    if job is None:
                        w.send_pkt(h.PRE_SLEEP)
                        try:
                            w.expect_pkt(h.NOOP, timeout=0.3)
                        except h.TestFailure as e:
                            if "closed" in str(e):
                                raise
                        continue
                    handle, _, data = job
                    if b"flaky" in data and data not in self.failed:
                        self.failed.add(data)
                        w.send_pkt(h.WORK_FAIL, handle)
                        continue
                    w.send_pkt(h.WORK_COMPLETE, handle, data[::-1])
                    self.done += 1
            except (h.TestFailure, OSError):
                self.stop.wait(0.2)


def bridged(r, fn, count, tag):
    """Pushes `count` GearMonkey jobs of `fn` and waits until each ended
    `success` with its data reversed (at most once each: the lock list)."""
    import gearmonkey as gm
    client = gm.Client(r)
    ids = [client.run(fn, "%s-%d" % (tag, i)) for i in range(count)]

    def all_done():
        got = [client.get(fn, i) for i in ids]
        return all(g.get(b"status") == b"success" for g in got)
    h.wait_for(all_done, 60, "%d bridged jobs (%s) to end in success" % (count, tag))
    for n, i in enumerate(ids):
        got = client.get(fn, i)
        check_eq(got.get(b"output"), ("%s-%d" % (tag, n))[::-1].encode(), "job %d's output" % i)


def hosts(cl):
    """The nodes whose bridge runs now, by their logs."""
    def running(log):
        return log.rfind(RUNNING) > log.rfind(STOPPED)
    return [n for n, node in cl.nodes.items() if running(node.log_text())]


def run_bridge_test(cl, flags, first_host, pick):
    """Starts nodes a, b, c with `flags` and --gearmonkey; `first_host()`
    names the node that must run the bridge, `pick(host)` the function
    and the node of its worker. Runs jobs, kills the host, runs more."""
    import gm_harness
    tmp = tempfile.mkdtemp(prefix="gs-cluster-gm-")
    redis_srv, worker = None, None
    try:
        redis_srv = gm_harness.Redis(tmp)
        r = redis_srv.client()
        for n in "abc":
            cl.start(n, extra=flags + " --gearmonkey " + redis_srv.url,
                     wait_leader="--partitioned" not in flags and n == "a")
        host = first_host()
        h.wait_for(lambda: hosts(cl) == [host], 30, "node %s alone to run the bridge" % host)
        func, at = pick(host)
        worker = Worker(cl, at, func)
        worker.start()
        bridged(r, func, 20, "first")
        # One Gearman worker in the cluster: counted once, not once per node.
        h.wait_for(lambda: r.get("count:%s" % func) == b"1", 10, "count:%s of 1" % func)
        cl.kill(host)
        h.wait_for(lambda: len(hosts(cl)) == 1, 40, "another node to run the bridge")
        bridged(r, func, 20, "second")
        h.wait_for(lambda: r.get("count:%s" % func) == b"1", 10,
                   "count:%s of 1 once the dead node's share is gone" % func)
    finally:
        if worker:
            worker.stop.set()
        if redis_srv:
            redis_srv.stop()
        shutil.rmtree(tmp, ignore_errors=True)


@with_cluster
def test_gearmonkey_bridge_on_partitioned_nodes(cl):
    """Partitioned: the owner of partition 0 runs the bridge; a bridged
    function owned by a second node runs on a worker of the third."""
    from test_partitions import functions_on, owners, shared_by  # noqa: E402

    def first_host():
        shared_by(cl, ["a", "b", "c"])
        return owners(cl)[0]

    def pick(host):
        others = [n for n in "abc" if n != host]
        return functions_on(cl, 1, prefix="gm")[others[0]][0], others[1]
    run_bridge_test(cl, "--partitioned", first_host, pick)


@with_cluster
def test_gearmonkey_bridge_on_leader_mode_nodes(cl):
    """Leader mode: the leader runs the bridge; a worker of a follower runs
    its jobs; once the leader is killed, the new leader runs it."""
    run_bridge_test(cl, "", lambda: "a", lambda host: ("gm_leader", "c"))


def run_etcd_test(cl, flags, first_host, worker_at, wait_leader):
    """Starts nodes a, b, c with `flags` and --etcd; `first_host()` names
    the node that must run the bridge, `worker_at(host)` the node of the
    Gearman worker. Runs etcd jobs there, checks the registry lists that
    worker once, under the host's name, and that a job retried by the
    nodes' policy shows its retry (the server's `retrying` event reached
    the bridge), kills the host, runs more, and checks the dead host's
    entries are harvested."""
    sys.path.insert(0, os.path.join(ROOT, "tests", "etcd"))
    import etcd_harness
    import etcdqueue as eq
    tmp = tempfile.mkdtemp(prefix="gs-cluster-etcd-")
    etcd, worker = None, None
    try:
        etcd = etcd_harness.Etcd(tmp)
        q = eq.Queue(etcd.client(), "/", "single")
        config = os.path.join(tmp, "policy.toml")
        with open(config, "w") as f:
            f.write('[[function]]\nmatch = "etcd-job"\nmax_attempts = 2\nretry_on = ["fail"]\n'
                    'backoff = "fixed"\ninitial_delay = "200ms"\njitter = false\n')
        for n in "abc":
            cl.start(n, extra="%s --config %s --etcd %s --etcd-harvest-after 3"
                     % (flags, config, etcd.url), wait_leader=wait_leader and n == "a")
        host = first_host()

        def running():
            def last(log, marks):
                return max(log.rfind(m) for m in marks)
            return [n for n, node in cl.nodes.items()
                    if last(node.log_text(), ETCD_RUNNING) > last(node.log_text(), ETCD_STOPPED)]
        h.wait_for(lambda: running() == [host], 30, "node %s alone to run the etcd bridge" % host)
        worker = Worker(cl, worker_at(host), "etcd-job")
        worker.start()

        def finished(ids):
            def done():
                docs = [q.job(j)[1] for j in ids]
                return all(eq.last_state(d) == "FINISHED" for d in docs)
            h.wait_for(done, 40, "%d etcd jobs finished" % len(ids))
            for j in ids:
                doc = q.job(j)[1]
                check_eq(doc["Result"]["Status"], "SUCCESS", "job %s's Result" % j)
                states = [x["State"] for x in doc["States"]]
                check_eq(states.count("FINISHED"), 1, "FINISHED states of %s" % j)

        def entries(prefix, bridges=False):
            """ALIVE entries whose key starts with `prefix`: workers', or
            with `bridges` the bridges' own too."""
            return [kv.key.rsplit("/", 1)[-1] for kv in q.workers()
                    if kv.key.rsplit("/", 1)[-1].startswith(prefix)
                    and (kv.json() or {}).get("Status") == "ALIVE"
                    and (bridges or (kv.json() or {}).get("Role") != "gearshift-bridge")]
        finished([q.submit("one%d" % i) for i in range(10)])
        flaky = q.submit("flaky-1")
        finished([flaky])
        doc = q.job(flaky)[1]
        check_eq([x["State"] for x in doc["States"]],
                 ["QUEUED", "STARTED", "QUEUED", "STARTED", "FINISHED"], "a state per run")
        check("retry" in doc["States"][2]["Step"], "the retry in Step: %r" % doc["States"][2])
        h.wait_for(lambda: len(entries("gearshift-%s-" % host)) == 1, 10,
                   "the worker listed once, under the host %s" % host)
        check_eq(len(entries("gearshift-")), 1, "ALIVE worker entries in the registry")
        cl.kill(host)
        h.wait_for(lambda: len(running()) == 1 and host not in running(), 40,
                   "another node to run the etcd bridge")
        finished([q.submit("two%d" % i) for i in range(10)])
        h.wait_for(lambda: not entries("gearshift-%s" % host, bridges=True), 20,
                   "the dead host's entries harvested")
        h.wait_for(lambda: len(entries("gearshift-")) == 1, 10,
                   "the worker listed once, under the new host")
    finally:
        if worker:
            worker.stop.set()
        if etcd:
            etcd.stop()
        shutil.rmtree(tmp, ignore_errors=True)


@with_cluster
def test_etcd_bridge_on_leader_mode_nodes(cl):
    """Leader mode, every node started with --etcd: the leader runs the
    bridge beside its job server; etcd jobs run on a Gearman worker of a
    follower, which the registry lists under the leader's name; once the
    leader is killed, the new leader runs the bridge and more jobs run,
    and the dead leader's entries are harvested."""
    run_etcd_test(cl, "", lambda: "a", lambda host: "c", wait_leader=True)


@with_cluster
def test_etcd_bridge_on_partitioned_nodes(cl):
    """Partitioned, every node started with --etcd: the owner of partition
    0 runs the bridge and follows the whole cluster through its HTTP API;
    the worker, on another node, is listed once; after the host is killed
    another node runs it. A partitioned node without its HTTP API refuses
    --etcd."""
    from test_partitions import owners, shared_by  # noqa: E402

    def first_host():
        shared_by(cl, ["a", "b", "c"])
        return owners(cl)[0]
    run_etcd_test(cl, "--partitioned", first_host,
                  lambda host: [n for n in "abc" if n != host][0], wait_leader=False)
    r = h.run([GEARSHIFT, "serve", "-L", "127.0.0.1", "-p", "0", "--store", cl.url,
               "--partitioned", "--http", "off", "--etcd", "http://127.0.0.1:1"], timeout=20)
    check(r.returncode != 0 and "--http" in r.stderr,
          "--etcd refused on a partitioned node without HTTP: %r" % r.stderr[-300:])


TESTS = [test_gearmonkey_bridge_on_partitioned_nodes, test_gearmonkey_bridge_on_leader_mode_nodes,
         test_etcd_bridge_on_leader_mode_nodes, test_etcd_bridge_on_partitioned_nodes]
