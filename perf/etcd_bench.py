#!/usr/bin/env python3
"""The etcd job queue natively against Gearshift as its fleet (issue 35).

One run, one etcd, side by side, the same number of workers each way:

  native      N etcd-queue workers of tests/etcd/etcdqueue.py (the seed's
              process: list, CAS the first QUEUED to STARTED, run, FINISHED;
              Python on etcd's JSON gateway), echo
  gearshift   `gearshift serve --etcd` with N `gearshift work` Gearman
              workers (echo)

each under its own prefix. Per side, two phases:

  drain    --jobs QUEUED documents put first, then the workers started (or
           let loose): jobs/s from the first claim to the last FINISHED
  latency  workers idle, --probe jobs submitted one at a time, 20 ms apart:
           submit -> STARTED and submit -> FINISHED seen on a watch, p50/p99

and the etcd requests per job of the drain (gRPC messages etcd received,
from its /metrics `grpc_server_msg_received_total`, by method; the queued
documents' puts are made before the count starts).

usage: perf/etcd_bench.py --bin target/release/gearshift
           [--jobs 1000] [--workers 4] [--probe 100] [--sides native,gearshift]
"""

import argparse
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, os.path.join(ROOT, "tests", "etcd"))

import etcd_harness as eh  # noqa: E402
import etcdqueue as eq  # noqa: E402
import harness as h  # noqa: E402  (tests/interop, on the path etcd_harness set)


def pct(xs, p):
    if not xs:
        return float("nan")
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(len(xs) * p / 100.0))]


class Seen:
    """Times (monotonic) each job id was first seen STARTED and FINISHED on a
    watch of the prefix's job directories."""

    def __init__(self, etcd, queue):
        self.started, self.finished = {}, {}
        self.lock = threading.Lock()
        self.stop = False
        self.q = queue
        self.threads = []
        dirs = {queue.dir(s) for s in ("QUEUED", "STARTED", "FINISHED")}
        _, _, rev = etcd.range(queue.prefix + "seq/jobs")
        for d in dirs:
            t = threading.Thread(target=self._watch, args=(etcd, d, rev + 1), daemon=True)
            t.start()
            self.threads.append(t)

    def _watch(self, etcd, d, rev):
        def ev(kind, kv):
            if kind == "DELETE":
                return
            state = eq.last_state(kv.json())
            jid = kv.key.rsplit("/", 1)[-1]
            now = time.monotonic()
            with self.lock:
                if state == "STARTED":
                    self.started.setdefault(jid, now)
                elif state == "FINISHED":
                    self.started.setdefault(jid, now)
                    self.finished.setdefault(jid, now)
        eq.Etcd(etcd_url(etcd)).watch(d, eq.prefix_end(d), rev, ev, lambda: self.stop)

    def wait(self, ids, timeout):
        deadline = time.monotonic() + timeout
        while True:
            with self.lock:
                if all(i in self.finished for i in ids):
                    return
            if time.monotonic() > deadline:
                raise SystemExit("%d of %d jobs unfinished after %d s"
                                 % (len([i for i in ids if i not in self.finished]), len(ids),
                                    timeout))
            time.sleep(0.01)


def etcd_url(client):
    return "http://%s:%d" % (client.host, client.port)


