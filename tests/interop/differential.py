#!/usr/bin/env python3
"""Differential suite: byte-for-byte admin and binary sessions, server vs reference.

Each session is a scripted sequence of raw bytes sent over one or more
connections (binary packets built with struct, admin text lines, or both on one
connection).  The same session runs against a fresh SERVER_CMD server and a
fresh REF_CMD server (default REF_CMD: gearmand 1.1.20, `-t 0`), and the two
transcripts must be identical after masking.

How replies are read (no fixed sleeps):
  * Text steps read one reply per admin line sent: a reply starting with `OK`
    or `ERR` is one line, anything else is a listing ending with a `.` line.
  * Binary steps are followed by an ECHO_REQ sync marker; everything up to the
    matching ECHO_RES is that step's reply (the marker itself is not recorded).
    Replies the server queued for this connection because of other
    connections' earlier steps (NOOP, forwarded WORK_*) are therefore caught
    deterministically too.
  * At the end of a session every connection is drained: connections that sent
    binary get a final sync marker; text-only connections are read until a
    100 ms quiet period.  Unexpected extra bytes and EOFs are thus recorded.
  * Every read has a deadline (2 s per reply); a timeout is recorded as
    `<TIMEOUT>` and aborts the session (the reference must never time out).
  * Closing a connection (CLOSE) is processed asynchronously by the server, so
    the next step POLLs `workers` until that connection is gone (3 s
    deadline); only the final reply is recorded.
  * The harness detects readiness from /proc/net/tcp (LISTEN state) rather than
    with a probe connection, so no stray connection shows up in `workers`.

Masking (applied identically to both transcripts):
  * job handles `H:<anything>:<digits>` -> `H:X:<n>`, renumbered by first
    appearance in the session; later steps refer to handles by that number;
  * `OK <digits>` after `getpid` -> `OK <pid>`;
  * `OK <anything>` after `version` -> `OK <version>` (exclusion g);
  * the file-descriptor number at the start of each `workers` line -> `<fd>`.
  Binary packets are rendered as magic, type and NUL-split arguments, so a
  masked handle does not leave a stale length field behind.

Ordering: gearmand lists `status`, `prioritystatus` and `show jobs` /
`show unique jobs` in hash-bucket order.  Sessions with more than one line in
such a listing set `sort=True`, which sorts the lines of every listing in that
session before comparison (stated per session below: status_multi_function_sorted,
status_functions_outlive_workers, show_jobs_mixed_sorted, coalescing_same_unique,
client_disconnect_foreground_job; `-v` marks them "[sorted listings]").
`workers` lines (one per connection) are ALWAYS compared sorted, after fd masking:
gearmand lists connections per I/O thread, newest first within a thread, so even its
own order changes with `-t`.  The function order inside a line (newest CAN_DO first)
is still compared exactly.  DIFF_WORKERS_ORDER=exact compares the line order too
(matches gearmand `-t 0`, newest connection first).

EXCLUDED on purpose (Gearshift deliberately differs from gearmand there):
  (a) `create function abcdef` with a bare LF truncating the name to `abcde`
      (gearmand computes the length assuming CRLF) -- only CRLF is tested;
  (b) `drop function` of a function with queued jobs and no workers succeeding
      and orphaning the jobs (Gearshift answers `ERR there are still queued
      jobs\\r\\n`);
  (c) the stray trailing NUL in the WORK_FAIL that replaces WORK_EXCEPTION for
      clients without OPTION_REQ "exceptions" (only option-enabled clients are
      tested);
  (d) a unique of exactly 64 bytes being stored truncated to 63 (63 and 65
      bytes are tested);
  (e) a repeated CAN_DO listed twice in `workers`;
  (f) `shutdown` (removed in gearmand 1.1.15; Gearshift accepts it from
      loopback);
  (g) the version string (masked);
  (h) admin lines with more than 5 words (gearmand closes the connection).
Compared as DOCUMENTED DIFFERENCES (run on both servers; pass only if the
transcripts differ in exactly the recorded lines, see GONE_AT_ONCE etc. below):
  (i) cancelled and orphaned jobs are removed at once (gearmand lists them with
      IGNORE_JOB=1 and counts them until a worker reaches them), so a second
      `cancel job` of the same handle answers ERR UNKNOWN_JOB;
  (j) a client told WORK_FAIL at cancel gets no WORK_COMPLETE afterwards;
  (k) any packet from a NOOPed, still-sleeping worker clears its NOOP state, so
      the next job NOOPs it again (gearmand waits for a GRAB).
The server under test runs with `--verbose ERROR` (gearmand's default level) so
that `verbose` answers alike.
Also left out (gearmand oddities seen while writing this suite, no decision yet):
  * binary commands without a data part sent with too few NUL-separated
    arguments (WORK_STATUS "H", CAN_DO_TIMEOUT "f", ERROR "x", STATUS_RES "H",
    STATUS_RES_UNIQUE "u"): gearmand neither replies nor closes, and every later
    packet on that connection is ignored; data-carrying commands with missing
    arguments (SUBMIT_JOB "f", WORK_COMPLETE "H", ...) close the connection;
  * CAN_DO / SUBMIT_JOB with an empty function name (accepted; `status` then
    shows a line starting with a TAB);
  * a repeated CAN_DO also counts the worker twice in `status`.

usage: SERVER_CMD='...' [REF_CMD='...'] python3 differential.py [-v] [name-substring ...]
  -v  print the masked reference transcript of every session.
Final line: `N passed, N failed, N skipped`; exit status 1 on any failure.
"""

import difflib
import os
import re
import select
import socket
import struct
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.dont_write_bytecode = True  # keep tests/interop free of __pycache__

import harness as h  # noqa: E402
from harness import (  # noqa: E402,F401
    CAN_DO, CANT_DO, RESET_ABILITIES, PRE_SLEEP, UNUSED, NOOP, SUBMIT_JOB, JOB_CREATED,
    GRAB_JOB, NO_JOB, JOB_ASSIGN, WORK_STATUS, WORK_COMPLETE, WORK_FAIL, GET_STATUS, ECHO_REQ,
    ECHO_RES, SUBMIT_JOB_BG, ERROR, STATUS_RES, SUBMIT_JOB_HIGH, SET_CLIENT_ID, CAN_DO_TIMEOUT,
    ALL_YOURS, WORK_EXCEPTION, OPTION_REQ, OPTION_RES, WORK_DATA, WORK_WARNING, GRAB_JOB_UNIQ,
    JOB_ASSIGN_UNIQ, SUBMIT_JOB_HIGH_BG, SUBMIT_JOB_LOW, SUBMIT_JOB_LOW_BG, SUBMIT_JOB_SCHED,
    SUBMIT_JOB_EPOCH, SUBMIT_REDUCE_JOB, SUBMIT_REDUCE_JOB_BACKGROUND, GRAB_JOB_ALL,
    JOB_ASSIGN_ALL, GET_STATUS_UNIQUE, STATUS_RES_UNIQUE, REQ, RES, PACKET_NAMES)

