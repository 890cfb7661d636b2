#!/usr/bin/env python3
"""Soak: mixed load on one durable `gearshift serve` for a given time.

Starts the server (the embedded log store, --durability fsync, in a fresh
temporary data dir; Gearman and HTTP on 127.0.0.1 port 0, the ports read
from its log) and runs, all at once until --duration is up:

  bg submitters   raw SUBMIT_JOB_BG / _HIGH_BG / _LOW_BG, paced, small
                  pipelined batches; some with a unique id of their own,
                  a few resubmitting an earlier unique (coalescing); they
                  reconnect every few thousand jobs
  fg clients      SUBMIT_JOB / _HIGH / _LOW, one at a time, wait for
                  WORK_COMPLETE and check its data
  workers         raw GRAB_JOB / GRAB_JOB_UNIQ with PRE_SLEEP / NOOP; bg
                  workers pause for part of every cycle so the queue grows
                  and drains; fg workers send WORK_STATUS / WORK_DATA
  admin sessions  status, workers, prioritystatus, show jobs, show unique
                  jobs, show job <handle>, show workers, getpid, version
  HTTP scrapes    /metrics, /api/v1/overview, /functions, /workers, /jobs,
                  and now and then a few seconds of /api/v1/events
  worker kills    a worker closes its socket right after a JOB_ASSIGN (half
                  of the time with an RST), so the job is requeued
  restarts        SIGTERM (must exit 0) and SIGKILL in turn, then a restart
                  on the same data dir and ports; everyone reconnects

Every job's payload carries its number (`bg:<submitter>:<n>:...`,
`fg:<client>:<n>:...`). Every interval it prints and records server RSS,
fds, threads, data dir size, jobs/s, the latency of submit -> JOB_CREATED
(bg) and submit -> WORK_COMPLETE (fg) and the queue depth from `status`.

At the end it stops the load, lets the workers drain, closes everything,
compares the idle fd count with the one at the first start, stops the
server with SIGTERM (exit 0 within 30 s) and judges:

  - every background job that got JOB_CREATED completed at least once;
    a second completion is allowed only if the first one was cut off (its
    connection died before the server answered the next request) or a
    restart came between the two; any other is a failure
  - foreground jobs completed with the right data, or their client was
    disconnected by a restart (counted, expected); nothing else
  - no growth (runs of at least --min-growth-run seconds; a shorter run
    says `not judged`, neither a pass nor a failure): see `growth()`
  - no problem seen by any thread (unexpected disconnects, timeouts on a
    live server, wrong replies, a server that exits by itself)

usage: python3 perf/soak.py [--bin target/release/gearshift] [--duration 3600]
           [--out soak.csv] [--interval 10] [--seed N]  (--help for the knobs)
       python3 perf/soak.py --table soak.csv [window-seconds]   (Markdown)
Exit status 0 on PASS, 1 on FAIL. Python 3 stdlib only; every loop has a
deadline and every socket operation a timeout.
"""

import argparse
import array
import http.client
import json
import os
import random
import re
import shlex
import shutil
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import time
import traceback
from collections import deque

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, os.path.join(ROOT, "tests", "interop"))
sys.path.insert(0, os.path.join(ROOT, "tests", "crash"))
sys.dont_write_bytecode = True

import harness as H  # noqa: E402
import crash as C  # noqa: E402

BG_FUNC = "soak_bg"
FG_FUNC = "soak_fg"
BG_TYPES = (H.SUBMIT_JOB_BG, H.SUBMIT_JOB_HIGH_BG, H.SUBMIT_JOB_LOW_BG)
FG_TYPES = (H.SUBMIT_JOB, H.SUBMIT_JOB_HIGH, H.SUBMIT_JOB_LOW)
PAYLOAD_RE = re.compile(rb"^(bg|fg):(\d+):(\d+):")
MiB = 1024 * 1024


def payload(kind, i, n):
    # A filler of varying length, deterministic per job, so a torn or
    # swapped body shows.
    return b"%s:%d:%d:" % (kind, i, n) + b"%x" % (n * 2654435761 % 4294967296) * (n % 23)


def parse(data):
    m = PAYLOAD_RE.match(data[:40])
    if not m:
        return None
    kind, i, n = m.group(1), int(m.group(2)), int(m.group(3))
    return (kind, i, n) if data == payload(kind, i, n) else None


def pct(values, p):
    if not values:
        return None
    s = sorted(values)
    return s[min(len(s) - 1, int(round(p / 100.0 * (len(s) - 1))))]


def sleep_until(t, stop):
    """Sleep until monotonic time t or until stop is set (bounded steps)."""
    while not stop.is_set():
        left = t - time.monotonic()
        if left <= 0:
            return True
        stop.wait(min(left, 0.1))
    return False


# --------------------------------------------------------------------------
# The server: the crash suite's restartable server, on port 0 with HTTP.


class SoakServer(C.CrashServer):
    """`gearshift serve` on a fixed data dir. The first start binds port 0
    for Gearman and HTTP and reads the ports from its log; restarts ask for
    the same ports (port 0 again if they cannot be had)."""

    def __init__(self, tmp, binary, extra=()):
        C.BINARY = binary
        super().__init__(tmp, "fsync", "soak")
        self.binary = binary
        self.extra = list(extra)
        self.http_port = None
        self.ended = {}       # generation -> "term" | "kill"
        self.ready_times = []  # (t, seconds from exec to listening)
        self.gen_started = {}  # generation -> monotonic time it was listening

    def start(self, ready_timeout=30.0):
        last = None
        for attempt in range(3):
            reuse = attempt == 0 and self.port is not None
            gport = self.port if reuse else 0
            hport = self.http_port if reuse else 0
            argv = [self.binary, "serve", "-L", "127.0.0.1", "-p", str(gport),
                    "--http", "127.0.0.1:%d" % hport, "--data-dir", self.data_dir,
                    "--log-file", self.log_path, "--verbose", "INFO"] + self.extra
            if not any(a.startswith("--durability") for a in self.extra):
                argv += ["--durability", "fsync"]
            try:
                offset = os.path.getsize(self.log_path)
            except OSError:
                offset = 0
            self.log = open(self.stdout_path, "ab")
            t0 = time.monotonic()
            self.proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=self.log,
                                         stderr=subprocess.STDOUT, start_new_session=True)
            try:
                self.port, self.http_port = self._ports(offset, ready_timeout)
            except H.TestFailure as e:
                last = e
                self._reap()
                continue
            self.ready_times.append((time.monotonic(), time.monotonic() - t0))
            self.gen_started[self.generation] = time.monotonic()
            self.starts.append((self.generation, self.port, time.monotonic() - t0))
            self.up.set()
            return
        raise H.TestFailure("could not (re)start the server on %s: %s" % (self.data_dir, last))

    def _ports(self, offset, timeout):
        deadline = time.monotonic() + timeout
        while True:
            text = ""
            try:
                with open(self.log_path, "rb") as f:
                    f.seek(offset)
                    text = f.read().decode("utf-8", "replace")
            except OSError:
                pass
            g = re.search(r"(?<!http )listening on 127\.0\.0\.1:(\d+)", text)
            h = re.search(r"http listening on 127\.0\.0\.1:(\d+)", text)
            if g and h:
                return int(g.group(1)), int(h.group(1))
            if self.proc.poll() is not None:
                raise H.TestFailure("server exited with %s at start: %s"
                                    % (self.proc.returncode, self.log_text()[-1500:]))
            if time.monotonic() > deadline:
                raise H.TestFailure("no listening lines within %.0fs" % timeout)
            time.sleep(0.02)

    def kill(self):
        self.ended[self.generation] = "kill"
        super().kill()

    def stop_graceful(self, timeout=30.0):
        self.ended[self.generation] = "term"
        super().stop_graceful(timeout)