class Bench:
    def __init__(self, a):
        self.a = a
        self.tmp = tempfile.mkdtemp(prefix="etcd-bench-")
        self.etcd = eh.Etcd(self.tmp)
        self.procs = []
        self.rows = []

    def spawn(self, argv):
        p = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                             stderr=subprocess.DEVNULL, start_new_session=True)
        self.procs.append(p)
        return p

    def stop_all(self):
        for p in self.procs:
            if p.poll() is None:
                p.send_signal(signal.SIGTERM)
        for p in self.procs:
            try:
                p.wait(timeout=10)
            except subprocess.TimeoutExpired:
                p.kill()
        self.procs = []

    def side(self, name):
        prefix = "/%s/" % name
        client = self.etcd.client(timeout=30)
        q = eq.Queue(client, prefix, self.a.layout)
        seen = Seen(client, q)
        ids = [q.submit("job-%d" % i) for i in range(self.a.jobs)]
        before = self.etcd.requests()
        t0 = time.monotonic()
        gearshift = self.start_side(name, prefix)
        seen.wait(ids, 600)
        with seen.lock:
            first = min(seen.started[i] for i in ids)
            last = max(seen.finished[i] for i in ids)
        after = self.etcd.requests()
        rate = len(ids) / (last - first)
        per = {m: (after.get(m, 0) - before.get(m, 0)) / len(ids) for m in after}
        per = {m: v for m, v in per.items() if v > 0.001}
        # Latency: idle workers, one job at a time.
        lat_s, lat_f = [], []
        sent = {}
        for i in range(self.a.probe):
            jid = q.submit("probe-%d" % i)
            sent[jid] = time.monotonic()
            time.sleep(0.02)
        seen.wait(list(sent), 60)
        with seen.lock:
            for jid, t in sent.items():
                lat_s.append(seen.started[jid] - t)
                lat_f.append(seen.finished[jid] - t)
        seen.stop = True
        row = (name, rate, pct(lat_s, 50) * 1000, pct(lat_s, 99) * 1000,
               pct(lat_f, 50) * 1000, pct(lat_f, 99) * 1000, sum(per.values()),
               ", ".join("%s %.2f" % kv for kv in sorted(per.items())))
        self.rows.append(row)
        print("%-10s %7.0f jobs/s  started p50 %6.1f p99 %6.1f ms  finished p50 %6.1f "
              "p99 %6.1f ms  etcd requests/job %.2f (%s)" % row, flush=True)
        if gearshift:
            gearshift.stop()
        self.stop_all()

    def start_side(self, name, prefix):
        n = self.a.workers
        if name == "native":
            for i in range(n):
                self.spawn(eh.EQ + [self.etcd.url, "--prefix", prefix, "--layout", self.a.layout,
                                    "worker", "native-%d" % i, "echo"])
            return None
        argv = eh.gearshift_argv(self.etcd.url, prefix, self.a.layout, 60, "bench")
        argv[0] = self.a.bin
        argv[argv.index("INFO")] = "WARN"
        node = eh.Node(argv, "gearshift-bench")
        for i in range(n):
            self.spawn([self.a.bin, "work", "-s", "127.0.0.1:%d" % node.port, "-f", "etcd-job",
                        "--client-id", "bench-%d" % i])
        return node

    def run(self):
        print("jobs %d, workers %d, probe %d, layout %s, gearshift %s"
              % (self.a.jobs, self.a.workers, self.a.probe, self.a.layout, self.a.bin),
              flush=True)
        for name in self.a.sides.split(","):
            self.side(name)
        print("\n| side | jobs/s | STARTED p50 ms | p99 ms | FINISHED p50 ms | p99 ms "
              "| etcd requests/job | by method |")
        print("|---|---:|---:|---:|---:|---:|---:|---|")
        for row in self.rows:
            print("| %s | %.0f | %.1f | %.1f | %.1f | %.1f | %.2f | %s |" % row)

    def close(self):
        self.stop_all()
        self.etcd.stop()
        shutil.rmtree(self.tmp, ignore_errors=True)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--bin", default=os.path.join(ROOT, "target", "release", "gearshift"))
    p.add_argument("--jobs", type=int, default=1000)
    p.add_argument("--workers", type=int, default=4)
    p.add_argument("--probe", type=int, default=100)
    p.add_argument("--layout", default="single", choices=("single", "split"))
    p.add_argument("--sides", default="native,gearshift")
    b = Bench(p.parse_args())
    try:
        b.run()
    except h.TestFailure as e:
        raise SystemExit(str(e))
    finally:
        b.close()


if __name__ == "__main__":
    main()