REPLY_TIMEOUT = 2.0
WORKERS_EXACT_ORDER = os.environ.get("DIFF_WORKERS_ORDER") == "exact"
QUIET = 0.1
HANDLE_RE = re.compile(rb"H:[^\x00\s:]*:\d+")
SYNC_PREFIX = b"~sync~"


# =========================================================================
# Session description


class Hd:
    """Placeholder for the n-th job handle seen in this session (1-based)."""

    def __init__(self, n):
        self.n = n


def _parts(x):
    return list(x) if isinstance(x, (list, tuple)) else [x]


class Step:
    def __init__(self, conn, parts=(), kinds=(), sync=False, eof=False, close=False,
                 binary=False, label=None, until=None):
        self.conn = conn
        self.parts = list(parts)      # bytes / str / Hd, concatenated at send time
        self.kinds = list(kinds)      # one mask kind per expected reply unit
        self.sync = sync              # append an ECHO marker and read up to it
        self.eof = eof                # read until the server closes the connection
        self.close = close            # close our side of the connection
        self.binary = binary
        self.label = label
        self.until = until            # POLL: repeat until until(raw reply bytes) is true


def T(conn, text, kinds=None):
    """Admin text (one or more lines). One reply per line unless kinds given."""
    parts = _parts(text)
    if kinds is None:
        flat = b"".join(p if isinstance(p, bytes) else
                        (p.encode() if isinstance(p, str) else b"H:x:0") for p in parts)
        kinds = []
        for line in flat.split(b"\n")[:-1]:
            word = line.rstrip(b"\r").split(b" ")[0].lower()
            kinds.append({b"version": "version", b"getpid": "pid",
                          b"workers": "workers"}.get(word, "any"))
    return Step(conn, parts, kinds, label="text")


def P(conn, ptype, *args, magic=REQ, n=None):
    """One binary packet. Default: sync (read every reply up to an ECHO marker).
    n=k instead reads exactly k reply units without a marker."""
    body = []
    for i, a in enumerate(args):
        if i:
            body.append(b"\0")
        body.append(a)
    step = Step(conn, [("pkt", magic, ptype, body)], ["any"] * (n or 0), sync=n is None,
                binary=True, label=PACKET_NAMES.get(ptype, str(ptype)))
    return step


def RAW(conn, data, n=None, kinds=None):
    """Raw bytes. n=None: sync marker afterwards; else read n units."""
    return Step(conn, [data], kinds or ["any"] * (n or 0), sync=n is None, binary=True,
                label="raw")


def READ(conn, n=1):
    """Read n reply units without sending anything."""
    return Step(conn, [], ["any"] * n, label="read")


def EOF(conn, data=b""):
    """Send data (optional) and expect the server to close the connection."""
    return Step(conn, [data] if data else [], [], eof=True, binary=bool(data) and data[:1] == b"\0",
                label="eof")


def CLOSE(conn):
    return Step(conn, [], [], close=True, label="close")


def POLL(conn, text, until, kinds=None):
    """Repeat admin text until until(raw reply bytes) holds (deadline 3 s); record the last.
    Used only after closing a connection, whose processing by the server is asynchronous."""
    step = T(conn, text, kinds)
    step.until = until
    step.label = "poll"
    return step


def lines_are(n):
    """Predicate for POLL: the reply has exactly n lines (terminator included)."""
    return lambda data: data.count(b"\n") == n


class Session:
    def __init__(self, name, steps, sort=False, doc="", differs=None):
        self.name = name
        self.steps = steps
        self.sort = sort
        self.doc = doc
        # A deliberate difference (docs/compat.md): (reason, [changed lines]).
        self.differs = differs


# =========================================================================
# Running a session against one server


class Aborted(Exception):
    pass