def proc_stats(pid):
    """(rss_kb, fds, threads, rss_anon_kb, rss_file_kb, cpu_s) of a live
    process, or None. RssFile is mostly the binary's text as more of its
    code gets run; RssAnon is the heap and stacks."""
    try:
        st = {}
        with open("/proc/%d/status" % pid) as f:
            for line in f:
                k, _, v = line.partition(":")
                if k in ("VmRSS", "Threads", "RssAnon", "RssFile"):
                    st[k] = int(v.split()[0])
        fds = len(os.listdir("/proc/%d/fd" % pid))
        with open("/proc/%d/stat" % pid) as f:
            fields = f.read().rsplit(")", 1)[1].split()
        cpu = (int(fields[11]) + int(fields[12])) / float(os.sysconf("SC_CLK_TCK"))
        return st["VmRSS"], fds, st["Threads"], st["RssAnon"], st["RssFile"], cpu
    except (OSError, ValueError, KeyError, IndexError):
        return None


def dir_kb(path):
    total = 0
    for root, _dirs, files in os.walk(path):
        for f in files:
            try:
                total += os.stat(os.path.join(root, f)).st_blocks * 512
            except OSError:
                pass
    return total // 1024


# --------------------------------------------------------------------------
# Book-keeping shared by every thread


class Book:
    """Who sent, acknowledged, ran and completed what. Per bg submitter,
    flat arrays indexed by job number keep an hour of jobs small."""

    def __init__(self, n_bg, n_fg):
        self.lock = threading.Lock()
        self.problems = C.Problems()
        self.acks = [bytearray() for _ in range(n_bg)]      # JOB_CREATED count
        self.subs = [bytearray() for _ in range(n_bg)]      # times sent (coalescing: > 1)
        self.done = [bytearray() for _ in range(n_bg)]      # completions sent
        self.runs = [bytearray() for _ in range(n_bg)]      # JOB_ASSIGNs
        self.first_gen = [array.array("i") for _ in range(n_bg)]
        # State of the first completion: 0 sent, 1 answered (the server
        # replied to a later request on that connection), 2 cut off.
        self.first_state = [bytearray() for _ in range(n_bg)]
        self.fg_sent = [0] * n_fg
        self.dup_events = []  # (i, n, first gen, first state, gen)
        self.unknown_runs = 0
        self.fg_done = 0
        self.fg_lost_restart = 0
        self.kills = 0
        self.restarts = {"term": 0, "kill": 0}
        self.reruns_after_kill = 0
        # Per interval, swapped out by the sampler.
        self.iv = self._fresh_interval()
        self.totals = {"bg_acked": 0, "bg_sent": 0, "bg_done": 0, "fg_done": 0,
                       "fg_sent": 0, "admin_sessions": 0, "http_requests": 0,
                       "events_streams": 0, "coalesce_resubmits": 0}

    @staticmethod
    def _fresh_interval():
        return {"bg_acked": 0, "bg_done": 0, "fg_done": 0, "create_ms": [], "fg_ms": []}

    def take_interval(self):
        with self.lock:
            iv, self.iv = self.iv, self._fresh_interval()
        return iv

    def new_bg(self, i):
        with self.lock:
            n = len(self.acks[i])
            for a in (self.acks[i], self.done[i], self.runs[i], self.first_state[i]):
                a.append(0)
            self.subs[i].append(1)
            self.first_gen[i].append(-1)
            self.totals["bg_sent"] += 1
            return n

    def ack_bg(self, i, n, ms):
        with self.lock:
            if self.acks[i][n] < 255:
                self.acks[i][n] += 1
            self.iv["bg_acked"] += 1
            self.iv["create_ms"].append(ms)
            self.totals["bg_acked"] += 1

    def run_bg(self, i, n):
        with self.lock:
            if i >= len(self.runs) or n >= len(self.runs[i]):
                self.unknown_runs += 1
                return False
            if self.runs[i][n] < 255:
                self.runs[i][n] += 1
            return True

    def complete_bg(self, i, n, gen):
        """A worker sends WORK_COMPLETE for bg job (i, n) to generation gen."""
        with self.lock:
            self.iv["bg_done"] += 1
            self.totals["bg_done"] += 1
            d = self.done[i][n]
            if d < 255:
                self.done[i][n] = d + 1
            if d == 0:
                self.first_gen[i][n] = gen
                return True
            if d >= self.subs[i][n] and len(self.dup_events) < 100000:
                # More completions than times sent (a resubmission with
                # the same unique id after the first run legitimately
                # runs again, and may do so before its JOB_CREATED is
                # read): judged at the end,
                # when every first completion has settled.
                self.dup_events.append((i, n, gen))
            return False

    def classify_dups(self, ended):
        """Why each duplicate completion happened. `cut`: the first
        completion's connection died before the server answered anything
        sent after it, so it may never have been read. `sigkill`: the first
        completion was answered by a server that was then SIGKILLed before
        its Done record was on disk. Anything else (the same server process
        ran a completed job again, or a graceful stop forgot a completion)
        is unexplained."""
        out = {"cut": 0, "sigkill": 0, "unexplained": 0}
        samples = []
        for i, n, gen in self.dup_events:
            g1, st = self.first_gen[i][n], self.first_state[i][n]
            if st == 2:
                why = "cut"
            elif g1 != gen and ended.get(g1) == "kill":
                why = "sigkill"
            else:
                why = "unexplained"
            out[why] += 1
            if len(samples) < 20 or why == "unexplained" and len(samples) < 50:
                samples.append({"job": "bg:%d:%d" % (i, n), "why": why, "first_gen": g1,
                                "first_end": ended.get(g1), "first_state": st, "gen": gen})
        return out, samples

    def settle_first(self, i, n, state):
        with self.lock:
            if self.first_state[i][n] == 0:
                self.first_state[i][n] = state


class Load:
    """Stop events and knobs shared by the load threads."""

    def __init__(self, ctl, book, args, rng):
        self.ctl = ctl
        self.book = book
        self.args = args
        self.rng = rng
        self.stop_submit = threading.Event()
        self.stop_work = threading.Event()
        self.stop_side = threading.Event()
        self.bg_paused = threading.Event()
        self.recent_handles = deque(maxlen=64)


