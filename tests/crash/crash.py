#!/usr/bin/env python3
"""Crash suite: SIGKILL the durable server under load, restart it, and check
that no acknowledged background job is ever lost.

Three scenarios, each on a fresh temporary data directory:

  fsync_kill_cycles     --durability fsync. Submitter threads pipeline
                        SUBMIT_JOB_BG over raw connections (payload
                        `seq:<submitter>:<n>`, every payload sent once) while
                        the server is SIGKILLed at random points and restarted
                        on the same data dir (same port when it can be bound
                        again, else a new free one); some kills hit while
                        worker threads drain (GRAB_JOB / WORK_COMPLETE), so
                        Done records interleave with Adds. Finally a fresh
                        server is drained empty and the records are checked:
                        (a) every job that got JOB_CREATED ran at least once;
                        (b) nothing ran that was not submitted;
                        (c) jobs that ran more than once, and jobs that ran
                            without their JOB_CREATED having arrived, are
                            counted and printed (both allowed);
                        (d) a job's handle seen by a worker (also after
                            restarts) is the one its submitter got, no handle
                            names two jobs, and handles given out after a
                            restart are above every earlier one.
                        A graceful stop and restart at the end must come back
                        empty.
  interval_kill_cycles  --durability interval=50: the same with fewer kills.
                        A process kill loses nothing from the page cache, so
                        (a) must hold as well as (b).
  large_payload_kill    256 KiB jobs: kills during the stream (torn tails and
                        compactions likely), one torn tail appended by hand
                        so the cut path is always taken; restarts must work
                        and every acknowledged job must come back intact.

Decisions (kill delays, downtimes, windows, which kills hit draining workers)
come from a seeded RNG printed at the start; CRASH_SEED=<n> replays them.
Thread interleavings are not deterministic, the plan is.

usage: [GEARSHIFT_BIN=target/debug/gearshift] [CRASH_SEED=n] [CRASH_KEEP=1]
       python3 tests/crash/crash.py [name-substring ...]
Final line `N passed, N failed`; exit status 1 on any failure. Python 3
stdlib only; every wait is bounded; everything on 127.0.0.1.
"""

import os
import random
import re
import shlex
import shutil
import signal
import struct
import subprocess
import sys
import tempfile
import threading
import time
import traceback
import zlib
from collections import Counter, deque

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.abspath(os.path.join(HERE, "..", ".."))
sys.path.insert(0, os.path.join(ROOT, "tests", "interop"))
sys.dont_write_bytecode = True  # keep tests/interop free of __pycache__

import harness as H  # noqa: E402

BINARY = os.environ.get("GEARSHIFT_BIN") or os.path.join(ROOT, "target", "debug", "gearshift")
SEED = int(os.environ.get("CRASH_SEED") or random.SystemRandom().randrange(1 << 32))
KEEP = os.environ.get("CRASH_KEEP") == "1"
FUNC = "crash"

# The log file layout (crates/gearshift-store/src/log/frame.rs), used only to
# append a torn frame by hand.
LOG_FILE = "queue.gslog"
FRAME_MAGIC = 0x47534631

PAYLOAD_RE = re.compile(rb"^seq:(\d+):(\d+)(?::|$)")


class Problems:
    """Thread-safe list of failures found by the submitter/worker threads."""

    def __init__(self):
        self.lock = threading.Lock()
        self.items = []

    def add(self, msg):
        with self.lock:
            if len(self.items) < 200:
                self.items.append(msg)


# --------------------------------------------------------------------------
# The server under test