class Runner:
    def __init__(self, port):
        self.port = port
        self.conns = {}      # name -> socket
        self.bufs = {}
        self.eof = {}
        self.binary = {}     # name -> has sent binary
        self.handles = []    # actual handle bytes, in order of first appearance
        self.out = []        # transcript lines
        self.sync_seq = 0

    # -- connections
    def conn(self, name):
        if name not in self.conns:
            s = socket.create_connection((h.HOST, self.port), timeout=REPLY_TIMEOUT)
            s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            self.conns[name] = s
            self.bufs[name] = b""
            self.eof[name] = False
            self.binary[name] = False
        return self.conns[name]

    def close_all(self):
        for s in self.conns.values():
            try:
                s.close()
            except OSError:
                pass

    # -- handles
    def note_handles(self, data):
        for m in HANDLE_RE.findall(data):
            if m not in self.handles:
                self.handles.append(m)

    def mask(self, data, register=True):
        """Replace handles by H:X:<n>. Sent data (register=False) only masks known handles."""
        if register:
            self.note_handles(data)

        def sub(m):
            if m.group(0) in self.handles:
                return b"H:X:%d" % (self.handles.index(m.group(0)) + 1)
            return m.group(0)
        return HANDLE_RE.sub(sub, data)

    def resolve(self, part):
        if isinstance(part, Hd):
            if part.n > len(self.handles):
                raise Aborted("<NO HANDLE #%d YET>" % part.n)
            return self.handles[part.n - 1]
        if isinstance(part, str):
            return part.encode()
        if isinstance(part, tuple):  # ("pkt", magic, type, body parts)
            _, magic, ptype, body = part
            b = b"".join(self.resolve(x) for x in body)
            return magic + struct.pack(">II", ptype, len(b)) + b
        return part

    # -- reading
    def _fill(self, name, deadline):
        s = self.conns[name]
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise socket.timeout()
        s.settimeout(remaining)
        try:
            d = s.recv(65536)
        except ConnectionResetError:
            d = b""
        if not d:
            self.eof[name] = True
            raise EOFError()
        self.bufs[name] += d

    def read_unit(self, name, deadline):
        """One reply unit: a binary packet, an OK/ERR line, or a '.'-terminated list."""
        while True:
            buf = self.bufs[name]
            if buf[:1] == b"\0":
                if len(buf) >= 12:
                    size = struct.unpack(">I", buf[8:12])[0]
                    if len(buf) >= 12 + size:
                        self.bufs[name] = buf[12 + size:]
                        return ("pkt", buf[:12 + size])
            elif b"\n" in buf:
                first = buf[:buf.index(b"\n") + 1]
                if first.startswith(b"OK") or first.startswith(b"ERR"):
                    self.bufs[name] = buf[len(first):]
                    return ("line", first)
                pos = 0
                while True:
                    j = buf.find(b"\n", pos)
                    if j < 0:
                        break
                    if buf[pos:j + 1] == b".\n":
                        self.bufs[name] = buf[j + 1:]
                        return ("list", buf[:j + 1])
                    pos = j + 1
            self._fill(name, deadline)

    # -- rendering
    def render(self, unit, kind, sort):
        typ, data = unit
        if typ == "pkt":
            magic = data[:4]
            ptype = struct.unpack(">I", data[4:8])[0]
            body = self.mask(data[12:])
            args = " ".join(repr(a)[1:] for a in body.split(b"\0")) if body else "(empty)"
            return ["%s %s %s" % ({REQ: "REQ", RES: "RES"}.get(magic, repr(magic)),
                                  PACKET_NAMES.get(ptype, "TYPE%d" % ptype), args)]
        data = self.mask(data)
        if kind == "pid":
            data = re.sub(rb"^OK \d+\n$", b"OK <pid>\n", data)
        elif kind == "version":
            data = re.sub(rb"^OK [^\n]*\n$", b"OK <version>\n", data)
        lines = data.split(b"\n")[:-1]
        if kind == "workers" and typ == "list":
            lines = [re.sub(rb"^\d+ ", b"<fd> ", ln) if ln != b"." else ln for ln in lines]
            if not WORKERS_EXACT_ORDER:
                lines = sorted(lines[:-1]) + lines[-1:]
        if sort and typ == "list":
            lines = sorted(lines[:-1]) + lines[-1:]
        return ["TEXT " + repr(ln + b"\n")[1:] for ln in lines]

    def record(self, name, unit, kind, sort):
        for line in self.render(unit, kind, sort):
            self.out.append("    %s< %s" % (name, line))

    # -- steps
    def run_step(self, idx, step, sort):
        name = step.conn
        if step.close:
            self.out.append("[%d] %s: close" % (idx, name))
            if name in self.conns:
                self.conns[name].close()
                del self.conns[name]
            return
        s = self.conn(name)
        data = b"".join(self.resolve(p) for p in step.parts)
        self.out.append("[%d] %s> %s" % (idx, name, self.describe(step, data)))
        if step.binary:
            self.binary[name] = True
        if step.until is not None:
            return self.poll(name, s, data, step, sort)
        marker = None
        if step.sync:
            self.sync_seq += 1
            marker = SYNC_PREFIX + str(self.sync_seq).encode()
            data += h.packet(ECHO_REQ, marker)
        try:
            if data:
                s.sendall(data)
        except OSError:
            self.out.append("    %s< <SEND FAILED>" % name)
            raise Aborted()
        deadline = time.monotonic() + REPLY_TIMEOUT
        try:
            if step.eof:
                while True:
                    try:
                        unit = self.read_unit(name, deadline)
                    except EOFError:
                        if self.bufs[name]:
                            self.out.append("    %s< <PARTIAL %r>" % (name, self.bufs[name]))
                        self.out.append("    %s< <EOF>" % name)
                        self.conns.pop(name).close()
                        return
                    self.record(name, unit, "any", sort)
            i = 0
            while True:
                if marker is None and i >= len(step.kinds):
                    return
                unit = self.read_unit(name, deadline)
                if marker is not None and unit[0] == "pkt" and unit[1][4:8] == b"\0\0\0\x11" \
                        and unit[1][12:] == marker:
                    return
                kind = step.kinds[i] if i < len(step.kinds) else "any"
                self.record(name, unit, kind, sort)
                i += 1
                deadline = time.monotonic() + REPLY_TIMEOUT
        except EOFError:
            if self.bufs[name]:
                self.out.append("    %s< <PARTIAL %r>" % (name, self.bufs[name]))
            self.out.append("    %s< <EOF>" % name)
            del self.conns[name]
            raise Aborted()
        except socket.timeout:
            self.out.append("    %s< <TIMEOUT> (buffered: %r)" % (name, self.bufs[name][:200]))
            raise Aborted()

    def poll(self, name, s, data, step, sort):
        poll_deadline = time.monotonic() + 3.0
        while True:
            s.sendall(data)
            units = []
            try:
                for _ in step.kinds:
                    units.append(self.read_unit(name, time.monotonic() + REPLY_TIMEOUT))
            except (EOFError, socket.timeout):
                self.out.append("    %s< <EOF/TIMEOUT while polling>" % name)
                raise Aborted()
            if step.until(b"".join(u[1] for u in units)):
                break
            if time.monotonic() > poll_deadline:
                self.out.append("    %s< <POLL TIMEOUT>, last reply:" % name)
                for unit, kind in zip(units, step.kinds):
                    self.record(name, unit, kind, sort)
                raise Aborted()
            time.sleep(0.01)
        for unit, kind in zip(units, step.kinds):
            self.record(name, unit, kind, sort)

    def describe(self, step, data):
        if not data:
            return "(read)" if not step.eof else "(expect close)"
        if step.label == "raw":
            return "raw " + repr(self.mask(data, register=False))
        if step.binary and data[:1] == b"\0" and len(data) >= 12:
            out = []
            rest = data
            while len(rest) >= 12 and rest[:1] == b"\0":
                magic, ptype, size = rest[:4], *struct.unpack(">II", rest[4:12])
                body = self.mask(rest[12:12 + size], register=False)
                out.append("%s %s %s" % ({REQ: "REQ", RES: "RES"}.get(magic, repr(magic)),
                                         PACKET_NAMES.get(ptype, "TYPE%d" % ptype),
                                         " ".join(repr(a)[1:] for a in body.split(b"\0"))
                                         if body else "(empty)"))
                rest = rest[12 + size:]
            if rest:
                out.append(repr(self.mask(rest, register=False))[1:])
            return " + ".join(out)
        return repr(self.mask(data, register=False))[1:]

    def drain(self, sort):
        """Final drain: catch anything still pending on every open connection."""
        for name in list(self.conns):
            s = self.conns[name]
            if self.binary[name]:
                self.sync_seq += 1
                marker = SYNC_PREFIX + str(self.sync_seq).encode()
                try:
                    s.sendall(h.packet(ECHO_REQ, marker))
                    deadline = time.monotonic() + REPLY_TIMEOUT
                    while True:
                        unit = self.read_unit(name, deadline)
                        if unit[0] == "pkt" and unit[1][12:] == marker:
                            break
                        self.out.append("  (drain)")
                        self.record(name, unit, "any", sort)
                except EOFError:
                    self.out.append("  (drain) %s< <EOF>" % name)
                except (socket.timeout, OSError):
                    self.out.append("  (drain) %s< <TIMEOUT/ERROR>" % name)
            else:
                extra = b""
                deadline = time.monotonic() + 1.0
                while time.monotonic() < deadline:
                    r, _, _ = select.select([s], [], [], QUIET)
                    if not r:
                        break
                    try:
                        d = s.recv(65536)
                    except OSError:
                        d = b""
                    if not d:
                        extra += b"<EOF>"
                        break
                    extra += d
                extra = self.bufs[name] + extra
                if extra:
                    self.out.append("  (drain) %s< %r" % (name, self.mask(extra)))

    def run(self, session):
        try:
            for i, step in enumerate(session.steps, 1):
                self.run_step(i, step, session.sort)
            self.drain(session.sort)
        except Aborted as e:
            if e.args and e.args[0]:
                self.out.append(str(e.args[0]))
            self.out.append("<ABORTED>")
        finally:
            self.close_all()
        return self.out


def transcript(template, session, label):
    srv = h.Server(template, label).start()
    try:
        return Runner(srv.port).run(session)
    finally:
        srv.stop()


# =========================================================================
# Sessions


def b(s):
    return s if isinstance(s, bytes) else s.encode()


def can_do(c, f):
    return P(c, CAN_DO, b(f))