def guarded(name, book, fn):
    def run():
        try:
            fn()
        except Exception:  # noqa: BLE001 - every crash of a thread is a finding
            book.problems.add("%s crashed:\n%s" % (name, traceback.format_exc()))
    return run


def lost_connection(ld, conn, gen, who, err):
    """A connection failed. Expected while the server is restarted;
    otherwise a finding."""
    if C.server_gone(ld.ctl, gen):
        return
    # The restart thread clears `up` before it signals the server; give a
    # racing read a moment to see it.
    time.sleep(0.2)
    if C.server_gone(ld.ctl, gen):
        return
    ld.book.problems.add("%s: %s on live generation %d" % (who, err, gen))


# --------------------------------------------------------------------------
# Load threads


class BgSubmitter:
    def __init__(self, ld, idx, rate):
        self.ld, self.idx, self.rate = ld, idx, rate
        self.rng = random.Random(ld.rng.random())
        self.recent_unique = deque(maxlen=32)
        self.next_send = time.monotonic()

    def run(self):
        ld = self.ld
        while not ld.stop_submit.is_set():
            got = C.connect(ld.ctl, ld.stop_submit, timeout=120.0)
            if got is None:
                return
            conn, gen = got
            try:
                self.pump(conn, gen)
            except (OSError, H.TestFailure) as e:
                lost_connection(ld, conn, gen, "bg submitter %d" % self.idx, e)
            finally:
                conn.close()

    def pump(self, conn, gen):
        ld, rng, book = self.ld, self.rng, self.ld.book
        left = rng.randint(500, 5000)  # jobs before this connection is closed
        while left > 0 and not ld.stop_submit.is_set():
            if not sleep_until(self.next_send, ld.stop_submit):
                return
            batch, pkts = [], []
            for _ in range(rng.randint(1, 8)):
                if self.recent_unique and rng.random() < 0.02:
                    n, ptype, uniq = rng.choice(self.recent_unique)
                    with book.lock:
                        book.totals["coalesce_resubmits"] += 1
                        if book.subs[self.idx][n] < 255:
                            book.subs[self.idx][n] += 1
                else:
                    n = book.new_bg(self.idx)
                    ptype = rng.choice(BG_TYPES)
                    uniq = b"u:%d:%d" % (self.idx, n) if rng.random() < 0.3 else b""
                    if uniq:
                        self.recent_unique.append((n, ptype, uniq))
                batch.append(n)
                pkts.append(H.packet(ptype, BG_FUNC, uniq, payload(b"bg", self.idx, n)))
            t0 = time.monotonic()
            conn.send(b"".join(pkts))
            for n in batch:
                magic, t, body = conn.read_pkt(timeout=15.0)
                if t != H.JOB_CREATED or magic != H.RES:
                    if C.server_gone(ld.ctl, gen):
                        raise H.TestFailure("server going away: %s" % H.PACKET_NAMES.get(t, t))
                    book.problems.add("bg submitter %d job %d: got %s %r"
                                      % (self.idx, n, H.PACKET_NAMES.get(t, t), body[:200]))
                    continue
                book.ack_bg(self.idx, n, (time.monotonic() - t0) * 1000.0)
                ld.recent_handles.append(body)
            left -= len(batch)
            self.next_send = max(self.next_send + len(batch) / self.rate,
                                 time.monotonic() - 1.0)


class FgClient:
    def __init__(self, ld, idx, rate):
        self.ld, self.idx, self.rate = ld, idx, rate
        self.rng = random.Random(ld.rng.random())
        self.next_send = time.monotonic()
        self.n = 0

    def run(self):
        ld = self.ld
        while not ld.stop_submit.is_set():
            got = C.connect(ld.ctl, ld.stop_submit, timeout=120.0)
            if got is None:
                return
            conn, gen = got
            self.inflight = False
            try:
                self.pump(conn, gen)
            except (OSError, H.TestFailure) as e:
                if self.inflight and C.server_gone(ld.ctl, gen):
                    with ld.book.lock:
                        ld.book.fg_lost_restart += 1
                lost_connection(ld, conn, gen, "fg client %d" % self.idx, e)
            finally:
                conn.close()

    def pump(self, conn, gen):
        ld, rng, book = self.ld, self.rng, self.ld.book
        left = rng.randint(100, 1000)
        while left > 0 and not ld.stop_submit.is_set():
            if not sleep_until(self.next_send, ld.stop_submit):
                return
            self.next_send = max(self.next_send + 1.0 / self.rate, time.monotonic() - 1.0)
            n = self.n
            self.n += 1
            data = payload(b"fg", self.idx, n)
            uniq = b"fu:%d:%d" % (self.idx, n) if rng.random() < 0.2 else b""
            t0 = time.monotonic()
            conn.send(H.packet(rng.choice(FG_TYPES), FG_FUNC, uniq, data))
            self.inflight = True
            with book.lock:
                book.totals["fg_sent"] += 1
            handle = conn.expect_pkt(H.JOB_CREATED, timeout=15.0)
            with book.lock:
                book.iv["create_ms"].append((time.monotonic() - t0) * 1000.0)
            deadline = time.monotonic() + 60.0
            while True:
                magic, t, body = conn.read_pkt(timeout=max(0.1, deadline - time.monotonic()))
                h, _, rest = body.partition(b"\0")
                if h != handle:
                    book.problems.add("fg client %d: %s for handle %r, waiting for %r"
                                      % (self.idx, H.PACKET_NAMES.get(t, t), h, handle))
                    continue
                if t in (H.WORK_STATUS, H.WORK_DATA, H.WORK_WARNING):
                    continue
                if t == H.WORK_COMPLETE:
                    if rest != b"r" + data:
                        book.problems.add("fg client %d job %d: result %r" % (self.idx, n, rest[:80]))
                    ms = (time.monotonic() - t0) * 1000.0
                    with book.lock:
                        book.fg_done += 1
                        book.totals["fg_done"] += 1
                        book.iv["fg_done"] += 1
                        book.iv["fg_ms"].append(ms)
                    break
                book.problems.add("fg client %d job %d: got %s %r"
                                  % (self.idx, n, H.PACKET_NAMES.get(t, t), rest[:100]))
                break
            self.inflight = False
            left -= 1