class CrashServer(H.Server):
    """gearshift on a fixed data dir; kill -9 and restart on the same port.

    `generation` is the index of the server process a new connection reaches:
    it is bumped once a killed process is reaped, before the next one starts,
    so a client that reads the same generation before and after connecting
    knows which process it talks to.
    """

    def __init__(self, tmp, durability, label):
        self.tmp = tmp
        self.data_dir = os.path.join(tmp, "data")
        self.log_path = os.path.join(tmp, "server.log")
        self.stdout_path = os.path.join(tmp, "server.stdout")
        template = ("%s serve -L 127.0.0.1 -p {port} --data-dir %s --durability %s "
                    "--log-file %s" % (shlex.quote(BINARY), shlex.quote(self.data_dir),
                                       durability, shlex.quote(self.log_path)))
        super().__init__(template, label)
        self.generation = 0
        self.up = threading.Event()
        self.starts = []  # (generation, port, seconds until listening)
        self.kills = 0

    def log_text(self):
        out = ""
        for p in (self.stdout_path, self.log_path):
            try:
                with open(p, "rb") as f:
                    out += f.read().decode("utf-8", "replace")
            except OSError:
                pass
        return out

    def start(self, ready_timeout=30.0):
        want = self.port
        last = None
        for attempt in range(4):
            self.port = want if (want and attempt == 0) else H.free_port()
            argv = shlex.split(self.template.replace("{port}", str(self.port)))
            self.log = open(self.stdout_path, "ab")
            t0 = time.monotonic()
            self.proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=self.log,
                                         stderr=subprocess.STDOUT, start_new_session=True)
            try:
                self._wait_ready(ready_timeout)
            except H.TestFailure as e:
                last = e
                self._reap()
                continue
            self.starts.append((self.generation, self.port, time.monotonic() - t0))
            self.up.set()
            return
        raise H.TestFailure("could not (re)start the server on %s: %s" % (self.data_dir, last))

    def _reap(self):
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                raise H.TestFailure("server pid %d did not die after SIGKILL" % self.proc.pid)
        if self.log is not None:
            self.log.close()
            self.log = None

    def kill(self):
        """SIGKILL the running server; fails if it had already died by itself."""
        self.up.clear()
        if self.proc.poll() is not None:
            raise H.TestFailure("server exited by itself with %s before the kill; log tail: %s"
                                % (self.proc.returncode, self.log_text()[-2000:]))
        os.kill(self.proc.pid, signal.SIGKILL)
        self._reap()
        self.proc = None
        self.kills += 1
        self.generation += 1

    def stop_graceful(self, timeout=20.0):
        """SIGTERM and wait for a clean exit (status 0)."""
        self.up.clear()
        self.proc.send_signal(signal.SIGTERM)
        try:
            rc = self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self._reap()
            raise H.TestFailure("server did not stop within %.0fs of SIGTERM" % timeout)
        self._reap()
        self.proc = None
        self.generation += 1
        if rc != 0:
            raise H.TestFailure("server exited with %s after SIGTERM" % rc)

    def close(self):
        self.up.clear()
        if self.proc is not None:
            self._reap()
            self.proc = None

    def log_count(self, needle):
        return self.log_text().count(needle)


def connect(ctl, stop, timeout=30.0):
    """Connect to the current server once it is up. -> (Conn, generation) or None if stopped."""
    deadline = time.monotonic() + timeout
    while True:
        if stop.is_set():
            return None
        if time.monotonic() > deadline:
            raise H.TestFailure("no server to connect to within %.0fs" % timeout)
        if not ctl.up.wait(0.1):
            continue
        gen, port = ctl.generation, ctl.port
        try:
            c = H.Conn(port, timeout=10.0)
        except OSError:
            time.sleep(0.02)
            continue
        # A connect to a port nobody listens on can pick that very port as its
        # own and connect to itself; and the server may have changed meanwhile.
        if c.sock.getsockname() == c.sock.getpeername() or ctl.generation != gen:
            c.close()
            time.sleep(0.02)
            continue
        return c, gen


def server_gone(ctl, gen):
    return ctl.generation != gen or not ctl.up.is_set()


# --------------------------------------------------------------------------
# Payloads