def submit(c, f, uniq=b"", data=b"x", ptype=SUBMIT_JOB):
    return P(c, ptype, b(f), b(uniq), b(data))


SESSIONS = []


def session(name, sort=False, doc="", differs=None):
    def deco(fn):
        SESSIONS.append(Session(name, fn(), sort=sort, doc=doc, differs=differs))
        return fn
    return deco


# Deliberate differences (each one a line of docs/compat.md). A session that
# carries one still runs against both servers; it passes only if the server's
# transcript differs from the reference's in exactly these lines ("-" = only
# gearmand prints it, "+" = only Gearshift does), so the difference stays
# the documented one and nothing else creeps in.
GONE_AT_ONCE = "cancelled and orphaned jobs are removed at once, not reaped lazily"
SCHED_ACCEPTED = "SUBMIT_JOB_SCHED makes a recurring schedule (docs/config.md)"
FAIL_AFTER_EXCEPTION = "a WORK_FAIL right after the same worker's WORK_EXCEPTION for the job is the same failure (Perl Gearman::Worker sends both)"
NO_LATE_RESULT = "a client told WORK_FAIL at cancel gets no WORK_COMPLETE after it"
NOOP_CLEARED = "any packet from a NOOPed worker clears its NOOP state"


# ---------------------------------------------------------------- status

@session("status_empty")
def _():
    return [T("a", "status\n"), T("a", "prioritystatus\n"), T("a", "show jobs\n"),
            T("a", "show unique jobs\n")]


@session("status_single_function")
def _():
    return [
        can_do("w", "f1"),
        T("a", "status\n"),
        submit("c", "f1", "", "bg", SUBMIT_JOB_BG),
        submit("c", "f1", "", "fg"),
        T("a", "status\n"),
        P("w", GRAB_JOB),
        T("a", "status\nprioritystatus\n"),
        P("w", WORK_COMPLETE, Hd(1), b"done"),
        T("a", "status\n"),
    ]


@session("status_multi_function_sorted", sort=True,
         doc="several functions: status/prioritystatus lines sorted (hash-bucket order)")
def _():
    return [
        can_do("w1", "alpha"), can_do("w1", "beta"), can_do("w2", "beta"),
        submit("c", "alpha", "", "1", SUBMIT_JOB_BG),
        submit("c", "gamma", "", "2", SUBMIT_JOB_LOW_BG),
        submit("c", "gamma", "", "3", SUBMIT_JOB_HIGH_BG),
        submit("c", "beta", "", "4", SUBMIT_JOB_HIGH),
        T("a", "status\nprioritystatus\n"),
        P("w2", GRAB_JOB),
        T("a", "status\nprioritystatus\n"),
    ]


@session("prioritystatus_single_function")
def _():
    return [
        submit("c", "pf", "", "h", SUBMIT_JOB_HIGH_BG),
        submit("c", "pf", "", "l1", SUBMIT_JOB_LOW_BG),
        submit("c", "pf", "", "l2", SUBMIT_JOB_LOW_BG),
        submit("c", "pf", "", "n", SUBMIT_JOB_BG),
        submit("c", "pf", "", "fg-low", SUBMIT_JOB_LOW),
        T("a", "prioritystatus\n"),
        can_do("w", "pf"),
        P("w", GRAB_JOB),
        T("a", "prioritystatus\nstatus\n"),
    ]


# ---------------------------------------------------------------- workers

@session("workers_listing")
def _():
    return [
        T("a", "workers\n"),
        P("w", SET_CLIENT_ID, b"worker-1"),
        can_do("w", "f1"), can_do("w", "f2"), can_do("w", "f3"),
        P("c", ECHO_REQ, b"client connected"),
        T("a", "workers\n"),
        P("w", CANT_DO, b"f2"),
        T("a", "workers\n"),
        P("w", RESET_ABILITIES),
        T("a", "workers\n"),
        P("w", CAN_DO_TIMEOUT, b"ft", b"5000"),
        T("a", "workers\n"),
    ]


@session("status_functions_outlive_workers", sort=True,
         doc="several functions in status: lines sorted")
def _():
    return [
        can_do("w", "f1"), can_do("w", "f2"), can_do("w", "f3"),
        P("w", CANT_DO, b"f2"),
        T("a", "status\n"),
        P("w", RESET_ABILITIES),
        T("a", "status\n"),
        P("w", CAN_DO_TIMEOUT, b"ft", b"5000"),
        T("a", "status\nprioritystatus\n"),
    ]


@session("workers_client_ids")
def _():
    return [
        P("w1", SET_CLIENT_ID, b""), can_do("w1", "f"),
        P("w2", SET_CLIENT_ID, b"first"), P("w2", SET_CLIENT_ID, b"second-id"), can_do("w2", "g"),
        P("w3", SET_CLIENT_ID, b"x" * 200), can_do("w3", "h"),
        T("a", "workers\n"),
    ]


# ---------------------------------------------------------------- show jobs

@session("show_jobs_background")
def _():
    return [
        submit("c", "sj", "u-bg", "data", SUBMIT_JOB_BG),
        T("a", "show jobs\nshow unique jobs\n"),
    ]


@session("show_jobs_foreground")
def _():
    return [
        submit("c", "sj", "u-fg", "data"),
        T("a", "show jobs\nshow unique jobs\n"),
        can_do("w", "sj"),
        P("w", GRAB_JOB),
        T("a", "show jobs\n"),
    ]


@session("show_jobs_mixed_sorted", sort=True, doc="several jobs: listing lines sorted")
def _():
    return [
        submit("c", "sj", "u1", "a", SUBMIT_JOB_BG),
        submit("c", "sj", "u2", "b"),
        submit("c", "other", "", "c", SUBMIT_JOB_LOW_BG),
        submit("c", "other", "-", "d", SUBMIT_JOB_HIGH),
        T("a", "show jobs\nshow unique jobs\n"),
    ]


@session("show_variants")
def _():
    return [T("a", "show\nshow foo\nshow jobs \nshow  jobs\nSHOW JOBS\nshow unique\n"
                   "show unique jobs x\nShow Unique Jobs\nshow jobs extra\n")]


# ---------------------------------------------------------------- cancel job

@session("cancel_job_background", differs=(GONE_AT_ONCE, [
    ("-", "    a< TEXT 'H:X:1\\t0\\t1\\t0\\n'"),
    ("-", "    a< TEXT 'cf\\t1\\t0\\t0\\n'"),
    ("+", "    a< TEXT 'cf\\t0\\t0\\t0\\n'"),
    ("-", "    a< TEXT 'OK\\r\\n'"),
    ("+", "    a< TEXT 'ERR UNKNOWN_JOB\\r\\n'")]))
def _():
    return [
        submit("c", "cf", "", "bg", SUBMIT_JOB_BG),
        T("a", ["cancel job ", Hd(1), "\n"]),
        T("a", "show jobs\nstatus\n"),
        T("a", ["cancel job ", Hd(1), "\r\n"]),
        can_do("w", "cf"),
        P("w", GRAB_JOB),
        T("a", "show jobs\nstatus\n"),
    ]


