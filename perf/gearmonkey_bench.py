#!/usr/bin/env python3
"""GearMonkey through Gearshift against GearMonkey alone (issue 34).

One run, one machine, side by side, the same number of workers each way:

  gm->gm direct       GearMonkey client -> GearMonkey workers, on Redis only
  gm->gearman         GearMonkey client -> Gearshift bridge -> Gearman workers
                      (`gearshift work`, echo)
  gearman->gm         Gearman client (raw protocol) -> Gearshift bridge ->
                      GearMonkey workers

each background (submit all, wait for every `finish:` event) and blocking
(--clients threads, one job at a time each). Printed per case: jobs/s, p50
and p99 latency in ms, and CPU ms per job of Gearshift, of its bridge alone
(every thread but the Gearman I/O threads) and of redis-server (from /proc,
over the case). Background latency is submit -> `finish:`
event; for gearman->gm background it is the bridge's `create:` -> `finish:`
(the Gearman submit and the GearMonkey id are not paired).

The GearMonkey client and workers are tests/gearmonkey/gearmonkey.py
(Python, redis-py): the direct case is bounded by them as much as by Redis,
which is the point of comparing with the same client and worker count.

usage: perf/gearmonkey_bench.py --bin target/release/gearshift
           [--jobs 2000] [--workers 4] [--clients 4] [--cases a,b]
"""

import argparse
import os
import shutil
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, os.path.join(ROOT, "tests", "gearmonkey"))

import redis  # noqa: E402

import gearmonkey as gm  # noqa: E402

GM_CLI = [sys.executable, os.path.join(ROOT, "tests", "gearmonkey", "gearmonkey.py")]
SUBMIT_JOB, JOB_CREATED, WORK_COMPLETE, SUBMIT_JOB_BG = 7, 8, 13, 18
CLK = os.sysconf("SC_CLK_TCK")


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def cpu_ms(pid):
    """utime + stime of a process, in ms."""
    with open("/proc/%d/stat" % pid) as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) * 1000.0 / CLK


def bridge_cpu_ms(pid):
    """utime + stime of Gearshift's threads other than its Gearman I/O
    threads (`gearshift-io-N`, which run the job server itself): the bridge,
    on the runtime's threads, in ms."""
    total = 0.0
    for tid in os.listdir("/proc/%d/task" % pid):
        try:
            with open("/proc/%d/task/%s/stat" % (pid, tid)) as f:
                text = f.read()
        except OSError:
            continue
        name = text[text.index("(") + 1:text.rindex(")")]
        if name.startswith("gearshift-io"):
            continue
        fields = text.rsplit(")", 1)[1].split()
        total += (int(fields[11]) + int(fields[12])) * 1000.0 / CLK
    return total


def pct(xs, p):
    if not xs:
        return float("nan")
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(len(xs) * p / 100.0))]


def wait_port(port, timeout=10):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
            return
        except OSError:
            time.sleep(0.05)
    raise SystemExit("nothing listens on %d" % port)