def make_payload(size, i, n):
    tag = b"seq:%d:%d" % (i, n)
    if size <= len(tag):
        return tag
    # Deterministic filler that differs per job, so a swapped or torn body shows.
    unit = b":%08x" % (zlib.crc32(tag) & 0xFFFFFFFF)
    return (tag + unit * (size // len(unit) + 1))[:size]


def parse_payload(data, size):
    """-> (i, n) if data is exactly a payload this suite sends, else None."""
    m = PAYLOAD_RE.match(data[:64])
    if not m:
        return None
    i, n = int(m.group(1)), int(m.group(2))
    if data != make_payload(size, i, n):
        return None
    return i, n


def handle_number(h):
    try:
        return int(h.rsplit(b":", 1)[1])
    except (IndexError, ValueError):
        return None


# --------------------------------------------------------------------------
# Submitters and workers


class Submitter(threading.Thread):
    """Pipelines SUBMIT_JOB_BG over its own connection, `window` in flight.

    Every n is sent once (never resubmitted): jobs in flight when the
    connection dies are "sent, not acknowledged".
    """

    def __init__(self, idx, ctl, window, size, problems):
        super().__init__(name="submitter-%d" % idx, daemon=True)
        self.idx = idx
        self.ctl = ctl
        self.window = window
        self.size = size
        self.problems = problems
        self.stop_evt = threading.Event()
        self.next = 0           # payloads 0..next-1 were (at least partly) sent
        self.acked = {}         # n -> (handle, generation)
        self.connections = 0

    def run(self):
        try:
            while not self.stop_evt.is_set():
                got = connect(self.ctl, self.stop_evt)
                if got is None:
                    return
                conn, gen = got
                self.connections += 1
                try:
                    if self._pump(conn, gen):
                        return
                except (OSError, H.TestFailure) as e:
                    if not (conn.eof or isinstance(e, OSError)) and not server_gone(self.ctl, gen):
                        # A timeout on a live server: JOB_CREATED never came.
                        self.problems.add("submitter %d: %s (server generation %d alive)"
                                          % (self.idx, e, gen))
                        return
                finally:
                    conn.close()
        except Exception:  # noqa: BLE001 - reported as a failure
            self.problems.add("submitter %d crashed:\n%s" % (self.idx, traceback.format_exc()))

    def _pump(self, conn, gen):
        out = deque()
        low = max(1, self.window // 2)
        while True:
            if self.stop_evt.is_set():
                if not out:
                    return True
            elif len(out) <= low:
                batch = []
                while len(out) < self.window:
                    n = self.next
                    self.next += 1
                    out.append(n)
                    batch.append(H.packet(H.SUBMIT_JOB_BG, FUNC, b"",
                                          make_payload(self.size, self.idx, n)))
                conn.send(b"".join(batch))
            magic, t, body = conn.read_pkt(timeout=15.0)
            n = out.popleft()
            if magic == H.RES and t == H.JOB_CREATED:
                self.acked[n] = (body, gen)
            else:
                self.problems.add("submitter %d job %d: expected JOB_CREATED, got %s %r"
                                  % (self.idx, n, H.PACKET_NAMES.get(t, t), body[:200]))


class Worker(threading.Thread):
    """CAN_DO, keeps `grabs` GRAB_JOBs in flight, records every JOB_ASSIGN
    (before its WORK_COMPLETE is sent), sleeps with PRE_SLEEP when idle."""

    def __init__(self, idx, ctl, grabs, size, problems):
        super().__init__(name="worker-%d" % idx, daemon=True)
        self.idx = idx
        self.ctl = ctl
        self.grabs = grabs
        self.size = size
        self.problems = problems
        self.stop_evt = threading.Event()
        self.runs = []          # (handle, (i, n) or None, generation, monotonic time)
        self.bad = []           # payloads that are not ours (first bytes)

    def run(self):
        try:
            while not self.stop_evt.is_set():
                got = connect(self.ctl, self.stop_evt)
                if got is None:
                    return
                conn, gen = got
                try:
                    if self._work(conn, gen):
                        return
                except (OSError, H.TestFailure) as e:
                    if not (conn.eof or isinstance(e, OSError)) and not server_gone(self.ctl, gen):
                        self.problems.add("worker %d: %s" % (self.idx, e))
                        return
                finally:
                    conn.close()
        except Exception:  # noqa: BLE001
            self.problems.add("worker %d crashed:\n%s" % (self.idx, traceback.format_exc()))

    def _work(self, conn, gen):
        grab = H.packet(H.GRAB_JOB)
        conn.send(H.packet(H.CAN_DO, FUNC) + grab * self.grabs)
        pending = self.grabs
        sleeping_since = None
        stop_deadline = None
        while True:
            if self.stop_evt.is_set():
                if pending == 0:
                    return True
                if stop_deadline is None:
                    stop_deadline = time.monotonic() + 10.0
                elif time.monotonic() > stop_deadline:
                    raise H.TestFailure("GRAB_JOB unanswered for 10s")
            try:
                magic, t, body = conn.read_pkt(timeout=0.2)
            except H.TestFailure:
                if conn.eof:
                    raise
                # Idle. A missed wake-up must not hang the drain: grab again
                # after a second of sleep.
                if (sleeping_since is not None and not self.stop_evt.is_set()
                        and time.monotonic() - sleeping_since > 1.0):
                    conn.send(grab * self.grabs)
                    pending, sleeping_since = self.grabs, None
                continue
            if magic != H.RES:
                self.problems.add("worker %d: bad magic %r" % (self.idx, magic))
            if t == H.JOB_ASSIGN:
                handle, func, data = body.split(b"\0", 2)
                key = parse_payload(data, self.size)
                self.runs.append((handle, key, gen, time.monotonic()))
                if key is None or func != FUNC.encode():
                    self.bad.append((handle, func, data[:80], len(data)))
                done = H.packet(H.WORK_COMPLETE, handle, b"")
                if self.stop_evt.is_set():
                    conn.send(done)
                    pending -= 1
                else:
                    conn.send(done + grab)
            elif t == H.NO_JOB:
                pending -= 1
                if pending == 0 and not self.stop_evt.is_set():
                    conn.send(H.packet(H.PRE_SLEEP))
                    sleeping_since = time.monotonic()
            elif t == H.NOOP:
                if sleeping_since is not None and not self.stop_evt.is_set():
                    conn.send(grab * self.grabs)
                    pending, sleeping_since = self.grabs, None
            else:
                self.problems.add("worker %d: unexpected %s %r"
                                  % (self.idx, H.PACKET_NAMES.get(t, t), body[:200]))


class Pool:
    def __init__(self, ctl, n, grabs, size, problems, first_idx):
        self.workers = [Worker(first_idx + k, ctl, grabs, size, problems) for k in range(n)]
        for w in self.workers:
            w.start()

    def stop(self, timeout=20.0):
        for w in self.workers:
            w.stop_evt.set()
        deadline = time.monotonic() + timeout
        for w in self.workers:
            w.join(max(0.1, deadline - time.monotonic()))
            if w.is_alive():
                raise H.TestFailure("%s did not stop within %.0fs" % (w.name, timeout))


def queued(port):
    return H.status(port).get(FUNC, (0, 0, 0))[0]


# --------------------------------------------------------------------------
# A scenario: submit under kill -9, drain, verify


class Scenario:
    def __init__(self, name, durability, submitters, windows, kills, delay, downtime,
                 worker_kills, workers=4, grabs=16, size=0, inject_torn_after=None):
        self.name = name
        self.rng = random.Random("%d:%s" % (SEED, name))
        rng = self.rng
        self.durability = durability
        self.size = size
        self.windows = [rng.choice(windows) for _ in range(submitters)]
        self.delays = [round(rng.uniform(*delay), 3) for _ in range(kills)]
        self.downtimes = [round(rng.uniform(*downtime), 3) for _ in range(kills)]
        candidates = list(range(kills - 1))  # the last kill is before the final drain
        self.worker_kills = sorted(rng.sample(candidates, min(worker_kills, len(candidates))))
        self.workers = workers
        self.grabs = grabs
        self.inject_torn_after = inject_torn_after
        self.problems = Problems()
        self.subs = []
        self.all_workers = []
        self.tmp = tempfile.mkdtemp(prefix="crash-%s-" % name)
        self.ctl = CrashServer(self.tmp, durability, name)
        self.timeline = []
        self.kill_times = []
        self.t0 = None

    def note(self, what):
        self.timeline.append("%6.2fs %s" % (time.monotonic() - self.t0, what))

    def plan(self):
        return ("seed=%d durability=%s submitters=%d windows=%s kill delays=%s downtimes=%s "
                "workers draining during kills %s%s"
                % (SEED, self.durability, len(self.windows), self.windows, self.delays,
                   self.downtimes, self.worker_kills,
                   "" if self.inject_torn_after is None
                   else "; torn frame appended after kill %d" % self.inject_torn_after))

    def pool(self, n):
        p = Pool(self.ctl, n, self.grabs, self.size, self.problems, len(self.all_workers))
        self.all_workers.extend(p.workers)
        return p

    def append_torn_frame(self):
        """What a flush cut short by the kill leaves: a frame header promising
        more payload than follows."""
        path = os.path.join(self.ctl.data_dir, LOG_FILE)
        body = bytes(self.rng.randrange(256) for _ in range(4096))
        with open(path, "ab") as f:
            f.write(struct.pack("<III", FRAME_MAGIC, 300_000, zlib.crc32(body)) + body)

    def run(self):
        print("   [%s] plan: %s" % (self.name, self.plan()), flush=True)
        self.t0 = time.monotonic()
        self.ctl.start()
        self.note("server gen 0 on port %d" % self.ctl.port)
        self.subs = [Submitter(i, self.ctl, w, self.size, self.problems)
                     for i, w in enumerate(self.windows)]
        for s in self.subs:
            s.start()
        pool = None
        kills = len(self.delays)
        for k in range(kills):
            if k in self.worker_kills and pool is None:
                pool = self.pool(self.workers)
                self.note("workers start draining")
            time.sleep(self.delays[k])
            self.ctl.kill()
            self.kill_times.append(time.monotonic())
            self.note("SIGKILL %d (submitted so far %d)" % (k, sum(s.next for s in self.subs)))
            if k == kills - 1:
                for s in self.subs:
                    s.stop_evt.set()
            time.sleep(self.downtimes[k])
            if self.inject_torn_after == k:
                self.append_torn_frame()
                self.note("torn frame appended")
            self.ctl.start()
            self.note("server gen %d on port %d (%.2fs to listen)"
                      % (self.ctl.generation, self.ctl.port, self.ctl.starts[-1][2]))
            if pool is not None and (k + 1) not in self.worker_kills:
                pool.stop()
                pool = None
                self.note("workers stopped")
        for s in self.subs:
            s.join(20.0)
            if s.is_alive():
                raise H.TestFailure("%s did not stop" % s.name)
        self.check_problems()
        # The final drain, on a freshly restarted server.
        pool = self.pool(self.workers)
        self.wait_drained(90.0)
        pool.stop()
        self.note("drained")
        self.check_problems()
        # Every Done must survive a clean stop: a restart comes back empty.
        self.ctl.stop_graceful()
        self.ctl.start()
        left = queued(self.ctl.port)
        self.note("graceful restart: %d job(s) left" % left)
        H.check(left == 0, "after the drain, SIGTERM and a restart %d job(s) of %r came back"
                % (left, FUNC))
        self.ctl.close()

    def wait_drained(self, timeout):
        """Poll `status` until no job of FUNC is queued or running."""
        deadline = time.monotonic() + timeout
        left = None
        while True:
            if self.ctl.proc.poll() is not None:
                raise H.TestFailure("server exited with %s during the final drain"
                                    % self.ctl.proc.returncode)
            self.check_problems()
            try:
                left = queued(self.ctl.port)
            except (OSError, H.TestFailure) as e:
                left = "? (%s)" % e
            if left == 0:
                return
            if time.monotonic() > deadline:
                raise H.TestFailure("the final drain did not empty %r within %.0fs: %s left"
                                    % (FUNC, timeout, left))
            time.sleep(0.05)

    def check_problems(self):
        if self.problems.items:
            raise H.TestFailure("client threads reported:\n  " + "\n  ".join(self.problems.items[:20]))

    def close(self, ok):
        for s in self.subs:
            s.stop_evt.set()
        for w in self.all_workers:
            w.stop_evt.set()
        self.ctl.close()
        for t in self.subs + self.all_workers:
            t.join(5.0)
        if ok and not KEEP:
            shutil.rmtree(self.tmp, ignore_errors=True)
        else:
            print("   [%s] data dir and server log kept in %s" % (self.name, self.tmp), flush=True)

    def diagnostics(self):
        return ("\n  plan: %s\n  timeline:\n    %s\n  server log tail:\n%s"
                % (self.plan(), "\n    ".join(self.timeline), self.ctl.log_text()[-3000:]))

    # ---------------------------------------------------------------- checks

    def verify(self, require_a=True):
        """Checks (a)-(d); returns the statistics dict. Raises on failure."""
        fails = []
        sent = {(s.idx, n) for s in self.subs for n in range(s.next)}
        acked = {(s.idx, n): hg for s in self.subs for n, hg in s.acked.items()}
        runs = [r for w in self.all_workers for r in w.runs]
        bad = [b for w in self.all_workers for b in w.bad]
        ran = Counter(key for _h, key, _g, _t in runs if key is not None)

        # (b) nothing ran that was never submitted
        not_sent = [k for k in ran if k not in sent]
        if bad or not_sent:
            fails.append("(b) %d run(s) of payloads never sent; e.g. %r %r"
                         % (len(bad) + len(not_sent), bad[:3], not_sent[:3]))
        # (a) every acknowledged job ran
        lost = sorted(k for k in acked if k not in ran)
        if lost:
            ex = ["seq:%d:%d handle %s (acked by gen %d)" % (k + acked[k]) for k in lost[:5]]
            msg = "(a) %d acknowledged job(s) never ran, e.g. %s" % (len(lost), ex)
            if require_a:
                fails.append(msg)
            else:
                print("   [%s] NOTE %s" % (self.name, msg), flush=True)
        # (d) handles
        after_restart = 0
        handle_of = {}
        job_of = {}
        for h, key, gen, _t in runs:
            if key is None:
                continue
            if key in acked:
                ah, agen = acked[key]
                if h != ah:
                    fails.append("(d) seq:%d:%d acked as %r ran as %r" % (key + (ah, h)))
                elif gen > agen:
                    after_restart += 1
            if job_of.setdefault(h, key) != key:
                fails.append("(d) handle %r ran for two jobs: %r and %r" % (h, job_of[h], key))
            if handle_of.setdefault(key, h) != h:
                fails.append("(d) seq:%d:%d ran under two handles %r and %r"
                             % (key + (handle_of[key], h)))
        acked_handles = Counter(h for h, _g in acked.values())
        dup_handles = [h for h, c in acked_handles.items() if c > 1]
        if dup_handles:
            fails.append("(d) %d handle(s) given to two acknowledged jobs, e.g. %r"
                         % (len(dup_handles), dup_handles[:3]))
        # Handles handed out after a restart are above all handed out before.
        by_gen = {}
        for h, g in acked.values():
            n = handle_number(h)
            if n is None:
                fails.append("(d) handle %r does not end in a number" % h)
                continue
            lo, hi = by_gen.get(g, (n, n))
            by_gen[g] = (min(lo, n), max(hi, n))
        top = None
        for g in sorted(by_gen):
            lo, hi = by_gen[g]
            if top is not None and lo <= top:
                fails.append("(d) server gen %d handed out handle number %d, not above %d "
                             "of an earlier generation" % (g, lo, top))
            top = hi if top is None else max(top, hi)
        # A job runs twice only across a restart (its Done not yet stored at
        # the kill): within one server process it is never handed out again.
        # The lag: from its earlier run to the kill that made it run again.
        first_run = {}
        twice = []
        done_lag = 0.0
        for h, key, gen, t in sorted(runs, key=lambda r: r[3]):
            if key is None:
                continue
            if key in first_run:
                pgen, pt = first_run[key]
                if pgen == gen:
                    twice.append("seq:%d:%d (%r) in gen %d" % (key + (h, gen)))
                elif pgen < len(self.kill_times):
                    done_lag = max(done_lag, self.kill_times[pgen] - pt)
            first_run[key] = (gen, t)
        if twice:
            fails.append("%d job(s) ran twice within one server process, e.g. %s"
                         % (len(twice), twice[:5]))
        if acked and after_restart == 0:
            fails.append("(d) no acknowledged job ran after a restart: nothing was checked")

        stats = {
            "submitted": len(sent),
            "acked": len(acked),
            "sent_not_acked": len(sent) - len(acked),
            "runs": len(runs),
            "ran_more_than_once": sum(1 for c in ran.values() if c > 1),
            "ran_without_ack": sum(1 for k in ran if k not in acked),
            "lost_acked": len(lost),
            "acked_ran_after_restart": after_restart,
            "max_done_lag_s": round(done_lag, 3),
            "kills": self.ctl.kills,
            "ports": sorted({p for _g, p, _t in self.ctl.starts}),
            "max_restart_s": round(max(t for _g, _p, t in self.ctl.starts), 2),
            "torn_tails_cut": self.ctl.log_count("cutting it off"),
            "compactions": self.ctl.log_count("compacted the queue file"),
        }
        print("   [%s] %s" % (self.name, " ".join("%s=%s" % kv for kv in stats.items())),
              flush=True)
        print("   [%s] (c) ran more than once: %d; ran although JOB_CREATED never arrived: %d"
              % (self.name, stats["ran_more_than_once"], stats["ran_without_ack"]), flush=True)
        if fails:
            raise H.TestFailure("\n  ".join(fails[:20]))
        return stats


def scenario_test(make, check):
    def test():
        sc = make()
        ok = False
        try:
            sc.run()
            stats = sc.verify()
            check(sc, stats)
            ok = True
        except H.TestFailure as e:
            raise H.TestFailure("%s%s" % (e, sc.diagnostics()))
        finally:
            sc.close(ok)
    return test


# --------------------------------------------------------------------------
# The scenarios


def fsync_scenario():
    return Scenario("fsync_kill_cycles", "fsync", submitters=6, windows=[4, 8, 16, 32, 64],
                    kills=6, delay=(0.2, 1.2), downtime=(0.0, 0.3), worker_kills=2)


def fsync_check(sc, stats):
    H.check(stats["kills"] == 6, "expected 6 kills")
    H.check(stats["acked"] >= 10000, "only %d jobs acknowledged; the load is too light"
            % stats["acked"])


def interval_scenario():
    return Scenario("interval_kill_cycles", "interval=50", submitters=4, windows=[8, 16, 32],
                    kills=3, delay=(0.2, 0.8), downtime=(0.0, 0.2), worker_kills=1)


def interval_check(sc, stats):
    H.check(stats["acked"] >= 1000, "only %d jobs acknowledged" % stats["acked"])


def large_scenario():
    return Scenario("large_payload_kill", "fsync", submitters=3, windows=[2, 4, 6],
                    kills=3, delay=(0.3, 1.0), downtime=(0.0, 0.2), worker_kills=1,
                    workers=2, grabs=2, size=256 * 1024, inject_torn_after=1)


def large_check(sc, stats):
    H.check(stats["torn_tails_cut"] >= 1, "the appended torn frame was not reported cut")
    H.check(stats["acked"] >= 20, "only %d large jobs acknowledged" % stats["acked"])


TESTS = [
    ("fsync_kill_cycles", scenario_test(fsync_scenario, fsync_check)),
    ("interval_kill_cycles", scenario_test(interval_scenario, interval_check)),
    ("large_payload_kill", scenario_test(large_scenario, large_check)),
]


def main():
    if not os.access(BINARY, os.X_OK):
        print("gearshift binary not found at %s (cargo build -p gearshift, or set GEARSHIFT_BIN)"
              % BINARY)
        print("0 passed, 1 failed")
        return 1
    # run_suite prints SERVER_CMD in its header: show what this suite runs.
    os.environ["SERVER_CMD"] = ("%s serve -L 127.0.0.1 -p {port} --data-dir <tmp> "
                                "--durability <scenario> --log-file <tmp>/server.log" % BINARY)
    print("== crash suite seed: %d (replay with CRASH_SEED=%d)" % (SEED, SEED), flush=True)
    return H.run_suite("crash", TESTS)


if __name__ == "__main__":
    sys.exit(main())