class Worker:
    """bg workers take BG_FUNC (and pause with the cycle), fg workers
    FG_FUNC; `kill_next` makes it drop its connection at the next job."""

    def __init__(self, ld, idx, funcs, pauses):
        self.ld, self.idx, self.funcs, self.pauses = ld, idx, funcs, pauses
        self.rng = random.Random(ld.rng.random())
        self.kill_next = False
        self.name = "worker %d (%s)" % (idx, ",".join(funcs))

    def run(self):
        ld = self.ld
        while not ld.stop_work.is_set():
            got = C.connect(ld.ctl, ld.stop_work, timeout=120.0)
            if got is None:
                return
            conn, gen = got
            self.unsettled = None
            try:
                self.work(conn, gen)
            except (OSError, H.TestFailure) as e:
                lost_connection(ld, conn, gen, self.name, e)
            finally:
                if self.unsettled is not None:
                    ld.book.settle_first(*self.unsettled, 2)
                    self.unsettled = None
                conn.close()

    def settle(self):
        if self.unsettled is not None:
            self.ld.book.settle_first(*self.unsettled, 1)
            self.unsettled = None

    def work(self, conn, gen):
        ld, rng, book = self.ld, self.rng, self.ld.book
        conn.send_pkt(H.SET_CLIENT_ID, "soak-w%d" % self.idx)
        for f in self.funcs:
            conn.send_pkt(H.CAN_DO, f)
        left = rng.randint(2000, 20000)
        send_grab = True
        while not ld.stop_work.is_set() and left > 0:
            if send_grab and self.pauses and ld.bg_paused.is_set():
                ld.stop_work.wait(0.1)
                continue
            uniq = rng.random() < 0.5
            if send_grab:
                conn.send_pkt(H.GRAB_JOB_UNIQ if uniq else H.GRAB_JOB)
            send_grab = True
            magic, t, body = conn.read_pkt(timeout=10.0)
            self.settle()
            if t == H.NO_JOB:
                conn.send_pkt(H.PRE_SLEEP)
                try:
                    magic, t, body = conn.read_pkt(timeout=1.0)
                except H.TestFailure:
                    if conn.eof:
                        raise
                    continue  # woken or not, grab again (bounded sleep)
                if t != H.NOOP:
                    book.problems.add("%s: %s while asleep" % (self.name, H.PACKET_NAMES.get(t, t)))
                continue
            if t == H.NOOP:
                send_grab = False  # a stale wake-up; our GRAB is still pending
                continue
            if t not in (H.JOB_ASSIGN, H.JOB_ASSIGN_UNIQ):
                book.problems.add("%s: got %s %r" % (self.name, H.PACKET_NAMES.get(t, t), body[:100]))
                continue
            if t == H.JOB_ASSIGN_UNIQ:
                handle, func, _uniq, data = body.split(b"\0", 3)
            else:
                handle, func, data = body.split(b"\0", 2)
            key = parse(data)
            if key is None or func.decode() not in self.funcs:
                book.problems.add("%s: job not ours: %r %r" % (self.name, func, data[:60]))
                conn.send_pkt(H.WORK_FAIL, handle)
                continue
            kind, i, n = key
            if kind == b"bg" and not book.run_bg(i, n):
                book.problems.add("%s: bg job never sent: %r" % (self.name, data[:40]))
            if self.kill_next:
                self.kill_next = False
                with book.lock:
                    book.kills += 1
                if rng.random() < 0.5:  # an RST rather than a FIN
                    conn.sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER,
                                         struct.pack("ii", 1, 0))
                return
            if kind == b"fg":
                if rng.random() < 0.3:
                    conn.send_pkt(H.WORK_STATUS, handle, 1, 2)
                if rng.random() < 0.1:
                    conn.send_pkt(H.WORK_DATA, handle, b"partial")
                conn.send(H.packet(H.WORK_COMPLETE, handle, b"r" + data))
            else:
                if rng.random() < 0.05:
                    time.sleep(0.005)
                conn.send(H.packet(H.WORK_COMPLETE, handle, b""))
                if book.complete_bg(i, n, gen):
                    self.unsettled = (i, n)
            left -= 1
        if self.unsettled is not None:
            # Leaving on our own: an echo answered means the server read the
            # last WORK_COMPLETE, so it is not counted as cut off.
            conn.echo_sync(timeout=10.0)
            self.settle()


def admin_loop(ld):
    rng, book = random.Random(ld.rng.random()), ld.book
    while not ld.stop_side.is_set():
        ld.stop_side.wait(rng.uniform(1.0, 3.0))
        if ld.stop_side.is_set() or not ld.ctl.up.is_set():
            continue
        gen, port, pid = ld.ctl.generation, ld.ctl.port, ld.ctl.proc.pid if ld.ctl.proc else 0
        cmds = ["status", "workers", "prioritystatus", "show workers", "version", "getpid"]
        if rng.random() < 0.3:
            cmds += ["show jobs", "show unique jobs"]
        if ld.recent_handles:
            cmds.append("show job " + rng.choice(list(ld.recent_handles)).decode())
        rng.shuffle(cmds)
        try:
            conn = H.Conn(port, timeout=10.0)
        except OSError as e:
            lost_connection(ld, None, gen, "admin connect", e)
            continue
        try:
            for c in cmds:
                reply = conn.admin(c, timeout=20.0).decode("utf-8", "replace")
                if c == "status":
                    H.parse_status(reply)
                elif c == "getpid" and reply.strip() != "OK %d" % pid \
                        and reply.strip() != str(pid) and not C.server_gone(ld.ctl, gen):
                    book.problems.add("admin getpid: %r, server pid %d" % (reply, pid))
                elif c.startswith("show job ") and not (reply.startswith("OK")
                                                        or reply.startswith("ERR UNKNOWN_JOB")
                                                        or "\n.\n" in "\n" + reply):
                    book.problems.add("admin %s: %r" % (c, reply[:200]))
            with book.lock:
                book.totals["admin_sessions"] += 1
        except (OSError, H.TestFailure, ValueError) as e:
            lost_connection(ld, conn, gen, "admin session", e)
        finally:
            conn.close()


def http_loop(ld):
    rng, book = random.Random(ld.rng.random()), ld.book
    paths = ["/metrics", "/api/v1/overview", "/api/v1/functions", "/api/v1/workers",
             "/api/v1/jobs?limit=50", "/api/v1/jobs?state=queued&limit=20"]
    k = 0
    while not ld.stop_side.is_set():
        ld.stop_side.wait(rng.uniform(0.5, 1.5))
        if ld.stop_side.is_set() or not ld.ctl.up.is_set():
            continue
        gen, port = ld.ctl.generation, ld.ctl.http_port
        k += 1
        events = k % 15 == 0
        path = "/api/v1/events" if events else rng.choice(paths)
        c = http.client.HTTPConnection("127.0.0.1", port, timeout=10.0)
        try:
            c.request("GET", path)
            r = c.getresponse()
            if r.status != 200:
                book.problems.add("http %s: status %d" % (path, r.status))
            if events:
                # Read the stream for a few seconds, then hang up.
                end = time.monotonic() + rng.uniform(1.0, 4.0)
                while time.monotonic() < end and not ld.stop_side.is_set():
                    try:
                        if not r.fp.readline():
                            break
                    except socket.timeout:
                        break
                with book.lock:
                    book.totals["events_streams"] += 1
            else:
                body = r.read()
                if path.startswith("/api/"):
                    json.loads(body)
                elif b"gearshift" not in body:
                    book.problems.add("http /metrics: no gearshift metric")
            with book.lock:
                book.totals["http_requests"] += 1
        except (OSError, http.client.HTTPException, ValueError) as e:
            lost_connection(ld, None, gen, "http %s" % path, e)
        finally:
            c.close()