@session("cancel_job_foreground", differs=(GONE_AT_ONCE, [
    ("-", "    a< TEXT 'H:X:1\\t0\\t1\\t0\\n'")]))
def _():
    return [
        submit("c", "cf", "", "fg"),
        T("a", ["cancel job ", Hd(1), "\r\n"]),
        P("c", ECHO_REQ, b"after cancel"),
        T("a", "show jobs\n"),
    ]


@session("cancel_job_running")
def _():
    return [
        can_do("w", "cf"),
        submit("c", "cf", "", "fg"),
        P("w", GRAB_JOB),
        T("a", ["cancel job ", Hd(1), "\n"]),
        P("c", ECHO_REQ, b"client"),
        P("w", ECHO_REQ, b"worker not told"),
        T("a", "show jobs\nstatus\n"),
    ]


@session("cancel_job_running_then_complete", differs=(NO_LATE_RESULT, [
    ("-", "    c< RES WORK_COMPLETE 'H:X:1' 'late'")]),
         doc="gearmand: the client gets WORK_FAIL at cancel and WORK_COMPLETE later")
def _():
    return [
        can_do("w", "cf"),
        submit("c", "cf", "", "fg"),
        P("w", GRAB_JOB),
        T("a", ["cancel job ", Hd(1), "\n"]),
        P("w", WORK_COMPLETE, Hd(1), b"late"),
        P("c", ECHO_REQ, b"client"),
        T("a", "show jobs\nstatus\n"),
    ]


@session("cancel_job_malformed")
def _():
    return [T("a", "cancel job H:nowhere:12345\ncancel job\ncancel\ncancel foo bar\n"
                   "cancel job a b\nCANCEL JOB H:nowhere:1\ncancel jobs H:x:1\n")]


# ---------------------------------------------------------------- create/drop

@session("create_function")
def _():
    return [
        T("a", "create function abcdef\r\n"),
        T("a", "status\n"),
        T("a", "create function abcdef\r\ncreate function\r\ncreate function a b\r\n"
               "create foo bar\r\nCREATE FUNCTION\r\n"),
        T("a", "status\n"),
    ]


@session("drop_function")
def _():
    return [
        T("a", "drop function nosuch\r\n"),
        T("a", "create function MixCase\r\n"),
        T("a", "drop function mixcase\r\n"),
        T("a", "status\n"),
        can_do("w", "busy"),
        T("a", "drop function busy\r\n"),
        P("w", CANT_DO, b"busy"),
        T("a", "drop function busy\r\nstatus\n"),
        T("a", "drop function\r\ndrop function a b\r\ndrop q\r\nDROP FUNCTION nosuch\r\n"),
        T("a", "create function lf\r\ndrop function lf\nstatus\n"),
    ]


@session("drop_function_running_job")
def _():
    # (Dropping a function whose jobs are only *queued* is exclusion (b).)
    return [
        can_do("w", "busy"),
        submit("c", "busy", "", "job"),
        P("w", GRAB_JOB),
        T("a", "drop function busy\r\nstatus\n"),
        P("w", WORK_COMPLETE, Hd(1), b""),
        P("w", CANT_DO, b"busy"),
        T("a", "drop function BUSY\r\nstatus\n"),
    ]


# ---------------------------------------------------------------- maxqueue

@session("maxqueue_unknown_function_has_no_effect")
def _():
    return [
        T("a", "maxqueue mq 1\r\n"),
        submit("c", "mq", "", "one", SUBMIT_JOB_BG),
        submit("c", "mq", "", "two", SUBMIT_JOB_BG),
        T("a", "status\n"),
    ]


@session("maxqueue_limit_1")
def _():
    return [
        T("a", "create function mq\r\n"),
        T("a", "maxqueue mq 1\r\n"),
        submit("c", "mq", "", "one", SUBMIT_JOB_BG),
        submit("c", "mq", "", "two", SUBMIT_JOB_BG),
        submit("c", "mq", "", "three", SUBMIT_JOB_HIGH),
        submit("c", "mq", "", "four", SUBMIT_JOB_LOW_BG),
        T("a", "status\n"),
        T("a", "maxqueue mq 0\r\n"),
        submit("c", "mq", "", "five", SUBMIT_JOB_BG),
        T("a", "status\n"),
    ]


@session("maxqueue_limit_3")
def _():
    return [
        can_do("w", "mq"),
        T("a", "maxqueue mq 3\n"),
        submit("c", "mq", "", "1", SUBMIT_JOB_BG),
        submit("c", "mq", "", "2", SUBMIT_JOB_LOW_BG),
        submit("c", "mq", "", "3", SUBMIT_JOB_HIGH_BG),
        submit("c", "mq", "", "4", SUBMIT_JOB_BG),
        submit("c", "mq", "", "5", SUBMIT_JOB),
        T("a", "status\nprioritystatus\n"),
    ]


@session("maxqueue_coalesced_duplicate")
def _():
    return [
        T("a", "create function mq\r\nmaxqueue mq 1\n"),
        submit("c", "mq", "dup", "1", SUBMIT_JOB_BG),
        submit("c", "mq", "dup", "1", SUBMIT_JOB_BG),
        submit("c", "mq", "other", "2", SUBMIT_JOB_BG),
        T("a", "status\n"),
    ]


@session("maxqueue_three_sizes")
def _():
    return [
        T("a", "create function mq\r\nmaxqueue mq 1 2 3\n"),
        submit("c", "mq", "", "h1", SUBMIT_JOB_HIGH_BG),
        submit("c", "mq", "", "h2", SUBMIT_JOB_HIGH_BG),
        submit("c", "mq", "", "n1", SUBMIT_JOB_BG),
        submit("c", "mq", "", "n2", SUBMIT_JOB_BG),
        submit("c", "mq", "", "l1", SUBMIT_JOB_LOW_BG),
        submit("c", "mq", "", "l2", SUBMIT_JOB_LOW_BG),
        T("a", "prioritystatus\n"),
    ]


@session("maxqueue_arguments")
def _():
    return [T("a", "maxqueue\r\nmaxqueue unknownfn 5\r\nmaxqueue f\r\nmaxqueue f x\r\n"
                   "maxqueue f 1 2\r\nMAXQUEUE f -1\r\n"),
            T("a", "status\n")]


@session("maxqueue_function_created_by_submit")
def _():
    return [
        submit("c", "mq", "", "first", SUBMIT_JOB_BG),
        T("a", "maxqueue mq 2\n"),
        submit("c", "mq", "", "second", SUBMIT_JOB_LOW),
        submit("c", "mq", "", "third", SUBMIT_JOB_HIGH_BG),
        T("a", "maxqueue MQ 5\n"),
        submit("c", "mq", "", "fourth", SUBMIT_JOB_BG),
        T("a", "status\n"),
        can_do("w", "mq"), P("w", GRAB_JOB),
        submit("c", "mq", "", "fifth", SUBMIT_JOB_BG),
        P("w", WORK_COMPLETE, Hd(1), b""),
        submit("c", "mq", "", "sixth", SUBMIT_JOB_BG),
        T("a", "status\n"),
    ]


