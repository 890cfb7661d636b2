#!/usr/bin/env python3
"""Crash suite: SIGKILL the durable server under load, restart it, and check
that no acknowledged background job is ever lost.

Four scenarios, each on a fresh temporary data directory:

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
                        compactions likely), one torn tail written by hand
                        where the killed flush went (unless that kill tore
                        one itself) so the cut path is always taken; restarts must work
                        and every acknowledged job must come back intact.
  retry_dead_kill       --durability fsync --config <policy>: crash_retry has
                        max_attempts 3, retry_on fail, a fixed 100 ms backoff
                        without jitter. Submitters (rate-limited, ~1-2k jobs
                        in all) send `seq:<submitter>:<n>`; workers answer
                        from k = n % 4: WORK_FAIL while the runs of that
                        payload seen so far (this one included, counted over
                        all workers and server generations) are <= k, then
                        WORK_COMPLETE; k = 3 always fails. 5 SIGKILLs while
                        submitting and while workers run; then workers run
                        until `status` shows no job of crash_retry (a job
                        waiting for its retry counts there) and:
                        (a) every acknowledged job with k < 3 completed at
                            least once and is not in `show dead`;
                        (b) `show dead` holds every acknowledged k = 3 job
                            once, function crash_retry, ATTEMPTS 3, and each
                            ran at least 3 times (unacknowledged k = 3 jobs
                            that were stored may be there too, counted).
                            ATTEMPTS may legitimately differ from the runs
                            the workers made: a Retry record is acknowledged
                            to nobody, so a kill between a WORK_FAIL and the
                            next group commit forgets that attempt and the
                            job runs once more (the server still counts 3).
                            ATTEMPTS above 3 is accepted only if the workers
                            ran the job at least that often; below 3 fails:
                            the server stops after its stored count of
                            failures, so it must not report fewer;
                        (c) nothing ran that was not submitted; runs after a
                            completion (a kill lost the Done) are counted and
                            printed, allowed; within one server process a job
                            runs at most 3 times, never after its
                            WORK_COMPLETE, and a retry comes >= 90 ms after
                            the WORK_FAIL;
                        (d) SIGTERM and a restart keep `show dead` byte for
                            byte with nothing of crash_retry in `status`;
                            `retry dead all crash_retry` answers `OK <count>`
                            and every revived job runs exactly 3 more times
                            (100 ms apart) and is dead again with ATTEMPTS 3.

Decisions (kill delays, downtimes, windows, which kills hit draining workers,
submitter limits) come from a seeded RNG printed at the start; CRASH_SEED=<n> replays them.
Thread interleavings are not deterministic, the plan is.

usage: [GEARSHIFT_BIN=target/debug/gearshift] [CRASH_SEED=n] [CRASH_KEEP=1]
       python3 tests/crash/crash.py [name-substring ...]
Final line `N passed, N failed, N skipped`; exit status 1 on any failure. Python 3
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
# write a torn frame by hand: a 16-byte file header, then frames of
# `magic u32 | payload length u32 | payload CRC u32 | CRC of those 12 bytes
# u32 | payload`, then zeros the store wrote ahead.
LOG_FILE = "queue.gslog"
FILE_HEADER = 16
FRAME_MAGIC = 0x47534631


def log_frames_end(f):
    """Walks the frame headers of an open log file. -> (offset after the
    last frame whose header checks out, whether that frame is whole and only
    zeros follow it)."""
    size = f.seek(0, os.SEEK_END)
    pos, last = FILE_HEADER, None
    while pos + 16 <= size:
        f.seek(pos)
        head = f.read(16)
        magic, length, crc, head_crc = struct.unpack("<IIII", head)
        if magic != FRAME_MAGIC or zlib.crc32(head[:12]) != head_crc:
            break
        last = (pos + 16, length, crc)
        pos += 16 + length
    if last is not None:
        f.seek(last[0])
        payload = f.read(last[1])
        if len(payload) != last[1] or zlib.crc32(payload) != last[2]:
            return pos, False
    f.seek(pos)
    while True:
        chunk = f.read(1 << 20)
        if not chunk:
            return pos, True
        if chunk.strip(b"\0"):
            return pos, False

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

    def __init__(self, tmp, durability, label, extra_args=""):
        self.tmp = tmp
        self.data_dir = os.path.join(tmp, "data")
        self.log_path = os.path.join(tmp, "server.log")
        self.stdout_path = os.path.join(tmp, "server.stdout")
        template = ("%s serve -L 127.0.0.1 -p {port} --data-dir %s --durability %s "
                    "--log-file %s%s" % (shlex.quote(BINARY), shlex.quote(self.data_dir),
                                         durability, shlex.quote(self.log_path), extra_args))
        super().__init__(template, label)
        self.generation = 0
        self.up = threading.Event()
        self.starts = []  # (generation, port, seconds until listening)
        self.kills = 0

    def log_text(self):
        # stdout last: it holds what the process said as it died (a start-up
        # error, a panic), which a tail of the text must not cut.
        out = ""
        for p in (self.log_path, self.stdout_path):
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
    connection dies are "sent, not acknowledged". With `limit` it sends no
    more than that many jobs, with `rate` no more than that many a second.
    """

    def __init__(self, idx, ctl, window, size, problems, func=FUNC, limit=None, rate=None):
        super().__init__(name="submitter-%d" % idx, daemon=True)
        self.idx = idx
        self.ctl = ctl
        self.window = window
        self.size = size
        self.problems = problems
        self.func = func
        self.limit = limit
        self.rate = rate
        self.next_send = 0.0    # monotonic time the next batch may go (with rate)
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
            if self.stop_evt.is_set() or (self.limit is not None and self.next >= self.limit):
                if not out:
                    return True
            elif len(out) <= low:
                wait = self.next_send - time.monotonic()
                if wait > 0 and not out:
                    time.sleep(min(wait, 0.05))
                    continue
                if wait <= 0:
                    batch = []
                    while len(out) < self.window and (self.limit is None
                                                      or self.next < self.limit):
                        n = self.next
                        self.next += 1
                        out.append(n)
                        batch.append(H.packet(H.SUBMIT_JOB_BG, self.func, b"",
                                              make_payload(self.size, self.idx, n)))
                    conn.send(b"".join(batch))
                    if self.rate:
                        self.next_send = time.monotonic() + len(batch) / self.rate
            magic, t, body = conn.read_pkt(timeout=15.0)
            n = out.popleft()
            if magic == H.RES and t == H.JOB_CREATED:
                self.acked[n] = (body, gen)
            else:
                self.problems.add("submitter %d job %d: expected JOB_CREATED, got %s %r"
                                  % (self.idx, n, H.PACKET_NAMES.get(t, t), body[:200]))