# --------------------------------------------------------------------------
# Chaos: pauses, worker kills, restarts


def chaos_loop(ld, workers, plan, t_start, t_end):
    rng, book, ctl = random.Random(ld.rng.random()), ld.book, ld.ctl
    next_kill = t_start + plan["kill_every"]
    next_restart = t_start + plan["restart_every"]
    cycle, pause = plan["cycle"], plan["pause"]
    term_next = True
    while not ld.stop_submit.is_set():
        now = time.monotonic()
        if now >= t_end:
            break
        phase = (now - t_start) % cycle
        if phase >= cycle - pause:
            ld.bg_paused.set()
        else:
            ld.bg_paused.clear()
        if plan["kill_every"] and now >= next_kill:
            rng.choice(workers).kill_next = True
            next_kill += plan["kill_every"]
        if plan["restart_every"] and now >= next_restart and now < t_end - 2.0:
            kind = "term" if term_next else "kill"
            term_next = not term_next
            try:
                if kind == "term":
                    ctl.stop_graceful(timeout=30.0)
                else:
                    ctl.kill()
            except H.TestFailure as e:
                book.problems.add("restart (%s) of generation %d: %s" % (kind, ctl.generation, e))
                ctl.close()
                ctl.generation += 1
            with book.lock:
                book.restarts[kind] += 1
            ld.stop_submit.wait(rng.uniform(0.2, 1.5))
            ctl.start()
            next_restart = time.monotonic() + plan["restart_every"]
        ld.stop_submit.wait(0.05)
    ld.bg_paused.clear()


# --------------------------------------------------------------------------
# Sampling and judging


COLUMNS = ["t", "gen", "age", "rss_kb", "anon_kb", "file_kb", "fds", "threads", "cpu_pct",
           "load1", "data_kb", "queue", "running",
           "workers", "bg_ack_s", "bg_done_s", "fg_done_s",
           "create_p50", "create_p99", "create_max", "fg_p50", "fg_p99", "fg_max",
           "kills", "restarts"]


def sample(ld, t_start, last):
    ctl, book = ld.ctl, ld.book
    now = time.monotonic()
    dt = max(1e-3, now - last["t"])
    last["t"] = now
    iv = book.take_interval()
    row = {"t": round(now - t_start, 1), "gen": ctl.generation}
    row["age"] = round(now - ctl.gen_started.get(ctl.generation, now), 1)
    st = None
    if ctl.up.is_set() and ctl.proc is not None:
        if ctl.proc.poll() is not None and ctl.up.is_set():
            book.problems.add("server generation %d exited by itself with %s"
                              % (ctl.generation, ctl.proc.returncode))
        st = proc_stats(ctl.proc.pid)
    row["rss_kb"], row["fds"], row["threads"], row["anon_kb"], row["file_kb"], cpu = \
        st if st else (None,) * 6
    # Server CPU over the interval (None across a restart).
    prev = last.get("cpu")
    row["cpu_pct"] = (round(100.0 * (cpu - prev[1]) / dt, 1)
                      if cpu is not None and prev and prev[0] == ctl.generation else None)
    last["cpu"] = (ctl.generation, cpu) if cpu is not None else None
    row["load1"] = round(os.getloadavg()[0], 2)
    row["data_kb"] = dir_kb(ctl.data_dir)
    row["queue"] = row["running"] = row["workers"] = None
    if ctl.up.is_set():
        try:
            s = H.parse_status(H.admin(ctl.port, "status", timeout=10.0))
            row["queue"] = sum(v[0] for f, v in s.items() if f in (BG_FUNC, FG_FUNC))
            row["running"] = sum(v[1] for f, v in s.items() if f in (BG_FUNC, FG_FUNC))
            row["workers"] = sum(v[2] for f, v in s.items() if f in (BG_FUNC, FG_FUNC))
        except (OSError, H.TestFailure, ValueError, IndexError):
            pass
    row["bg_ack_s"] = round(iv["bg_acked"] / dt, 1)
    row["bg_done_s"] = round(iv["bg_done"] / dt, 1)
    row["fg_done_s"] = round(iv["fg_done"] / dt, 1)
    for name, vals in (("create", iv["create_ms"]), ("fg", iv["fg_ms"])):
        for p, col in ((50, "_p50"), (99, "_p99"), (100, "_max")):
            v = pct(vals, p)
            row[name + col] = None if v is None else round(v, 2)
    with book.lock:
        row["kills"] = book.kills
        row["restarts"] = book.restarts["term"] + book.restarts["kill"]
    return row


def fmt(v, w=7):
    return ("%*s" % (w, "-")) if v is None else ("%*s" % (w, v))


def print_row(row):
    print("t=%6.0fs gen=%-2d rss=%6sMB anon=%5sMB fds=%4s thr=%3s cpu=%5s%% data=%6sMB q=%6s | "
          "bg %6s/s done %6s/s "
          "fg %5s/s | created p50/p99/max %s/%s/%s ms | fg %s/%s/%s ms | kills %d restarts %d"
          % (row["t"], row["gen"],
             "-" if row["rss_kb"] is None else "%.1f" % (row["rss_kb"] / 1024.0),
             "-" if row["anon_kb"] is None else "%.1f" % (row["anon_kb"] / 1024.0),
             fmt(row["fds"], 0), fmt(row["threads"], 0), fmt(row["cpu_pct"], 0), "%.1f" % (row["data_kb"] / 1024.0),
             fmt(row["queue"], 0), row["bg_ack_s"], row["bg_done_s"], row["fg_done_s"],
             fmt(row["create_p50"], 0), fmt(row["create_p99"], 0), fmt(row["create_max"], 0),
             fmt(row["fg_p50"], 0), fmt(row["fg_p99"], 0), fmt(row["fg_max"], 0),
             row["kills"], row["restarts"]), flush=True)


def median(vals):
    return pct(vals, 50)