def in_threads(n, target):
    """Runs `target` in `n` threads at once and waits for all of them."""
    ts = [threading.Thread(target=target) for _ in range(n)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()

class Gearman:
    """A minimal raw Gearman client connection."""

    def __init__(self, port):
        self.s = socket.create_connection(("127.0.0.1", port))
        self.s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.buf = b""

    def send(self, ptype, *args):
        body = b"\0".join(a if isinstance(a, bytes) else str(a).encode() for a in args)
        self.s.sendall(b"\0REQ" + struct.pack(">II", ptype, len(body)) + body)

    def read(self):
        while True:
            if len(self.buf) >= 12:
                ptype, n = struct.unpack(">II", self.buf[4:12])
                if len(self.buf) >= 12 + n:
                    body, self.buf = self.buf[12:12 + n], self.buf[12 + n:]
                    return ptype, body
            d = self.s.recv(65536)
            if not d:
                raise SystemExit("gearshift closed the connection")
            self.buf += d


class Finishes:
    """Times of `create:`/`finish:` events on channel:{FN}, from a thread."""

    def __init__(self, r, fn):
        self.created, self.finished = {}, {}
        self.ps = r.pubsub(ignore_subscribe_messages=True)
        self.ps.subscribe("channel:%s" % fn)
        self.t = threading.Thread(target=self._run, daemon=True)
        self.stop = False
        self.t.start()

    def _run(self):
        while not self.stop:
            m = self.ps.get_message(timeout=0.1)
            if m and m["type"] == "message":
                now = time.monotonic()
                kind, _, jid = m["data"].decode().partition(":")
                if kind == "create":
                    self.created[jid] = now
                elif kind == "finish":
                    self.finished[jid] = now

    def wait(self, n, timeout):
        deadline = time.monotonic() + timeout
        while len(self.finished) < n:
            if time.monotonic() > deadline:
                raise SystemExit("only %d of %d jobs finished" % (len(self.finished), n))
            time.sleep(0.01)
        self.stop = True
        self.t.join()


class Bench:
    def __init__(self, args):
        self.a = args
        self.tmp = tempfile.mkdtemp(prefix="gm-bench-")
        self.procs = []
        self.rport, self.gport = free_port(), free_port()
        self.redis = self.spawn([args.redis_server, "--port", str(self.rport), "--bind",
                                 "127.0.0.1", "--save", "", "--appendonly", "no",
                                 "--dir", self.tmp, "--logfile", "redis.log"])
        wait_port(self.rport)
        self.url = "redis://127.0.0.1:%d/0" % self.rport
        self.gearshift = self.spawn([args.bin, "serve", "-L", "127.0.0.1", "-p", str(self.gport),
                                     "--http", "127.0.0.1:0", "--store", "memory",
                                     "--log-file", os.path.join(self.tmp, "gearshift.log"),
                                     "--verbose", "WARNING", "--gearmonkey", self.url])
        wait_port(self.gport)
        self.r = redis.Redis(host="127.0.0.1", port=self.rport)
        self.rows = []

    def spawn(self, argv):
        p = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                             stderr=subprocess.DEVNULL, start_new_session=True)
        self.procs.append(p)
        return p

    def workers(self, kind, fn):
        if kind == "gm":
            ps = [self.spawn(GM_CLI + [self.url, "worker", fn, "rev"])
                  for _ in range(self.a.workers)]
            deadline = time.monotonic() + 10
            while int(self.r.get("count:%s" % fn) or 0) < self.a.workers:
                if time.monotonic() > deadline:
                    raise SystemExit("GearMonkey workers did not register")
                time.sleep(0.05)
        else:
            ps = [self.spawn([self.a.bin, "work", "-s", "127.0.0.1:%d" % self.gport, "-f", fn])
                  for _ in range(self.a.workers)]
            deadline = time.monotonic() + 10
            # The bridge's roll call shows them once Gearshift sees them.
            while int(self.r.get("count:%s" % fn) or 0) < self.a.workers:
                if time.monotonic() > deadline:
                    raise SystemExit("Gearman workers did not show in the roll call")
                time.sleep(0.05)
        return ps

    def measure(self, name, fn, body):
        gp = self.gearshift.pid
        g0, b0, r0 = cpu_ms(gp), bridge_cpu_ms(gp), cpu_ms(self.redis.pid)
        t0 = time.monotonic()
        lat, n = body()
        secs = time.monotonic() - t0
        g1, b1, r1 = cpu_ms(gp), bridge_cpu_ms(gp), cpu_ms(self.redis.pid)
        row = (name, n / secs, pct(lat, 50) * 1000, pct(lat, 99) * 1000,
               (g1 - g0) / n, (b1 - b0) / n, (r1 - r0) / n)
        self.rows.append(row)
        print("%-26s %8.0f jobs/s  p50 %7.2f ms  p99 %7.2f ms  gearshift %.3f  (bridge %.3f)  "
              "redis %.3f cpu ms/job" % row, flush=True)

    # --- GearMonkey client side (direct or bridged: the same client)
    def gm_background(self, fn):
        def body():
            fin = Finishes(self.r, fn)
            c = gm.Client(self.r)
            sent = {}
            for i in range(self.a.jobs):
                t = time.monotonic()
                sent[str(c.run(fn, "job-%d" % i))] = t
            fin.wait(self.a.jobs, 300)
            return [fin.finished[k] - sent[k] for k in sent], self.a.jobs
        return body

    def gm_blocking(self, fn):
        def body():
            lat, lock = [], threading.Lock()
            per = self.a.jobs // self.a.clients

            def one():
                c = gm.Client(redis.Redis(host="127.0.0.1", port=self.rport))
                for i in range(per):
                    t = time.monotonic()
                    _, h = c.run(fn, "b-%d" % i, blocking=True, timeout=60)
                    if h is None or h.get(b"status") != b"success":
                        raise SystemExit("blocking job failed: %r" % h)
                    with lock:
                        lat.append(time.monotonic() - t)
            in_threads(self.a.clients, one)
            return lat, per * self.a.clients
        return body

    # --- Gearman client side
    def gearman_background(self, fn):
        def body():
            fin = Finishes(self.r, fn)
            g = Gearman(self.gport)
            for i in range(self.a.jobs):
                g.send(SUBMIT_JOB_BG, fn, "", "job-%d" % i)
            for _ in range(self.a.jobs):
                ptype, _ = g.read()
                assert ptype == JOB_CREATED, ptype
            fin.wait(self.a.jobs, 300)
            return [fin.finished[k] - fin.created[k] for k in fin.finished
                    if k in fin.created], self.a.jobs
        return body

    def gearman_blocking(self, fn):
        def body():
            lat, lock = [], threading.Lock()
            per = self.a.jobs // self.a.clients

            def one():
                g = Gearman(self.gport)
                for i in range(per):
                    t = time.monotonic()
                    g.send(SUBMIT_JOB, fn, "", "b-%d" % i)
                    while True:
                        ptype, _ = g.read()
                        if ptype == WORK_COMPLETE:
                            break
                    with lock:
                        lat.append(time.monotonic() - t)
            in_threads(self.a.clients, one)
            return lat, per * self.a.clients
        return body

    def run(self):
        cases = {
            "direct": ("gm", "b_direct", [("gm->gm direct, bg", self.gm_background),
                                          ("gm->gm direct, blocking", self.gm_blocking)]),
            "bridged": ("gearman", "b_bridged",
                        [("gm->gearman, bg", self.gm_background),
                         ("gm->gearman, blocking", self.gm_blocking)]),
            "out": ("gm", "b_out", [("gearman->gm, bg", self.gearman_background),
                                    ("gearman->gm, blocking", self.gearman_blocking)]),
        }
        wanted = self.a.cases.split(",") if self.a.cases else list(cases)
        print("jobs %d, workers %d, blocking clients %d, gearshift %s"
              % (self.a.jobs, self.a.workers, self.a.clients, self.a.bin), flush=True)
        for key in wanted:
            kind, fn, steps = cases[key]
            ws = self.workers(kind, fn)
            for name, make in steps:
                self.measure(name, fn, make(fn))
            for w in ws:
                w.send_signal(signal.SIGTERM)
            for w in ws:
                try:
                    w.wait(timeout=10)
                except subprocess.TimeoutExpired:
                    w.kill()
        print("\n| case | jobs/s | p50 ms | p99 ms | Gearshift CPU ms/job | of it the bridge | Redis CPU ms/job |")
        print("|---|---:|---:|---:|---:|---:|---:|")
        for row in self.rows:
            print("| %s | %.0f | %.2f | %.2f | %.3f | %.3f | %.3f |" % row)

    def close(self):
        for p in reversed(self.procs):
            if p.poll() is None:
                p.send_signal(signal.SIGTERM)
                try:
                    p.wait(timeout=10)
                except subprocess.TimeoutExpired:
                    p.kill()
        shutil.rmtree(self.tmp, ignore_errors=True)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--bin", default=os.path.join(ROOT, "target", "release", "gearshift"))
    p.add_argument("--redis-server", default="redis-server")
    p.add_argument("--jobs", type=int, default=2000)
    p.add_argument("--workers", type=int, default=4)
    p.add_argument("--clients", type=int, default=4)
    p.add_argument("--cases", help="direct,bridged,out (default all)")
    b = Bench(p.parse_args())
    try:
        b.run()
    finally:
        b.close()


if __name__ == "__main__":
    main()