class Worker(threading.Thread):
    """CAN_DO, keeps `grabs` GRAB_JOBs in flight, records every JOB_ASSIGN
    (before its answer is sent), sleeps with PRE_SLEEP when idle. The answer
    is WORK_COMPLETE, or what `book` (a RunBook) decides: WORK_FAIL or
    WORK_COMPLETE."""

    def __init__(self, idx, ctl, grabs, size, problems, func=FUNC, book=None):
        super().__init__(name="worker-%d" % idx, daemon=True)
        self.idx = idx
        self.ctl = ctl
        self.grabs = grabs
        self.size = size
        self.problems = problems
        self.func = func
        self.book = book
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
        conn.send(H.packet(H.CAN_DO, self.func) + grab * self.grabs)
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
                now = time.monotonic()
                self.runs.append((handle, key, gen, now))
                if key is None or func != self.func.encode():
                    self.bad.append((handle, func, data[:80], len(data)))
                if self.book is not None and key is not None and not self.book.run(
                        key, handle, gen, now):
                    done = H.packet(H.WORK_FAIL, handle)
                else:
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
    def __init__(self, ctl, n, grabs, size, problems, first_idx, func=FUNC, book=None):
        self.workers = [Worker(first_idx + k, ctl, grabs, size, problems, func, book)
                        for k in range(n)]
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


def queued(port, func=FUNC):
    return H.status(port).get(func, (0, 0, 0))[0]


# --------------------------------------------------------------------------
# A scenario: submit under kill -9, drain, verify