def growth(rows, warmup, duration):
    """No growth: compare the first and the last third of the run.

    Samples taken in the first `warmup` seconds of the run or of a server
    generation are left out (a fresh process grows its allocator arenas
    and connection buffers), as are samples while the server was down.
    Memory depends on how many jobs are held, so RSS is compared only over
    samples whose queue depth is at or below the median depth of all kept
    samples (the low-queue samples of both thirds; the pause cycle gives
    each third plenty of them). The thresholds:

      RSS      RssAnon (heap and stacks; VmRSS also counts the pages of the
               100 MB binary that have run, which grow as rarer code runs
               for the first time, and is only shown):
               median(last) <= 1.25 * median(first) + 8 MiB: a leak of a
               few hundred bytes per job or per connection over an hour of
               this load is tens of MB; allocator noise is well within.
      fds      max(last) <= max(first) + 4: fds are the listeners, the
               store's files and one per connection; the load keeps about
               the same number of connections open all along.
      threads  max(last) <= max(first).
      data dir median(last) <= 1.5 * max(first) + 32 MiB: the log must be
               compacted, its size follows the queue, not the jobs run.
    """
    kept = [r for r in rows if r["rss_kb"] is not None and r["queue"] is not None
            and r["t"] >= warmup and r["age"] >= warmup]
    # "ok": None while nothing is judged (too few samples): not a pass.
    out = {"kept_samples": len(kept), "checks": [], "ok": None}
    if len(kept) < 6:
        out["skipped"] = "too few samples after warm-up (%d)" % len(kept)
        return out
    span = duration - warmup
    first = [r for r in kept if r["t"] < warmup + span / 3.0]
    last = [r for r in kept if r["t"] >= warmup + 2.0 * span / 3.0]
    if not first or not last:
        out["skipped"] = "a third without samples"
        return out
    out["ok"] = True
    qmed = median([r["queue"] for r in kept])
    lo_first = [r for r in first if r["queue"] <= qmed] or first
    lo_last = [r for r in last if r["queue"] <= qmed] or last

    def check(name, a, b, limit, ok):
        out["checks"].append({"what": name, "first": a, "last": b, "limit": limit, "ok": ok})
        out["ok"] = out["ok"] and ok

    a = median([r["anon_kb"] for r in lo_first])
    b = median([r["anon_kb"] for r in lo_last])
    lim = 1.25 * a + 8 * 1024
    check("anon_kb (median, queue <= %d)" % qmed, a, b, round(lim), b <= lim)
    # VmRSS adds the binary's pages as more of its code runs: shown, not judged.
    a = median([r["rss_kb"] for r in lo_first])
    b = median([r["rss_kb"] for r in lo_last])
    out["checks"].append({"what": "rss_kb (median, queue <= %d; not judged)" % qmed,
                          "first": a, "last": b, "limit": None, "ok": None})
    a, b = max(r["fds"] for r in first), max(r["fds"] for r in last)
    check("fds (max)", a, b, a + 4, b <= a + 4)
    a, b = max(r["threads"] for r in first), max(r["threads"] for r in last)
    check("threads (max)", a, b, a, b <= a)
    a = max(r["data_kb"] for r in first)
    b = median([r["data_kb"] for r in last])
    lim = 1.5 * a + 32 * 1024
    check("data_kb (max first, median last)", a, b, round(lim), b <= lim)
    return out


def generations(rows, warmup, ended):
    """Per server process: RSS and fds after its warm-up, first and last
    sample, with the queue depth beside them (a restart resets RSS, so
    growth inside one process shows here)."""
    out = []
    for g in sorted({r["gen"] for r in rows}):
        rs = [r for r in rows if r["gen"] == g and r["rss_kb"] is not None]
        warm = [r for r in rs if r["age"] >= warmup] or rs
        if not warm:
            continue
        a, b = warm[0], warm[-1]
        out.append({"gen": g, "ended": ended.get(g, "end"), "samples": len(rs),
                    "age_s": b["age"], "rss_kb_first": a["rss_kb"], "queue_first": a["queue"],
                    "rss_kb_last": b["rss_kb"], "queue_last": b["queue"],
                    "rss_kb_max": max(r["rss_kb"] for r in rs),
                    "anon_kb_first": a["anon_kb"], "anon_kb_last": b["anon_kb"],
                    "anon_kb_max": max(r["anon_kb"] for r in rs),
                    "fds_max": max(r["fds"] for r in rs),
                    "threads_max": max(r["threads"] for r in rs)})
    return out


def table(path, window):
    """A Markdown table of a run's CSV, one row per `window` seconds:
    the last sample's RSS, RssAnon, fds and threads in the window, the
    highest queue depth, the job rates, the median of the intervals' p50s
    and the highest p99 and max latency."""
    import csv as csvmod
    with open(path) as f:
        rows = [{k: (float(v) if v not in ("", None) else None) for k, v in r.items()}
                for r in csvmod.DictReader(f)]
    print("| minutes | gen | RSS MB | anon MB | fds | threads | max queue | bg acked/s | "
          "bg done/s | fg done/s | JOB_CREATED p50 / p99 / max ms | fg p50 / p99 / max ms | "
          "server CPU % | load |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")

    def f1(v, k=1):
        return "-" if v is None else ("%.*f" % (k, v))
    w = 0.0
    while True:
        rs = [r for r in rows if w < r["t"] <= w + window]
        if not rs:
            break
        up = [r for r in rs if r["rss_kb"] is not None]
        lastup = up[-1] if up else {}

        def agg(key, fn):
            vals = [r[key] for r in rs if r[key] is not None]
            return fn(vals) if vals else None
        cpu = agg("cpu_pct", median)
        print("| %d–%d | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s / %s / %s | %s / %s / %s | %s | %s |"
              % (w / 60, (w + window) / 60, ",".join(sorted({"%d" % r["gen"] for r in rs})),
                 f1(lastup.get("rss_kb") and lastup["rss_kb"] / 1024.0),
                 f1(lastup.get("anon_kb") and lastup["anon_kb"] / 1024.0),
                 f1(lastup.get("fds"), 0), f1(lastup.get("threads"), 0),
                 f1(agg("queue", max), 0),
                 f1(agg("bg_ack_s", lambda v: sum(v) / len(v)), 0),
                 f1(agg("bg_done_s", lambda v: sum(v) / len(v)), 0),
                 f1(agg("fg_done_s", lambda v: sum(v) / len(v)), 0),
                 f1(agg("create_p50", median)), f1(agg("create_p99", max)),
                 f1(agg("create_max", max)), f1(agg("fg_p50", median)), f1(agg("fg_p99", max)),
                 f1(agg("fg_max", max)), f1(cpu, 0), f1(agg("load1", median))))
        w += window