# ---------------------------------------------------------------- misc admin

@session("getpid_verbose_version")
def _():
    return [T("a", "getpid\n"), T("a", "verbose\n"), T("a", "version\n"),
            T("a", "GETPID\r\nVerbose\r\nVERSION\r\n"),
            T("a", "getpid 1\nversion x\nverbose x\n")]


@session("unknown_commands")
def _():
    return [T("a", "foo\nFoO bar\nhello world\r\nshutdown2\nStAtUsX\n\njobs\nclients\ngladiator\n")]


@session("case_insensitive_commands")
def _():
    return [
        can_do("w", "f"),
        T("a", "STATUS\nStatus\nPRIORITYSTATUS\nWorkers\nSHOW JOBS\nshow UNIQUE jobs\n"),
    ]


@session("crlf_vs_lf")
def _():
    return [T("a", "status\r\n"), T("a", "status\n"), T("a", "status\r\r\n"),
            T("a", "getpid\r\n"), T("a", "foo\r\n"), T("a", "foo\n"), T("a", "status\t\n")]


@session("pipelined_lines")
def _():
    return [
        can_do("w", "pipe"),
        T("a", "status\nversion\nworkers\nfoo\nprioritystatus\ngetpid\nshow jobs\r\n"
               "maxqueue pipe 2\r\nverbose\n"),
    ]


@session("leading_trailing_spaces")
def _():
    return [T("a", "  status\n"), T("a", " status\n"), T("a", "status  \n"),
            T("a", "show  unique   jobs\n"), T("a", "cancel  job  H:x:1\n"),
            T("a", "maxqueue  f  3 \n"), T("a", "create function  sp\r\n"),
            T("a", "status\n")]


@session("five_words_ok")
def _():
    return [T("a", "a b c d e\n"), T("a", "maxqueue f 1 2 3\n"), T("a", "status\n")]


@session("text_and_binary_mixed_on_one_connection")
def _():
    return [
        T("m", "status\n"),
        P("m", ECHO_REQ, b"between"),
        P("m", CAN_DO, b"mixed"),
        T("m", "status\nworkers\n"),
        submit("m", "mixed", "", "x", SUBMIT_JOB_BG),
        T("m", "show jobs\n"),
    ]


# ---------------------------------------------------------------- binary

@session("echo_req")
def _():
    return [P("c", ECHO_REQ, b"hello"), P("c", ECHO_REQ, b""),
            P("c", ECHO_REQ, b"a\0b\0"), P("c", ECHO_REQ, b"x" * 5000)]


@session("get_status")
def _():
    return [
        P("c", GET_STATUS, b"H:unknown:999"),
        P("c", GET_STATUS, b""),
        submit("c", "gs", "", "bg", SUBMIT_JOB_BG),
        P("c", GET_STATUS, Hd(2)),
        can_do("w", "gs"),
        P("w", GRAB_JOB),
        P("c", GET_STATUS, Hd(2)),
        P("w", WORK_STATUS, Hd(2), b"3", b"7"),
        P("c", GET_STATUS, Hd(2)),
        P("w", WORK_COMPLETE, Hd(2), b""),
        P("c", GET_STATUS, Hd(2)),
    ]


@session("option_req")
def _():
    return [P("c", OPTION_REQ, b"exceptions"), P("c", OPTION_REQ, b"EXCEPTIONS"),
            P("c", OPTION_REQ, b"bogus"), P("c", OPTION_REQ, b"")]


@session("submit_job_sched_rejected", differs=(SCHED_ACCEPTED, [
    ("-", "    c< RES ERROR 'INVALID_COMMAND' 'Command not expected'"),
    ("+", "    c< RES JOB_CREATED 'H:X:1'"),
    ("+", "    c< TEXT 'f\\t0\\t0\\t0\\n'")]))
def _():
    return [P("c", SUBMIT_JOB_SCHED, b"f", b"", b"1", b"2", b"3", b"4", b"5", b"data"),
            T("c", "status\n")]


@session("res_magic_from_client")
def _():
    return [P("c", ECHO_REQ, b"x", magic=RES), P("c", ECHO_REQ, b"still open"),
            P("c", SUBMIT_JOB, b"f", b"", b"d", magic=RES), T("c", "status\n")]


@session("server_only_packets_from_client")
def _():
    return [P("c", NOOP), P("c", JOB_ASSIGN, b"H:x:1", b"f", b"d"), P("c", UNUSED),
            P("c", ALL_YOURS), P("c", NO_JOB), P("c", JOB_CREATED, b"H:x:1"),
            P("c", ECHO_RES, b"x"), P("c", STATUS_RES, b"H:x:1", b"0", b"0", b"0", b"0"),
            P("c", OPTION_RES, b"exceptions"),
        P("c", STATUS_RES_UNIQUE, b"u", b"0", b"0", b"0", b"0", b"0"),
        P("c", ERROR, b"CODE", b"text"), P("c", JOB_ASSIGN_UNIQ, b"H:x:1", b"f", b"u", b"d"),
        P("c", JOB_ASSIGN_ALL, b"H:x:1", b"f", b"u", b"r", b"d")]


@session("bad_packet_type_closes")
def _():
    return [P("c", ECHO_REQ, b"alive"), EOF("c", h.packet(99, b"junk"))]


@session("type_zero_closes")
def _():
    return [P("c", ECHO_REQ, b"alive"), EOF("c", h.packet(0, b""))]


@session("unique_sizes")
def _():
    return [
        submit("c", "uq", "u" * 63, "ok63", SUBMIT_JOB_BG),
        submit("c", "uq", "v" * 65, "too long", SUBMIT_JOB_BG),
        submit("c", "uq", "w" * 100, "too long fg"),
        T("a", "show unique jobs\nstatus\n"),
        can_do("w", "uq"),
        P("w", GRAB_JOB_UNIQ),
    ]


@session("work_packets_unknown_handle")
def _():
    return [
        P("w", WORK_COMPLETE, b"H:nowhere:1", b"r"),
        P("w", WORK_FAIL, b"H:nowhere:1"),
        P("w", WORK_STATUS, b"H:nowhere:1", b"1", b"2"),
        P("w", WORK_DATA, b"H:nowhere:1", b"d"),
        P("w", WORK_WARNING, b"H:nowhere:1", b"w"),
        P("w", WORK_EXCEPTION, b"H:nowhere:1", b"e"),
    ]


@session("work_packets_from_non_owner")
def _():
    return [
        can_do("w1", "own"), can_do("w2", "own"),
        submit("c", "own", "", "x"),
        P("w1", GRAB_JOB),
        P("w2", WORK_COMPLETE, Hd(1), b"stolen"),
        P("w2", WORK_DATA, Hd(1), b"stolen"),
        P("w1", WORK_COMPLETE, Hd(1), b"real"),
        P("w1", WORK_COMPLETE, Hd(1), b"again"),
        P("c", ECHO_REQ, b"client"),
    ]