class Scenario:
    def __init__(self, name, durability, submitters, windows, kills, delay, downtime,
                 worker_kills, workers=4, grabs=16, size=0, inject_torn_after=None,
                 func=FUNC, config=None):
        self.name = name
        self.func = func
        self.book = None
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
        extra = ""
        if config is not None:
            path = os.path.join(self.tmp, "policy.toml")
            with open(path, "w") as f:
                f.write(config)
            extra = " --config %s" % shlex.quote(path)
        self.ctl = CrashServer(self.tmp, durability, name, extra)
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
                   else "; torn frame written after kill %d" % self.inject_torn_after))

    def pool(self, n):
        p = Pool(self.ctl, n, self.grabs, self.size, self.problems, len(self.all_workers),
                 self.func, self.book)
        self.all_workers.extend(p.workers)
        return p

    def write_torn_frame(self):
        """What a flush cut short by the kill leaves: an intact frame header
        promising more payload than was written, where that flush went (after
        the last whole frame, over the room written ahead or past the end).
        -> False when the kill itself already tore the last flush."""
        path = os.path.join(self.ctl.data_dir, LOG_FILE)
        with open(path, "r+b") as f:
            end, whole = log_frames_end(f)
            if not whole:
                return False
            body = bytes(self.rng.randrange(256) for _ in range(4096))
            head = struct.pack("<III", FRAME_MAGIC, 300_000, zlib.crc32(body))
            f.seek(end)
            f.write(head + struct.pack("<I", zlib.crc32(head)) + body)
        return True

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
                self.note("torn frame written" if self.write_torn_frame()
                          else "no torn frame written: the kill tore the last flush")
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
        left = queued(self.ctl.port, self.func)
        self.note("graceful restart: %d job(s) left" % left)
        H.check(left == 0, "after the drain, SIGTERM and a restart %d job(s) of %r came back"
                % (left, self.func))
        self.ctl.close()

    def wait_drained(self, timeout):
        """Poll `status` until no job of the scenario's function is queued or running."""
        deadline = time.monotonic() + timeout
        left = None
        while True:
            if self.ctl.proc.poll() is not None:
                raise H.TestFailure("server exited with %s during the final drain"
                                    % self.ctl.proc.returncode)
            self.check_problems()
            try:
                left = queued(self.ctl.port, self.func)
            except (OSError, H.TestFailure) as e:
                left = "? (%s)" % e
            if left == 0:
                return
            if time.monotonic() > deadline:
                raise H.TestFailure("the final drain did not empty %r within %.0fs: %s left"
                                    % (self.func, timeout, left))
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


# --------------------------------------------------------------------------
# Retries and the dead set under kill -9

RETRY_FUNC = "crash_retry"
RETRY_ATTEMPTS = 3
RETRY_DELAY = 0.1  # seconds, the fixed backoff below
RETRY_CONFIG = """\
[[function]]
match = "crash_retry"
max_attempts = 3
retry_on = ["fail"]
backoff = "fixed"
initial_delay = "100ms"
max_delay = "100ms"
jitter = false
"""
# The shortest time allowed from a WORK_FAIL sent to the next JOB_ASSIGN of
# that job from the same server process (100 ms less slack for the server's
# millisecond clock).
MIN_RETRY_GAP = 0.09


def planned_fails(key):
    """k = n % 4 of seq:i:n: runs that fail before one completes (3: all fail)."""
    return key[1] % 4


def planned_runs(key):
    k = planned_fails(key)
    return RETRY_ATTEMPTS if k == 3 else k + 1


class RunBook:
    """Every run of every payload, shared by all the workers of a scenario
    and all server generations: the count decides each run's answer."""

    def __init__(self):
        self.lock = threading.Lock()
        self.runs = {}       # key -> [(generation, monotonic time, completed, handle, phase)]
        self.phase = "main"  # "revive" once the dead set was retried by the admin

    def run(self, key, handle, gen, t):
        """Records a run; True if the worker answers WORK_COMPLETE, False for WORK_FAIL."""
        k = planned_fails(key)
        with self.lock:
            lst = self.runs.setdefault(key, [])
            ok = k != 3 and len(lst) + 1 > k
            lst.append((gen, t, ok, handle, self.phase))
        return ok

    def count(self):
        with self.lock:
            runs = [r for lst in self.runs.values() for r in lst]
        return len(runs), sum(1 for r in runs if r[2])