def main():
    if len(sys.argv) >= 3 and sys.argv[1] == "--table":
        table(sys.argv[2], float(sys.argv[3]) if len(sys.argv) > 3 else 300.0)
        return 0
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--bin", default=os.environ.get("GEARSHIFT")
                    or os.path.join(ROOT, "target", "debug", "gearshift"))
    ap.add_argument("--duration", type=float, default=60.0, help="seconds of load")
    ap.add_argument("--interval", type=float, default=None,
                    help="seconds between samples (default: 10, less for short runs)")
    ap.add_argument("--out", default=None, help="CSV of the samples; a .json summary beside it")
    ap.add_argument("--seed", type=int, default=None)
    ap.add_argument("--bg-rate", type=float, default=200.0, help="bg jobs/s, all submitters")
    ap.add_argument("--fg-rate", type=float, default=60.0, help="fg jobs/s, all clients")
    ap.add_argument("--bg-submitters", type=int, default=3)
    ap.add_argument("--fg-clients", type=int, default=2)
    ap.add_argument("--bg-workers", type=int, default=3)
    ap.add_argument("--fg-workers", type=int, default=2)
    ap.add_argument("--kill-every", type=float, default=None, help="seconds between worker kills")
    ap.add_argument("--restart-every", type=float, default=None,
                    help="seconds between server restarts (0: none)")
    ap.add_argument("--warmup", type=float, default=None)
    ap.add_argument("--min-growth-run", type=float, default=300.0,
                    help="runs shorter than this skip the growth checks")
    ap.add_argument("--drain-timeout", type=float, default=120.0)
    ap.add_argument("--server-args", default="",
                    help="more `serve` flags, e.g. \"--io-threads 3\" or \"--durability interval=50\"")
    ap.add_argument("--keep", action="store_true", help="keep the temp dir (data, server log)")
    args = ap.parse_args()

    d = args.duration
    interval = args.interval or min(10.0, max(1.0, d / 10.0))
    plan = {
        "kill_every": args.kill_every if args.kill_every is not None else max(3.0, min(30.0, d / 20.0)),
        "restart_every": (args.restart_every if args.restart_every is not None
                          else max(7.0, min(360.0, d / 10.0))),
        "cycle": max(6.0, min(90.0, d / 3.0)),
    }
    plan["pause"] = plan["cycle"] / 3.0
    warmup = args.warmup if args.warmup is not None else min(60.0, d / 10.0)
    seed = args.seed if args.seed is not None else random.SystemRandom().randrange(1 << 32)
    rng = random.Random(seed)
    binary = os.path.abspath(args.bin)
    if not os.access(binary, os.X_OK):
        print("no gearshift binary at %s (--bin or GEARSHIFT)" % binary)
        return 2
    commit = subprocess.run(["git", "-C", ROOT, "rev-parse", "--short", "HEAD"],
                            capture_output=True, text=True, timeout=10).stdout.strip()
    print("soak: %s, %.0fs, seed %d, commit %s, interval %.0fs, kill every %.0fs, restart every "
          "%.0fs, pause %.0fs of every %.0fs, warm-up %.0fs, %d cores"
          % (binary, d, seed, commit, interval, plan["kill_every"], plan["restart_every"],
             plan["pause"], plan["cycle"], warmup, os.cpu_count()), flush=True)

    tmp = tempfile.mkdtemp(prefix="gearshift-soak-")
    ctl = SoakServer(tmp, binary, shlex.split(args.server_args))
    book = Book(args.bg_submitters, args.fg_clients)
    ld = Load(ctl, book, args, rng)
    csv = open(args.out, "w") if args.out else None
    if csv:
        csv.write(",".join(COLUMNS) + "\n")
    rows, verdict = [], {}
    chaos = None
    t_start = time.monotonic()
    try:
        ctl.start()
        time.sleep(0.3)
        idle0 = proc_stats(ctl.proc.pid)[:3]
        print("idle server: rss %.1f MB, %d fds, %d threads; gearman port %d, http port %d"
              % (idle0[0] / 1024.0, idle0[1], idle0[2], ctl.port, ctl.http_port), flush=True)

        submitters = [BgSubmitter(ld, i, args.bg_rate / args.bg_submitters)
                      for i in range(args.bg_submitters)]
        clients = [FgClient(ld, i, args.fg_rate / args.fg_clients) for i in range(args.fg_clients)]
        workers = ([Worker(ld, i, [BG_FUNC], True) for i in range(args.bg_workers)]
                   + [Worker(ld, args.bg_workers + i, [FG_FUNC], False)
                      for i in range(args.fg_workers)])
        t_start = time.monotonic()
        t_end = t_start + d

        def start(name, fn):
            th = threading.Thread(target=guarded(name, book, fn), name=name, daemon=True)
            th.start()
            return th

        load_threads = ([start("bg-%d" % s.idx, s.run) for s in submitters]
                        + [start("fg-%d" % c.idx, c.run) for c in clients])
        worker_threads = [start("w-%d" % w.idx, w.run) for w in workers]
        side_threads = [start("admin", lambda: admin_loop(ld)), start("http", lambda: http_loop(ld))]
        chaos = start("chaos", lambda: chaos_loop(ld, workers, plan, t_start, t_end))

        last = {"t": t_start}
        next_sample = t_start + interval
        while time.monotonic() < t_end:
            sleep_until(min(next_sample, t_end), threading.Event())
            if time.monotonic() >= next_sample:
                row = sample(ld, t_start, last)
                rows.append(row)
                print_row(row)
                if csv:
                    csv.write(",".join("" if row[c] is None else str(row[c]) for c in COLUMNS) + "\n")
                    csv.flush()
                next_sample += interval

        # ---- stop the load, drain, close, check idle fds, stop the server
        ld.stop_submit.set()
        for th in load_threads + [chaos]:
            th.join(45.0)
            if th.is_alive():
                book.problems.add("thread %s did not stop within 45s" % th.name)
        if not ctl.up.is_set():
            ctl.start()
        ld.bg_paused.clear()
        t_drain = time.monotonic()
        drain_deadline = t_drain + args.drain_timeout

        def missing():
            with book.lock:
                return [(i, n) for i in range(len(book.acks))
                        for n in range(len(book.acks[i]))
                        if book.acks[i][n] and not book.done[i][n]]
        while time.monotonic() < drain_deadline:
            try:
                s = H.parse_status(H.admin(ctl.port, "status", timeout=10.0))
                queue = s.get(BG_FUNC, (0, 0, 0))[0] + s.get(FG_FUNC, (0, 0, 0))[0]
            except (OSError, H.TestFailure):
                queue = -1
            if queue == 0 and not missing():  # (missing() only once the queue is empty)
                break
            time.sleep(0.2)
        drain_secs = time.monotonic() - t_drain
        ld.stop_work.set()
        ld.stop_side.set()
        for th in worker_threads + side_threads:
            th.join(30.0)
            if th.is_alive():
                book.problems.add("thread %s did not stop within 30s" % th.name)
        row = sample(ld, t_start, last)
        rows.append(row)
        print_row(row)
        if csv:
            csv.write(",".join("" if row[c] is None else str(row[c]) for c in COLUMNS) + "\n")
        # Every load connection is closed: the fds must come back to what a
        # fresh idle server had.
        idle_end = None
        fd_deadline = time.monotonic() + 10.0
        while time.monotonic() < fd_deadline:
            idle_end = proc_stats(ctl.proc.pid)
            idle_end = idle_end and idle_end[:3]
            if idle_end and idle_end[1] <= idle0[1]:
                break
            time.sleep(0.2)
        final_status = H.admin(ctl.port, "status", timeout=10.0)
        term_ok, term_err = True, None
        try:
            ctl.stop_graceful(timeout=30.0)
        except H.TestFailure as e:
            term_ok, term_err = False, str(e)

        # ---- verdict
        miss = missing()
        with book.lock:
            acked = sum(1 for a in book.acks for x in a if x)
            sent = book.totals["bg_sent"]
            unacked_ran = sum(1 for i in range(len(book.acks)) for n in range(len(book.acks[i]))
                              if not book.acks[i][n] and book.done[i][n])
            multi_runs = sum(1 for r, sb in zip(book.runs, book.subs)
                             for x, y in zip(r, sb) if x > y)
            dups, dup_samples = book.classify_dups(ctl.ended)
            totals = dict(book.totals)
            kills, restarts = book.kills, dict(book.restarts)
        problems = list(book.problems.items)
        checks = []

        def check(name, ok, detail):
            """ok: None when the run could not judge it (too short): shown as
            `not judged`, neither a pass nor a failure."""
            checks.append({"check": name, "ok": None if ok is None else bool(ok),
                           "detail": detail})

        check("no acknowledged bg job lost", not miss,
              "%d acknowledged, %d not completed%s" % (acked, len(miss),
                                                       (": " + ", ".join("bg:%d:%d" % m for m in miss[:20])) if miss else ""))
        check("no unexplained duplicate completion", dups["unexplained"] == 0,
              "duplicate completions: %d after a cut-off completion, %d after a SIGKILL, "
              "%d unexplained" % (dups["cut"], dups["sigkill"], dups["unexplained"]))
        check("no job the suite never sent", book.unknown_runs == 0, "%d" % book.unknown_runs)
        check("every fg job completed or cut by a restart",
              totals["fg_sent"] == totals["fg_done"] + book.fg_lost_restart,
              "%d sent, %d completed, %d lost to a restart"
              % (totals["fg_sent"], totals["fg_done"], book.fg_lost_restart))
        check("no problem seen by the load threads", not problems,
              "%d: %s" % (len(problems), " | ".join(p[:300] for p in problems[:10])))
        check("idle fds back to the fresh server's", idle_end and idle_end[1] <= idle0[1],
              "fresh %s, end %s" % (idle0[1], idle_end[1] if idle_end else None))
        check("clean exit on SIGTERM", term_ok, term_err or "exit 0")
        check("drained", "soak_" not in final_status or all(
            v[0] == 0 for f, v in H.parse_status(final_status).items() if f.startswith("soak_")),
            final_status.strip().replace("\n", "; "))
        # None of them in a run too short to expect one: not judged.
        if plan["kill_every"]:
            long_enough = d >= 3 * plan["kill_every"]
            check("worker kills happened", kills >= 1 or (False if long_enough else None),
                  "%d%s" % (kills, "" if long_enough else "; run shorter than 3 kill intervals"))
        if plan["restart_every"]:
            long_enough = d >= plan["restart_every"] + 5
            check("restarts happened", sum(restarts.values()) >= 1 or (
                False if long_enough else None), "%s%s" % (
                    restarts, "" if long_enough else "; run shorter than a restart interval + 5 s"))
        gr = growth(rows, warmup, d) if d >= args.min_growth_run else {
            "skipped": "run shorter than --min-growth-run (%gs)" % args.min_growth_run,
            "ok": None, "checks": []}
        check("no growth", gr["ok"], gr.get("skipped") or "; ".join(
            "%s first %s last %s limit %s%s" % (c["what"], c["first"], c["last"], c["limit"],
                                                " EXCEEDED" if c["ok"] is False else "")
            for c in gr["checks"]))

        # A check not judged (ok None) neither passes nor fails the run.
        all_ok = all(c["ok"] is not False for c in checks)
        lat_create = [r["create_p99"] for r in rows if r["create_p99"] is not None]
        summary = {
            "date": time.strftime("%Y-%m-%d %H:%M:%S %Z"), "commit": commit, "binary": binary,
            "seed": seed, "duration_s": d, "plan": plan, "interval_s": interval,
            "warmup_s": warmup, "cores": os.cpu_count(),
            "bg": {"sent": sent, "acknowledged": acked, "completions": totals["bg_done"],
                   "ran_without_ack": unacked_ran, "assigned_more_often_than_sent": multi_runs,
                   "duplicates": dups, "duplicate_samples": dup_samples},
            "fg": {"sent": totals["fg_sent"], "completed": totals["fg_done"],
                   "lost_to_restart": book.fg_lost_restart},
            "totals": totals, "kills": kills, "restarts": restarts,
            "server_ready_s": [round(s, 3) for _t, s in ctl.ready_times],
            "idle_fresh": idle0, "idle_end": idle_end, "drain_s": round(drain_secs, 1),
            "growth": gr, "generations": generations(rows, warmup, ctl.ended), "checks": checks, "problems": problems,
            "worst_create_p99_ms": max(lat_create) if lat_create else None,
            "verdict": "PASS" if all_ok else "FAIL",
        }
        verdict = summary
        print("---")
        print("bg: %d sent, %d acknowledged, %d completions, %d ran without ack, "
              "%d assigned more often than sent" % (sent, acked, totals["bg_done"], unacked_ran, multi_runs))
        print("fg: %d sent, %d completed, %d lost to a restart"
              % (totals["fg_sent"], totals["fg_done"], book.fg_lost_restart))
        print("kills %d, restarts %s, admin sessions %d, http requests %d, event streams %d, "
              "coalescing resubmits %d, drain %.1fs, restart ready times %s"
              % (kills, restarts, totals["admin_sessions"], totals["http_requests"],
                 totals["events_streams"], totals["coalesce_resubmits"], drain_secs,
                 ", ".join("%.2fs" % s for _t, s in ctl.ready_times)))
        for g in summary["generations"]:
            print("generation %(gen)d (%(ended)s, %(age_s).0fs): rss %(rss_kb_first)s kB, anon "
                  "%(anon_kb_first)s kB (queue %(queue_first)s) -> rss %(rss_kb_last)s kB, anon "
                  "%(anon_kb_last)s kB (queue %(queue_last)s), max rss %(rss_kb_max)s kB, max anon "
                  "%(anon_kb_max)s kB; "
                  "max fds %(fds_max)s, max threads %(threads_max)s" % g)
        for c in checks:
            print("%s %s: %s" % ({True: "ok  ", False: "FAIL", None: "not judged"}[c["ok"]],
                                 c["check"], c["detail"]))
        print("soak %s" % summary["verdict"], flush=True)
        # The checks as scripts/test.sh counts a suite's tests.
        print("%d passed, %d failed, %d skipped"
              % tuple(sum(1 for c in checks if c["ok"] is v) for v in (True, False, None)),
              flush=True)
    finally:
        ld.stop_submit.set()
        ld.stop_work.set()
        ld.stop_side.set()
        if chaos is not None:
            chaos.join(40.0)  # it may be starting a server: let it, then stop that
        ctl.close()
        if csv:
            csv.close()
        if args.out:
            base = args.out[:-4] if args.out.endswith(".csv") else args.out
            with open(base + ".json", "w") as f:
                json.dump(dict(verdict, samples=rows), f, indent=1, default=str)
        if args.keep or verdict.get("verdict") != "PASS":
            print("kept %s (server log: %s)" % (tmp, ctl.log_path))
        else:
            shutil.rmtree(tmp, ignore_errors=True)
    return 0 if verdict.get("verdict") == "PASS" else 1


def _on_term(signum, _frame):
    # `timeout` and Ctrl-C: unwind through main's `finally`, which stops
    # the server (it runs in a session of its own).
    raise KeyboardInterrupt("signal %d" % signum)


if __name__ == "__main__":
    signal.signal(signal.SIGTERM, _on_term)
    sys.exit(main())