@session("get_status_unique_two_clients")
def _():
    return [
        P("x", GET_STATUS_UNIQUE, b"nope"),
        submit("c1", "gu", "shared", "d"),
        submit("c2", "gu", "shared", "d"),
        P("x", GET_STATUS_UNIQUE, b"shared"),
        can_do("w", "gu"),
        P("w", GRAB_JOB_UNIQ),
        P("w", WORK_STATUS, Hd(1), b"1", b"4"),
        P("x", GET_STATUS_UNIQUE, b"shared"),
        P("w", WORK_COMPLETE, Hd(1), b"both"),
        P("c1", ECHO_REQ, b"c1"),
        P("c2", ECHO_REQ, b"c2"),
        P("x", GET_STATUS_UNIQUE, b"shared"),
    ]


@session("coalescing_same_unique", sort=True, doc="two functions in status: lines sorted")
def _():
    return [
        submit("c1", "co", "same", "first"),
        submit("c2", "co", "same", "second-ignored"),
        submit("c3", "co", "same", "bg", SUBMIT_JOB_BG),
        submit("c3", "co", "same", "hi", SUBMIT_JOB_HIGH),
        submit("c3", "co", "same", "lo", SUBMIT_JOB_LOW),
        submit("c4", "other", "same", "different function"),
        T("a", "status\n", kinds=["any"]),
    ]


@session("coalescing_dash_and_empty_unique")
def _():
    return [
        submit("c", "co", "-", "payload"),
        submit("c", "co", "-", "payload"),
        submit("c", "co", "-", "other payload"),
        submit("c", "co", "", "empty"),
        submit("c", "co", "", "empty"),
        T("a", "status\n"),
        can_do("w", "co"),
        P("w", GRAB_JOB_UNIQ), P("w", GRAB_JOB_UNIQ), P("w", GRAB_JOB_UNIQ),
        P("w", GRAB_JOB_UNIQ), P("w", GRAB_JOB_UNIQ),
    ]


@session("coalescing_fan_out")
def _():
    return [
        can_do("w", "fan"),
        submit("c1", "fan", "u", "d"),
        submit("c2", "fan", "u", "d"),
        P("w", GRAB_JOB),
        P("w", WORK_DATA, Hd(1), b"partial"),
        P("w", WORK_STATUS, Hd(1), b"1", b"2"),
        P("w", WORK_WARNING, Hd(1), b"warn"),
        submit("c3", "fan", "u", "late joiner"),
        P("w", WORK_COMPLETE, Hd(1), b"final"),
        P("c1", ECHO_REQ, b"c1"), P("c2", ECHO_REQ, b"c2"), P("c3", ECHO_REQ, b"c3"),
    ]


@session("round_trip_worker_client")
def _():
    return [
        can_do("w", "reverse"),
        P("w", GRAB_JOB),
        P("w", PRE_SLEEP),
        submit("c", "reverse", "", "test"),
        READ("w", 1),                       # NOOP wake-up
        P("w", GRAB_JOB),
        P("w", WORK_STATUS, Hd(1), b"1", b"2"),
        P("w", WORK_DATA, Hd(1), b"ts"),
        P("w", WORK_WARNING, Hd(1), b"careful"),
        P("w", WORK_COMPLETE, Hd(1), b"tset"),
        READ("c", 4),
        P("w", GRAB_JOB),
        P("c", GET_STATUS, Hd(1)),
        T("a", "status\n"),
    ]


@session("round_trip_exceptions_enabled")
def _():
    return [
        P("c", OPTION_REQ, b"exceptions"),
        can_do("w", "exc"),
        submit("c", "exc", "", "x"),
        P("w", GRAB_JOB),
        P("w", WORK_EXCEPTION, Hd(1), b"it broke"),
        P("c", ECHO_REQ, b"after"),
        T("a", "status\n"),
    ]


@session("exception_then_fail_from_perl", differs=(FAIL_AFTER_EXCEPTION, [
    ("-", "    w< RES ERROR 'JOB_NOT_FOUND' 'Job given in work result not found'")]))
def _():
    return [
        P("c", OPTION_REQ, b"exceptions"),
        can_do("w", "pl"),
        submit("c", "pl", "", "x"),
        P("w", GRAB_JOB),
        # Back to back, as Gearman::Worker writes them (no sync marker between).
        P("w", WORK_EXCEPTION, Hd(1), b"died", n=0),
        P("w", WORK_FAIL, Hd(1)),
        P("w", ECHO_REQ, b"alive"),
        P("c", ECHO_REQ, b"after"),
        T("a", "status\n"),
    ]


@session("round_trip_fail")
def _():
    return [
        can_do("w", "fl"),
        submit("c", "fl", "", "x"),
        P("w", GRAB_JOB),
        P("w", WORK_FAIL, Hd(1)),
        P("c", ECHO_REQ, b"after"),
        T("a", "status\n"),
    ]


@session("noop_wakeup_and_sleep", differs=(NOOP_CLEARED, [
    ("+", "    w1< RES NOOP (empty)")]))
def _():
    return [
        can_do("w1", "nw"), can_do("w2", "nw"), can_do("w3", "other"),
        P("w1", PRE_SLEEP), P("w2", PRE_SLEEP), P("w3", PRE_SLEEP),
        submit("c", "nw", "", "1", SUBMIT_JOB_BG),
        submit("c", "nw", "", "2", SUBMIT_JOB_BG),
        P("w1", ECHO_REQ, b"w1"), P("w2", ECHO_REQ, b"w2"), P("w3", ECHO_REQ, b"w3"),
        P("w1", GRAB_JOB), P("w1", PRE_SLEEP),
        P("w2", GRAB_JOB), P("w2", GRAB_JOB),
        P("w2", PRE_SLEEP),
        submit("c", "nw", "", "3", SUBMIT_JOB_BG),
        P("w1", ECHO_REQ, b"w1"), P("w2", ECHO_REQ, b"w2"),
    ]


@session("pre_sleep_with_pending_job")
def _():
    return [
        submit("c", "ps", "", "waiting", SUBMIT_JOB_BG),
        can_do("w", "ps"),
        P("w", PRE_SLEEP),
        P("w", GRAB_JOB),
    ]


@session("priority_order_raw")
def _():
    return [
        submit("c", "po", "", "low1", SUBMIT_JOB_LOW_BG),
        submit("c", "po", "", "norm1", SUBMIT_JOB_BG),
        submit("c", "po", "", "high1", SUBMIT_JOB_HIGH_BG),
        submit("c", "po", "", "low2", SUBMIT_JOB_LOW_BG),
        submit("c", "po", "", "norm2", SUBMIT_JOB_BG),
        submit("c", "po", "", "high2", SUBMIT_JOB_HIGH_BG),
        can_do("w", "po"),
    ] + [P("w", GRAB_JOB) for _ in range(7)]


@session("worker_function_order")
def _():
    return [
        submit("c", "fa", "", "a1", SUBMIT_JOB_LOW_BG),
        submit("c", "fb", "", "b1", SUBMIT_JOB_HIGH_BG),
        can_do("w", "fa"), can_do("w", "fb"),
        P("w", GRAB_JOB), P("w", GRAB_JOB), P("w", GRAB_JOB),
    ]