def parse_dead(text):
    """`show dead` -> [(handle, function, attempts, died_at, error)] (strings)."""
    rows = []
    for line in text.split("\n"):
        if not line or line == ".":
            continue
        parts = line.split("\t")
        if len(parts) != 5:
            raise H.TestFailure("`show dead` line with %d fields: %r" % (len(parts), line))
        rows.append(tuple(parts))
    return rows


class RetryScenario(Scenario):
    """retry_dead_kill: server-side retries and the dead set under SIGKILL.

    Submitters pipeline SUBMIT_JOB_BG crash_retry (rate-limited, a few hundred
    jobs each); the policy retries a WORK_FAIL after a fixed 100 ms, 3 runs
    in all. Workers answer from the payload seq:i:n with k = n % 4: WORK_FAIL
    while the runs of that payload seen so far (this one included, counted
    over all workers and server generations) are <= k, then WORK_COMPLETE;
    k = 3 always fails, so those jobs must end dead with 3 attempts. The
    server is killed while submitters submit and workers run, restarted on
    the same data dir each time; then workers run until `status` has no job of
    crash_retry (a job waiting for its retry counts there) and the dead set
    is read. A graceful restart must keep `show dead` byte for byte, and
    `retry dead all crash_retry` must bring every dead job back for 3 more
    runs and into the dead set again.
    """

    def __init__(self, name):
        super().__init__(name, "fsync", submitters=4, windows=[2, 4, 8, 16], kills=5,
                         delay=(0.3, 0.9), downtime=(0.0, 0.3), worker_kills=0,
                         workers=3, grabs=8, func=RETRY_FUNC, config=RETRY_CONFIG)
        rng = self.rng
        self.book = RunBook()
        self.limits = [rng.randrange(150, 451) for _ in self.windows]
        self.rate = 200                             # jobs a second per submitter
        self.workers_from = rng.choice([0, 1])      # the pool starts before this kill
        self.submit_until = rng.choice([2, 3])      # submitters stop at this kill
        self.dead_settled = ""      # `show dead` once everything ran
        self.dead_restarted = ""    # the same after SIGTERM and a restart
        self.status_restarted = None
        self.retry_reply = ""
        self.dead_revived = ""      # `show dead` once the revived jobs ran
        self.job_views = []         # `show job` of suspicious jobs, for the report

    def plan(self):
        return ("seed=%d durability=%s submitters=%d windows=%s limits=%s rate=%d/s "
                "kill delays=%s downtimes=%s workers from kill %d, submitters stop at kill %d"
                % (SEED, self.durability, len(self.windows), self.windows, self.limits,
                   self.rate, self.delays, self.downtimes, self.workers_from,
                   self.submit_until))

    def show_dead(self):
        return H.admin(self.ctl.port, "show dead", timeout=10.0)

    def wait_settled(self, timeout, dead=None):
        """Poll until `status` shows no job of the function (queued, running
        or waiting for a retry) twice, RETRY_DELAY apart, and, if `dead` is
        given, `show dead` lists that many jobs."""
        deadline = time.monotonic() + timeout
        streak = 0
        while True:
            if self.ctl.proc.poll() is not None:
                raise H.TestFailure("server exited with %s while jobs ran"
                                    % self.ctl.proc.returncode)
            self.check_problems()
            try:
                st = H.status(self.ctl.port).get(self.func, (0, 0, 0))
                n_dead = len(parse_dead(self.show_dead())) if dead is not None else None
            except (OSError, H.TestFailure) as e:
                st, n_dead = "? (%s)" % e, None
            if isinstance(st, tuple) and st[0] == 0 and n_dead == dead:
                streak += 1
                if streak >= 2:
                    return
            else:
                streak = 0
            if time.monotonic() > deadline:
                raise H.TestFailure("%r did not settle within %.0fs: status %s, dead %s (want %s)"
                                    % (self.func, timeout, st, n_dead, dead))
            time.sleep(RETRY_DELAY * 1.5 if streak else 0.05)

    def suspects(self, dead_text):
        """Handles (a) or (b) will complain about, with `show job` while the
        server still runs: acknowledged jobs with k < 3 that never completed
        or are dead, acknowledged k = 3 jobs not dead, dead jobs whose
        attempts are not RETRY_ATTEMPTS."""
        acked = {(s.idx, n): h for s in self.subs for n, (h, _g) in s.acked.items()}
        with self.book.lock:
            completed = {k for k, lst in self.book.runs.items() if any(r[2] for r in lst)}
        rows = parse_dead(dead_text)
        dead = {r[0].encode() for r in rows}
        handles = []
        for key, h in sorted(acked.items()):
            if planned_fails(key) < 3 and (key not in completed or h in dead):
                handles.append(h)
            elif planned_fails(key) == 3 and h not in dead:
                handles.append(h)
        handles += [r[0].encode() for r in rows if r[2] != str(RETRY_ATTEMPTS)]
        for h in handles[:8]:
            try:
                text = H.admin(self.ctl.port, "show job %s" % h.decode(), timeout=5.0)
            except (OSError, H.TestFailure) as e:
                text = "? (%s)" % e
            self.job_views.append("show job %s:\n      %s"
                                  % (h.decode(), text.rstrip("\n").replace("\n", "\n      ")))

    def run(self):
        print("   [%s] plan: %s" % (self.name, self.plan()), flush=True)
        self.t0 = time.monotonic()
        self.ctl.start()
        self.note("server gen 0 on port %d" % self.ctl.port)
        self.subs = [Submitter(i, self.ctl, w, 0, self.problems, self.func, lim, self.rate)
                     for i, (w, lim) in enumerate(zip(self.windows, self.limits))]
        for s in self.subs:
            s.start()
        pool = None
        for k in range(len(self.delays)):
            if k == self.workers_from and pool is None:
                pool = self.pool(self.workers)
                self.note("workers start")
            time.sleep(self.delays[k])
            self.ctl.kill()
            self.kill_times.append(time.monotonic())
            runs, done = self.book.count()
            self.note("SIGKILL %d (submitted %d, runs %d, completions %d)"
                      % (k, sum(s.next for s in self.subs), runs, done))
            if k == self.submit_until:
                for s in self.subs:
                    s.stop_evt.set()
                self.note("submitters stop")
            time.sleep(self.downtimes[k])
            self.ctl.start()
            self.note("server gen %d on port %d (%.2fs to listen)"
                      % (self.ctl.generation, self.ctl.port, self.ctl.starts[-1][2]))
        for s in self.subs:
            s.join(20.0)
            if s.is_alive():
                raise H.TestFailure("%s did not stop" % s.name)
        self.check_problems()
        # Everything left runs on the last server: retries wait 100 ms each.
        self.wait_settled(60.0)
        self.dead_settled = self.show_dead()
        self.note("settled: %d dead" % len(parse_dead(self.dead_settled)))
        self.suspects(self.dead_settled)
        pool.stop()
        self.check_problems()
        # (d) A graceful stop keeps the dead set; the admin revives it.
        self.ctl.stop_graceful()
        self.ctl.start()
        self.dead_restarted = self.show_dead()
        self.status_restarted = H.status(self.ctl.port).get(self.func, (0, 0, 0))
        n = len(parse_dead(self.dead_restarted))
        self.note("graceful restart: %d dead, status %s" % (n, self.status_restarted))
        self.book.phase = "revive"
        self.retry_reply = H.admin(self.ctl.port, "retry dead all %s" % self.func).strip()
        self.note("retry dead all: %s" % self.retry_reply)
        pool = self.pool(self.workers)
        self.wait_settled(30.0, dead=n)
        self.dead_revived = self.show_dead()
        pool.stop()
        self.note("revived jobs dead again: %d" % len(parse_dead(self.dead_revived)))
        self.check_problems()
        self.ctl.close()

    def diagnostics(self):
        views = ""
        if self.job_views:
            views = "\n  suspicious jobs:\n    " + "\n    ".join(self.job_views)
        return views + super().diagnostics()

    def verify(self):
        """Checks (a)-(d) of retry_dead_kill; returns the statistics. Raises on failure."""
        fails = []
        notes = []
        sent = {(s.idx, n) for s in self.subs for n in range(s.next)}
        acked = {(s.idx, n): hg for s in self.subs for n, hg in s.acked.items()}
        bad = [b for w in self.all_workers for b in w.bad]
        with self.book.lock:
            book = {k: list(v) for k, v in self.book.runs.items()}
        main = {k: sorted((r for r in v if r[4] == "main"), key=lambda r: r[1])
                for k, v in book.items()}
        main = {k: v for k, v in main.items() if v}
        revive = {k: sorted((r for r in v if r[4] == "revive"), key=lambda r: r[1])
                  for k, v in book.items()}
        revive = {k: v for k, v in revive.items() if v}

        # Handles: the one a submitter got is the one every run sees; no
        # handle names two jobs.
        handle_of = {k: h for k, (h, _g) in acked.items()}
        job_of = {}
        for key, h in handle_of.items():
            if job_of.setdefault(h, key) != key:
                fails.append("handle %r given to two acknowledged jobs %r and %r"
                             % (h, job_of[h], key))
        for key, lst in book.items():
            for _g, _t, _ok, h, _ph in lst:
                if handle_of.setdefault(key, h) != h:
                    fails.append("seq:%d:%d ran as %r, known as %r" % (key + (h, handle_of[key])))
                if job_of.setdefault(h, key) != key:
                    fails.append("handle %r ran for two jobs %r and %r" % (h, job_of[h], key))

        # (c) nothing ran that was not submitted
        not_sent = sorted(k for k in book if k not in sent)
        if bad or not_sent:
            fails.append("(c) %d run(s) of payloads never sent; e.g. %r %r"
                         % (len(bad) + len(not_sent), bad[:3], not_sent[:3]))

        # Within one server process: a job runs at most RETRY_ATTEMPTS times,
        # never again after a WORK_COMPLETE, and a retry waits its 100 ms.
        ran_after_complete = []
        short_gaps = []
        for key, lst in main.items():
            per_gen = Counter(r[0] for r in lst)
            over = {g: c for g, c in per_gen.items() if c > RETRY_ATTEMPTS}
            if over:
                fails.append("seq:%d:%d ran %s times in server generation(s) %s (at most %d)"
                             % (key + (list(over.values()), list(over), RETRY_ATTEMPTS)))
            done = None
            prev = None
            for gen, t, ok, _h, _ph in lst:
                if done is not None:
                    if gen == done:
                        fails.append("seq:%d:%d ran again after its WORK_COMPLETE in server "
                                     "generation %d" % (key + (gen,)))
                    elif key not in ran_after_complete:
                        ran_after_complete.append(key)
                if prev is not None and prev[0] == gen and not prev[2] \
                        and t - prev[1] < MIN_RETRY_GAP:
                    short_gaps.append("seq:%d:%d %.3fs" % (key + (t - prev[1],)))
                if ok and done is None:
                    done = gen
                prev = (gen, t, ok)
        if short_gaps:
            fails.append("%d retry(ies) came sooner than %.0f ms after the WORK_FAIL, e.g. %s"
                         % (len(short_gaps), RETRY_DELAY * 1000, short_gaps[:5]))

        # (a) acknowledged jobs with k < 3 completed and are not dead
        try:
            rows = parse_dead(self.dead_settled)
        except H.TestFailure as e:
            fails.append(str(e))
            rows = []
        dead = Counter(r[0].encode() for r in rows)
        lost = []
        dead_live = []
        for key, (h, g) in sorted(acked.items()):
            if planned_fails(key) == 3:
                continue
            if not any(r[2] for r in main.get(key, [])):
                lost.append("seq:%d:%d %s (acked by gen %d, ran %d times)"
                            % (key + (h.decode(), g, len(main.get(key, [])))))
            if h in dead:
                dead_live.append("seq:%d:%d %s" % (key + (h.decode(),)))
        if lost:
            fails.append("(a) %d acknowledged job(s) with k < 3 never completed, e.g. %s"
                         % (len(lost), lost[:5]))
        if dead_live:
            fails.append("(a) %d job(s) with k < 3 in the dead set, e.g. %s"
                         % (len(dead_live), dead_live[:5]))

        # (b) the dead set is the acknowledged k = 3 jobs, once each, 3 attempts
        twice = [h for h, c in dead.items() if c > 1]
        if twice:
            fails.append("(b) %d handle(s) twice in `show dead`, e.g. %r" % (len(twice), twice[:5]))
        odd = []
        fewer = []          # ATTEMPTS below RETRY_ATTEMPTS
        more_than_runs = []  # ATTEMPTS above the runs the workers saw
        dead_unacked = 0
        for handle, func, attempts, died, error in rows:
            key = job_of.get(handle.encode())
            if key is None:
                fails.append("(b) dead job %s was never seen by a submitter or a worker" % handle)
                continue
            if planned_fails(key) != 3:
                continue  # reported by (a)
            if key not in acked:
                dead_unacked += 1
            if func != self.func:
                fails.append("(b) dead job %s has function %r" % (handle, func))
            runs = len(main.get(key, []))
            if runs < RETRY_ATTEMPTS:
                fails.append("(b) dead job %s seq:%d:%d ran only %d time(s)"
                             % ((handle,) + key + (runs,)))
            try:
                a = int(attempts)
            except ValueError:
                fails.append("(b) dead job %s: ATTEMPTS %r" % (handle, attempts))
                continue
            if a == RETRY_ATTEMPTS and runs >= a:
                continue
            line = ("%s seq:%d:%d ATTEMPTS %d, ran %d times (generations %s), died %s, error %r"
                    % ((handle,) + key + (a, runs, [r[0] for r in main.get(key, [])], died,
                                          error)))
            odd.append(line)
            if a > RETRY_ATTEMPTS and runs >= a:
                notes.append("accepted: " + line)
            elif runs < a:
                more_than_runs.append(line)
            else:
                fewer.append(line)
        if more_than_runs:
            fails.append("(b) %d dead job(s) with more ATTEMPTS than runs, e.g. %s"
                         % (len(more_than_runs), more_than_runs[:3]))
        if fewer:
            fails.append("(b) %d dead job(s) with ATTEMPTS below %d (the server decided on its "
                         "stored count, yet reports fewer runs than it made), e.g. %s"
                         % (len(fewer), RETRY_ATTEMPTS, fewer[:3]))
        missing = ["seq:%d:%d %s" % (key + (h.decode(),)) for key, (h, _g) in sorted(acked.items())
                   if planned_fails(key) == 3 and h not in dead]
        if missing:
            fails.append("(b) %d acknowledged k = 3 job(s) not in the dead set, e.g. %s"
                         % (len(missing), missing[:5]))
        if odd:
            print("   [%s] dead jobs whose ATTEMPTS is not %d (%d):\n     %s"
                  % (self.name, RETRY_ATTEMPTS, len(odd), "\n     ".join(odd[:20])), flush=True)
        for n in notes[:20]:
            print("   [%s] %s" % (self.name, n), flush=True)

        # (d) graceful restart, then `retry dead all`
        if self.dead_restarted != self.dead_settled:
            a_lines = self.dead_settled.split("\n")
            b_lines = self.dead_restarted.split("\n")
            diff = [(x, y) for x, y in zip(a_lines, b_lines) if x != y][:3]
            fails.append("(d) `show dead` changed across SIGTERM and restart: %d -> %d lines, "
                         "e.g. %r" % (len(a_lines), len(b_lines), diff))
        if self.status_restarted is None or self.status_restarted[0] != 0:
            fails.append("(d) after the graceful restart `status` shows %r for %s"
                         % (self.status_restarted, self.func))
        if self.retry_reply != "OK %d" % len(rows):
            fails.append("(d) `retry dead all %s` answered %r, expected 'OK %d'"
                         % (self.func, self.retry_reply, len(rows)))
        try:
            rows2 = parse_dead(self.dead_revived)
        except H.TestFailure as e:
            fails.append(str(e))
            rows2 = []
        before = sorted(r[0] for r in rows)
        after = sorted(r[0] for r in rows2)
        if before != after:
            fails.append("(d) revived jobs came back to the dead set as %d handles, %d before "
                         "(missing %s, new %s)"
                         % (len(after), len(before), sorted(set(before) - set(after))[:5],
                            sorted(set(after) - set(before))[:5]))
        wrong = [r for r in rows2 if r[1] != self.func or r[2] != str(RETRY_ATTEMPTS)]
        if wrong:
            fails.append("(d) %d revived dead job(s) without function %s and ATTEMPTS %d, e.g. %s"
                         % (len(wrong), self.func, RETRY_ATTEMPTS, wrong[:5]))
        revive_bad = []
        for handle in before:
            key = job_of.get(handle.encode())
            lst = revive.get(key, [])
            gaps = [b[1] - a[1] for a, b in zip(lst, lst[1:])]
            if (len(lst) != RETRY_ATTEMPTS or any(r[2] for r in lst)
                    or any(g < MIN_RETRY_GAP for g in gaps)):
                revive_bad.append("%s: %d run(s), gaps %s"
                                  % (handle, len(lst), ["%.3f" % g for g in gaps]))
        stray = [k for k in revive if k is None or handle_of.get(k, b"").decode() not in before]
        if revive_bad or stray:
            fails.append("(d) revived jobs must run exactly %d times, %.0f ms apart, each: %s; "
                         "runs of jobs not revived: %s"
                         % (RETRY_ATTEMPTS, RETRY_DELAY * 1000, revive_bad[:5], stray[:5]))

        extra = sum(max(0, len(v) - planned_runs(k)) for k, v in main.items())
        stats = {
            "submitted": len(sent),
            "acked": len(acked),
            "sent_not_acked": len(sent) - len(acked),
            "runs": sum(len(v) for v in main.values()),
            "runs_beyond_plan": extra,
            "completed_jobs": sum(1 for v in main.values() if any(r[2] for r in v)),
            "ran_after_complete": len(ran_after_complete),
            "ran_without_ack": sum(1 for k in main if k not in acked),
            "dead": len(rows),
            "dead_without_ack": dead_unacked,
            "attempts_not_3": len(odd),
            "revived_runs": sum(len(v) for v in revive.values()),
            "kills": self.ctl.kills,
            "max_restart_s": round(max(t for _g, _p, t in self.ctl.starts), 2),
        }
        print("   [%s] %s" % (self.name, " ".join("%s=%s" % kv for kv in stats.items())),
              flush=True)
        print("   [%s] (c) ran again after completing (a kill lost the Done): %d, e.g. %s"
              % (self.name, len(ran_after_complete),
                 ["seq:%d:%d" % k for k in ran_after_complete[:5]]), flush=True)
        if fails:
            raise H.TestFailure("\n  ".join(fails[:20]))
        return stats