@session("cant_do_requeues")
def _():
    return [
        can_do("w1", "rq"), can_do("w2", "rq"),
        submit("c", "rq", "", "job"),
        P("w1", GRAB_JOB),
        P("w1", WORK_STATUS, Hd(1), b"5", b"10"),
        P("w1", CANT_DO, b"rq"),
        T("a", "show jobs\nstatus\n"),
        P("c", GET_STATUS, Hd(1)),
        P("w2", GRAB_JOB),
        P("w2", RESET_ABILITIES),
        T("a", "show jobs\nstatus\n"),
        can_do("w2", "rq"),
        P("w2", GRAB_JOB),
        P("w2", WORK_COMPLETE, Hd(1), b"ok"),
        P("c", ECHO_REQ, b"done"),
    ]


@session("worker_disconnect_requeues")
def _():
    return [
        can_do("w1", "wd"),
        submit("c", "wd", "", "job"),
        P("w1", GRAB_JOB),
        P("w1", WORK_STATUS, Hd(1), b"1", b"3"),
        CLOSE("w1"),
        POLL("a", "workers\n", lines_are(3)),     # a, c and the '.' terminator
        T("a", "show jobs\nstatus\n"),
        P("c", GET_STATUS, Hd(1)),
        can_do("w2", "wd"),
        P("w2", GRAB_JOB),
        P("w2", WORK_COMPLETE, Hd(1), b"second worker"),
        P("c", ECHO_REQ, b"done"),
        T("a", "show jobs\nstatus\n"),
    ]


@session("client_disconnect_foreground_job", sort=True, differs=(GONE_AT_ONCE, [
    ("-", "    a< TEXT 'cd\\t2\\t0\\t0\\n'"),
    ("+", "    a< TEXT 'cd\\t1\\t0\\t0\\n'"),
    ("-", "    a< TEXT 'H:X:1\\t0\\t1\\t0\\n'")]), doc="two jobs in show jobs: sorted")
def _():
    return [
        submit("c", "cd", "", "orphan"),
        submit("c", "cd", "", "bg survives", SUBMIT_JOB_BG),
        CLOSE("c"),
        POLL("a", "workers\n", lines_are(2)),     # a and the '.' terminator
        T("a", "status\nshow jobs\n"),
        can_do("w", "cd"),
        P("w", GRAB_JOB),
        P("w", GRAB_JOB),
        T("a", "status\nshow jobs\n"),
    ]


@session("client_disconnect_only_job", differs=(GONE_AT_ONCE, [
    ("-", "    a< TEXT 'cd\\t1\\t0\\t0\\n'"),
    ("+", "    a< TEXT 'cd\\t0\\t0\\t0\\n'"),
    ("-", "    a< TEXT 'H:X:1\\t0\\t1\\t0\\n'")]))
def _():
    return [
        submit("c", "cd", "", "orphan"),
        CLOSE("c"),
        POLL("a", "workers\n", lines_are(2)),     # a and the '.' terminator
        T("a", "status\nshow jobs\n"),
        can_do("w", "cd"),
        P("w", GRAB_JOB),
        T("a", "status\nshow jobs\n"),
        P("w", PRE_SLEEP),
        submit("c2", "cd", "", "next"),
        P("w", GRAB_JOB),
    ]


@session("client_disconnect_running_job")
def _():
    return [
        can_do("w", "cr"),
        submit("c", "cr", "", "running"),
        P("w", GRAB_JOB),
        CLOSE("c"),
        POLL("a", "workers\n", lines_are(3)),     # a, w and the '.' terminator
        T("a", "status\nshow jobs\n"),
        P("w", WORK_COMPLETE, Hd(1), b"nobody listens"),
        T("a", "status\nshow jobs\n"),
    ]


@session("submit_epoch_past")
def _():
    return [
        P("c", SUBMIT_JOB_EPOCH, b"ep", b"e1", b"1000", b"old"),
        T("a", "status\nprioritystatus\nshow jobs\n"),
        can_do("w", "ep"),
        P("w", GRAB_JOB_UNIQ),
    ]


@session("submit_reduce_background")
def _():
    return [
        P("c", SUBMIT_REDUCE_JOB_BACKGROUND, b"mr", b"r1", b"reducer", b"agg", b"payload"),
        T("a", "status\n"),
        can_do("w", "mr"),
        P("w", GRAB_JOB_ALL),
    ]


@session("grab_job_all_plain")
def _():
    return [
        submit("c", "ga", "plain-u", "plain", SUBMIT_JOB_BG),
        can_do("w", "ga"),
        P("w", GRAB_JOB_ALL),
        P("w", GRAB_JOB_ALL),
    ]


@session("large_payloads")
def _():
    big = bytes(range(256)) * 1024  # 256 KiB, every byte value including NUL
    return [
        can_do("w", "big"),
        submit("c", "big", "", big),
        P("w", GRAB_JOB),
        P("w", WORK_COMPLETE, Hd(1), big[::-1]),
        P("c", ECHO_REQ, b"done"),
    ]


@session("several_packets_one_write")
def _():
    return [
        RAW("c", h.packet(ECHO_REQ, b"one") + h.packet(SUBMIT_JOB_BG, b"pw", b"", b"a")
            + h.packet(GET_STATUS, b"H:zz:1") + h.packet(ECHO_REQ, b"two")),
        RAW("c", h.packet(ECHO_REQ, b"split")[:5], n=0),
        RAW("c", h.packet(ECHO_REQ, b"split")[5:]),
    ]


# =========================================================================
# Runner


def run_one(sess, verbose):
    ref = transcript(h.ref_cmd(), sess, "ref")
    sut = transcript(h.server_cmd(), sess, "sut")
    if verbose:
        print("---- %s (reference)%s" % (sess.name, " [sorted listings]" if sess.sort else ""))
        print("\n".join(ref))
    bad_ref = [ln for ln in ref if "<TIMEOUT" in ln or "<ABORTED>" in ln or "<NO HANDLE" in ln]
    if bad_ref and not any("<EOF>" in ln for ln in ref):
        raise h.TestFailure("reference server did not complete the session (session spec is "
                            "wrong?):\n" + "\n".join(ref))
    if sess.differs is not None:
        reason, expected = sess.differs
        changes = [(ln[0], ln[2:]) for ln in difflib.ndiff(ref, sut) if ln[:2] in ("- ", "+ ")]
        if changes != expected:
            raise h.TestFailure(
                "documented difference (%s) is not the one recorded:\nexpected %r\ngot      %r"
                % (reason, expected, changes))
        return
    if ref != sut:
        diff = difflib.unified_diff(ref, sut, "reference (%s)" % h.ref_cmd(),
                                    "server (%s)" % h.server_cmd(), lineterm="", n=3)
        raise h.TestFailure("transcripts differ%s:\n%s"
                            % (" (listings sorted)" if sess.sort else "", "\n".join(diff)))


def main():
    verbose = "-v" in sys.argv[1:]
    tests = [(s.name, (lambda s=s: run_one(s, verbose))) for s in SESSIONS]
    print("== REF_CMD=%s" % h.ref_cmd())
    return h.run_suite("differential", tests)


if __name__ == "__main__":
    sys.exit(main())