def retry_test():
    sc = RetryScenario("retry_dead_kill")
    ok = False
    try:
        sc.run()
        stats = sc.verify()
        H.check(stats["kills"] == len(sc.delays), "expected %d kills" % len(sc.delays))
        H.check(stats["acked"] >= 300, "only %d jobs acknowledged" % stats["acked"])
        H.check(stats["dead"] >= 50, "only %d dead jobs" % stats["dead"])
        ok = True
    except H.TestFailure as e:
        raise H.TestFailure("%s%s" % (e, sc.diagnostics()))
    finally:
        sc.close(ok)


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
    H.check(stats["torn_tails_cut"] >= 1, "no torn tail reported cut")
    H.check(stats["acked"] >= 20, "only %d large jobs acknowledged" % stats["acked"])


TESTS = [
    ("fsync_kill_cycles", scenario_test(fsync_scenario, fsync_check)),
    ("interval_kill_cycles", scenario_test(interval_scenario, interval_check)),
    ("large_payload_kill", scenario_test(large_scenario, large_check)),
    ("retry_dead_kill", retry_test),
]


def main():
    if not os.access(BINARY, os.X_OK):
        print("gearshift binary not found at %s (cargo build -p gearshift, or set GEARSHIFT_BIN)"
              % BINARY)
        print(H.summary(0, 1))
        return 1
    # run_suite prints SERVER_CMD in its header: show what this suite runs.
    os.environ["SERVER_CMD"] = ("%s serve -L 127.0.0.1 -p {port} --data-dir <tmp> "
                                "--durability <scenario> --log-file <tmp>/server.log" % BINARY)
    print("== crash suite seed: %d (replay with CRASH_SEED=%d)" % (SEED, SEED), flush=True)
    return H.run_suite("crash", TESTS)


if __name__ == "__main__":
    sys.exit(main())
