"""Shared plumbing for the Gearshift interop and differential suites.

Owns: picking free loopback ports, starting/stopping the server under test
(from a SERVER_CMD-style template), raw Gearman packet helpers, admin-protocol
helpers, bounded polling, child-process bookkeeping, and a tiny test runner
that ends with the line ``N passed, N failed, N skipped``.

Everything is Python 3 stdlib only.  Every wait is bounded: sockets carry
timeouts, subprocesses are waited on with timeouts, polling loops have
deadlines.
"""

import os
import shutil
import shlex
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import time
import traceback

HOST = "127.0.0.1"

DEFAULT_GEARMAND = ("/usr/sbin/gearmand -L 127.0.0.1 -p {port} -t 0 "
                    "--log-file=none -P /tmp/gm-{port}.pid")

# Packet type numbers (libgearman-1.0/protocol.h).
CAN_DO = 1
CANT_DO = 2
RESET_ABILITIES = 3
PRE_SLEEP = 4
UNUSED = 5
NOOP = 6
SUBMIT_JOB = 7
JOB_CREATED = 8
GRAB_JOB = 9
NO_JOB = 10
JOB_ASSIGN = 11
WORK_STATUS = 12
WORK_COMPLETE = 13
WORK_FAIL = 14
GET_STATUS = 15
ECHO_REQ = 16
ECHO_RES = 17
SUBMIT_JOB_BG = 18
ERROR = 19
STATUS_RES = 20
SUBMIT_JOB_HIGH = 21
SET_CLIENT_ID = 22
CAN_DO_TIMEOUT = 23
ALL_YOURS = 24
WORK_EXCEPTION = 25
OPTION_REQ = 26
OPTION_RES = 27
WORK_DATA = 28
WORK_WARNING = 29
GRAB_JOB_UNIQ = 30
JOB_ASSIGN_UNIQ = 31
SUBMIT_JOB_HIGH_BG = 32
SUBMIT_JOB_LOW = 33
SUBMIT_JOB_LOW_BG = 34
SUBMIT_JOB_SCHED = 35
SUBMIT_JOB_EPOCH = 36
SUBMIT_REDUCE_JOB = 37
SUBMIT_REDUCE_JOB_BACKGROUND = 38
GRAB_JOB_ALL = 39
JOB_ASSIGN_ALL = 40
GET_STATUS_UNIQUE = 41
STATUS_RES_UNIQUE = 42

PACKET_NAMES = {v: k for k, v in dict(globals()).items()
                if k.isupper() and isinstance(v, int) and 1 <= v <= 42}

REQ = b"\0REQ"
RES = b"\0RES"


class TestFailure(AssertionError):
    """Raised by check helpers; reported as a test failure."""


class Skip(Exception):
    """Raised by a test that cannot run here (a prerequisite this machine
    lacks); the runner prints `SKIP name: reason` and counts it in the
    summary's `N skipped`, neither passed nor failed. Not for a known server
    bug: a test that meets one fails."""


def check(cond, msg):
    if not cond:
        raise TestFailure(msg)


def check_eq(got, want, what="value"):
    if got != want:
        raise TestFailure("%s: expected %r, got %r" % (what, want, got))


def _b(x):
    if isinstance(x, bytes):
        return x
    return str(x).encode()


def packet(ptype, *args, magic=REQ):
    """Build a packet: args are joined with NUL (the last one is the raw rest)."""
    body = b"\0".join(_b(a) for a in args)
    return magic + struct.pack(">II", ptype, len(body)) + body


# --------------------------------------------------------------------------
# Ports and the server process


def free_port():
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    try:
        s.bind((HOST, 0))
        return s.getsockname()[1]
    finally:
        s.close()


def server_cmd():
    return os.environ.get("SERVER_CMD") or DEFAULT_GEARMAND


def ref_cmd():
    return os.environ.get("REF_CMD") or DEFAULT_GEARMAND


def _listening(port):
    """True if some socket is in LISTEN state on 127.0.0.1/any:port (Linux /proc)."""
    want = ":%04X" % port
    ok_v4 = ("0100007F" + want, "00000000" + want)
    for path in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            with open(path) as f:
                next(f, None)
                for line in f:
                    parts = line.split()
                    if len(parts) > 3 and parts[3] == "0A":  # TCP_LISTEN
                        local = parts[1]
                        if local in ok_v4 or (path.endswith("6") and local.endswith(want)):
                            return True
        except OSError:
            continue
    return False


class Server:
    """One server process started from a command template with {port}."""

    def __init__(self, template, label="server"):
        self.template = template
        self.label = label
        self.port = None
        self.proc = None
        self.log = None

    def start(self, ready_timeout=10.0):
        last_err = None
        for _attempt in range(3):
            self.port = free_port()
            argv = shlex.split(self.template.replace("{port}", str(self.port)))
            self.log = tempfile.NamedTemporaryFile(
                prefix="interop-%s-" % self.label, suffix=".log", delete=False)
            self.proc = subprocess.Popen(
                argv, stdin=subprocess.DEVNULL, stdout=self.log,
                stderr=subprocess.STDOUT, start_new_session=True)
            try:
                self._wait_ready(ready_timeout)
                return self
            except TestFailure as e:  # port stolen, or the server died
                last_err = e
                self.stop()
        raise TestFailure("could not start %s (%s): %s"
                          % (self.label, self.template, last_err))

    def _wait_ready(self, timeout):
        """Wait until the port is listening.

        On Linux this reads /proc/net/tcp{,6} instead of connecting: a probe
        connection would be a real client of the server, and its asynchronous
        teardown could still show up in a later `workers` listing.
        """
        deadline = time.monotonic() + timeout
        use_proc = os.path.exists("/proc/net/tcp")
        while True:
            if self.proc.poll() is not None:
                raise TestFailure("server exited with %s; log: %s"
                                  % (self.proc.returncode, self.log_text()[-2000:]))
            if use_proc:
                if _listening(self.port):
                    return
            else:
                try:
                    s = socket.create_connection((HOST, self.port), timeout=0.5)
                    s.close()
                    return
                except OSError:
                    pass
            if time.monotonic() > deadline:
                raise TestFailure("server did not accept connections on port %d "
                                  "within %.0fs" % (self.port, timeout))
            time.sleep(0.01)

    @property
    def pid(self):
        return self.proc.pid

    def alive(self):
        return self.proc is not None and self.proc.poll() is None

    def log_text(self):
        try:
            with open(self.log.name, "rb") as f:
                return f.read().decode("utf-8", "replace")
        except OSError:
            return ""

    def stop(self):
        if self.proc is None:
            return
        if self.proc.poll() is None:
            try:
                self.proc.send_signal(signal.SIGTERM)
                self.proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=5)
        if self.log is not None:
            self.log.close()
            try:
                os.unlink(self.log.name)
            except OSError:
                pass
            self.log = None
        pidfile = "/tmp/gm-%s.pid" % self.port
        if "/tmp/gm-{port}.pid" in self.template and os.path.exists(pidfile):
            try:
                os.unlink(pidfile)
            except OSError:
                pass
        self.proc = None


# --------------------------------------------------------------------------
# Raw connections


class Conn:
    """A raw blocking connection with a receive buffer; every read is bounded."""

    def __init__(self, port, timeout=5.0):
        self.sock = socket.create_connection((HOST, port), timeout=timeout)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.buf = b""
        self.eof = False
        self.timeout = timeout

    def close(self):
        try:
            self.sock.close()
        except OSError:
            pass

    def send(self, data):
        self.sock.sendall(data)

    def send_pkt(self, ptype, *args):
        self.send(packet(ptype, *args))

    def _fill(self, deadline):
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise TestFailure("timed out reading from server (have %r)" % self.buf[:200])
        self.sock.settimeout(remaining)
        try:
            d = self.sock.recv(65536)
        except socket.timeout:
            raise TestFailure("timed out reading from server (have %r)" % self.buf[:200])
        if not d:
            self.eof = True
            raise TestFailure("connection closed by server (have %r)" % self.buf[:200])
        self.buf += d

    def read_exact(self, n, timeout=None):
        deadline = time.monotonic() + (timeout or self.timeout)
        while len(self.buf) < n:
            self._fill(deadline)
        out, self.buf = self.buf[:n], self.buf[n:]
        return out

    def read_pkt(self, timeout=None):
        """Return (magic, type, body)."""
        deadline = time.monotonic() + (timeout or self.timeout)
        while len(self.buf) < 12:
            self._fill(deadline)
        magic = self.buf[:4]
        ptype, size = struct.unpack(">II", self.buf[4:12])
        while len(self.buf) < 12 + size:
            self._fill(deadline)
        body = self.buf[12:12 + size]
        self.buf = self.buf[12 + size:]
        return magic, ptype, body

    def expect_pkt(self, ptype, timeout=None):
        magic, t, body = self.read_pkt(timeout)
        check(magic == RES, "bad magic %r" % magic)
        check(t == ptype, "expected packet %s, got %s body=%r"
              % (PACKET_NAMES.get(ptype), PACKET_NAMES.get(t, t), body))
        return body

    def read_line(self, timeout=None):
        deadline = time.monotonic() + (timeout or self.timeout)
        while b"\n" not in self.buf:
            self._fill(deadline)
        i = self.buf.index(b"\n") + 1
        line, self.buf = self.buf[:i], self.buf[i:]
        return line

    def admin(self, line, timeout=None):
        """Send one admin command; return the raw reply (single line or list to '.')."""
        if isinstance(line, str):
            line = line.encode()
        if not line.endswith(b"\n"):
            line += b"\n"
        self.send(line)
        first = self.read_line(timeout)
        if first.startswith(b"OK") or first.startswith(b"ERR"):
            return first
        out = first
        while first != b".\n":
            first = self.read_line(timeout)
            out += first
        return out

    def echo_sync(self, token=b"sync", timeout=None):
        """Round-trip an ECHO_REQ: everything sent before it has been processed."""
        self.send_pkt(ECHO_REQ, token)
        body = self.expect_pkt(ECHO_RES, timeout)
        check(body == token, "echo mismatch %r" % body)


def bytes_until_closed(sock, timeout, ends=(ConnectionResetError,)):
    """Reads `sock` until the server closes it (or an `ends` error) and
    returns how many bytes came; a TestFailure if it stays open `timeout`."""
    sock.settimeout(timeout)
    got = 0
    try:
        while True:
            data = sock.recv(1 << 20)
            if not data:
                return got
            got += len(data)
    except ends:
        return got
    except socket.timeout:
        raise TestFailure("the connection was not closed (%d bytes read)" % got)


def admin(port, line, timeout=5.0):
    c = Conn(port, timeout)
    try:
        return c.admin(line, timeout).decode("utf-8", "replace")
    finally:
        c.close()


def parse_status(text):
    """`status` listing -> {func: (total, running, workers)}."""
    out = {}
    for line in text.split("\n"):
        if not line or line == ".":
            continue
        parts = line.split("\t")
        out[parts[0]] = tuple(int(x) for x in parts[1:4])
    return out


def parse_priority_status(text):
    """`prioritystatus` listing -> {func: (high, normal, low, workers)}."""
    out = {}
    for line in text.split("\n"):
        if not line or line == ".":
            continue
        parts = line.split("\t")
        out[parts[0]] = tuple(int(x) for x in parts[1:5])
    return out


def status(port):
    return parse_status(admin(port, "status"))


def wait_for(pred, timeout=10.0, desc="condition", interval=0.02):
    """Poll pred() until truthy; return its value. Raise on deadline."""
    deadline = time.monotonic() + timeout
    last = None
    while True:
        try:
            last = pred()
        except (OSError, TestFailure) as e:
            last = None
            err = e
        else:
            err = None
        if last:
            return last
        if time.monotonic() > deadline:
            raise TestFailure("timed out after %.1fs waiting for %s%s"
                              % (timeout, desc, (" (last error: %s)" % err) if err else ""))
        time.sleep(interval)


def wait_workers(port, func, n=1, timeout=10.0):
    """Poll `status` until func has at least n registered workers."""
    return wait_for(lambda: status(port).get(func, (0, 0, 0))[2] >= n,
                    timeout, "%d worker(s) for %r in status" % (n, func))


def status_unique(port, unique, timeout=5.0):
    """GET_STATUS_UNIQUE -> list of the STATUS_RES_UNIQUE fields (bytes)."""
    c = Conn(port, timeout)
    try:
        c.send_pkt(GET_STATUS_UNIQUE, unique)
        return c.expect_pkt(STATUS_RES_UNIQUE).split(b"\0")
    finally:
        c.close()


# --------------------------------------------------------------------------
# Child processes


class Proc:
    """A child process with stdout/stderr captured to files."""

    def __init__(self, argv, tmpdir, name, env=None):
        self.argv = argv
        self.name = name
        self.out_path = os.path.join(tmpdir, name + ".out")
        self.err_path = os.path.join(tmpdir, name + ".err")
        self._out = open(self.out_path, "wb")
        self._err = open(self.err_path, "wb")
        self.proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=self._out,
                                     stderr=self._err, env=env, start_new_session=True)

    @property
    def pid(self):
        return self.proc.pid

    def wait(self, timeout=20.0):
        try:
            return self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            raise TestFailure("%s did not finish within %.0fs; stdout=%r stderr=%r"
                              % (self.name, timeout, self.stdout()[-500:], self.stderr()[-500:]))

    def stdout(self):
        self._out.flush()
        with open(self.out_path, "rb") as f:
            return f.read().decode("utf-8", "replace")

    def stderr(self):
        with open(self.err_path, "rb") as f:
            return f.read().decode("utf-8", "replace")

    def kill(self, sig=signal.SIGKILL):
        if self.proc.poll() is None:
            try:
                os.kill(self.proc.pid, sig)
            except ProcessLookupError:
                pass

    def stop(self):
        if self.proc.poll() is None:
            self.kill(signal.SIGTERM)
            try:
                self.proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self.kill(signal.SIGKILL)
                try:
                    self.proc.wait(timeout=5)
                except subprocess.TimeoutExpired:
                    pass
        self._out.close()
        self._err.close()


def run(argv, timeout=20.0, input=None, env=None):
    """Run to completion with a timeout; return CompletedProcess (text)."""
    try:
        return subprocess.run(argv, input=input, capture_output=True, timeout=timeout,
                              env=env, text=True, stdin=None if input is not None
                              else subprocess.DEVNULL)
    except subprocess.TimeoutExpired as e:
        raise TestFailure("%s timed out after %.0fs (stdout=%r stderr=%r)"
                          % (" ".join(argv), timeout, e.stdout, e.stderr))


class Ctx:
    """Per-test context: a fresh server, a temp dir, and children to clean up."""

    def __init__(self, name, with_server=True):
        self.name = name
        self.tmp = tempfile.mkdtemp(prefix="interop-")
        self.procs = []
        self.server = Server(server_cmd()).start() if with_server else None
        self.port = self.server.port if self.server else None
        self._seq = 0

    def spawn(self, argv, name=None, env=None):
        self._seq += 1
        p = Proc(argv, self.tmp, "%02d-%s" % (self._seq, name or os.path.basename(argv[0])),
                 env=env)
        self.procs.append(p)
        return p

    def path(self, name):
        return os.path.join(self.tmp, name)

    def close(self):
        for p in reversed(self.procs):
            p.stop()
        if self.server:
            self.server.stop()
        for root, dirs, files in os.walk(self.tmp, topdown=False):
            for f in files:
                os.unlink(os.path.join(root, f))
            for d in dirs:
                os.rmdir(os.path.join(root, d))
        os.rmdir(self.tmp)

    def diagnostics(self):
        out = []
        for p in self.procs:
            try:
                out.append("  [%s] %s\n    stdout: %r\n    stderr: %r"
                           % (p.name, " ".join(p.argv), p.stdout()[-400:], p.stderr()[-400:]))
            except (OSError, ValueError):
                pass
        if self.server:
            log = self.server.log_text()
            if log.strip():
                out.append("  [server log] %r" % log[-800:])
        return "\n".join(out)


# --------------------------------------------------------------------------
# Runner



def missing_clients(php, perl, tools=()):
    """What is missing of the third-party clients the suites drive: the
    given commands on PATH, the php-gearman extension, the Perl modules."""
    missing = [t for t in ("php", "perl") + tuple(tools) if not shutil.which(t)]
    if "php" not in missing:
        r = run(php + ["-r", "exit(extension_loaded('gearman') ? 0 : 1);"], timeout=20)
        if r.returncode != 0:
            missing.append("php-gearman extension")
    if "perl" not in missing:
        r = run(perl + ["-MGearman::Client", "-MGearman::Worker", "-e", "1"], timeout=20)
        if r.returncode != 0:
            missing.append("perl Gearman::Client/Gearman::Worker (libgearman-client-perl)")
    return missing

def run_tmp_suite(title, tests, prefix, banner=""):
    """tests: functions taking a fresh temporary directory (removed after).

    Runs those whose name contains a command-line substring (all without
    one); prints PASS/FAIL/SKIP per test and `N passed, N failed, N skipped`;
    returns the exit code.
    """
    wanted = [a for a in sys.argv[1:] if not a.startswith("-")]
    tests = [t for t in tests if not wanted or any(w in t.__name__ for w in wanted)]
    passed = failed = skipped = 0
    t0 = time.monotonic()
    print("== %s: %d tests; %s" % (title, len(tests), banner), flush=True)
    for t in tests:
        tmp = tempfile.mkdtemp(prefix=prefix)
        start = time.monotonic()
        try:
            t(tmp)
        except Skip as e:
            skipped += 1
            print("SKIP %s (%.2fs): %s" % (t.__name__, time.monotonic() - start, e), flush=True)
        except Exception as e:  # noqa: BLE001 - the runner reports everything
            failed += 1
            detail = str(e) if isinstance(e, TestFailure) else traceback.format_exc()
            print("FAIL %s (%.2fs): %s" % (t.__name__, time.monotonic() - start, detail),
                  flush=True)
        else:
            passed += 1
            print("PASS %s (%.2fs)" % (t.__name__, time.monotonic() - start), flush=True)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
    print("== %s finished in %.1fs" % (title, time.monotonic() - t0))
    print(summary(passed, failed, skipped), flush=True)
    return 0 if failed == 0 else 1


def summary(passed, failed, skipped=0):
    """The last line of every suite, which tests/interop/run.sh and
    scripts/test.sh add up."""
    return "%d passed, %d failed, %d skipped" % (passed, failed, skipped)


def run_suite(title, tests, argv=None):
    """tests: list of (name, callable). Callables take no args and raise on failure.

    Command line: optional substrings; only tests whose name contains one run.
    Prints one PASS/FAIL/SKIP line per test and finally
    `N passed, N failed, N skipped`.
    Returns the process exit code (0 iff nothing failed).
    """
    argv = sys.argv[1:] if argv is None else argv
    wanted = [a for a in argv if not a.startswith("-")]
    if wanted:
        tests = [(n, f) for n, f in tests if any(w in n for w in wanted)]
    passed = failed = skipped = 0
    t0 = time.monotonic()
    print("== %s: %d tests; SERVER_CMD=%s" % (title, len(tests), server_cmd()), flush=True)
    for name, fn in tests:
        start = time.monotonic()
        try:
            fn()
        except Skip as e:
            skipped += 1
            print("SKIP %s (%.2fs): %s" % (name, time.monotonic() - start, e), flush=True)
        except Exception as e:  # noqa: BLE001 - the runner reports everything
            failed += 1
            detail = str(e) if isinstance(e, TestFailure) else traceback.format_exc()
            print("FAIL %s (%.2fs): %s" % (name, time.monotonic() - start, detail), flush=True)
        else:
            passed += 1
            print("PASS %s (%.2fs)" % (name, time.monotonic() - start), flush=True)
    print("== %s finished in %.1fs" % (title, time.monotonic() - t0))
    print(summary(passed, failed, skipped), flush=True)
    return 0 if failed == 0 else 1


def with_ctx(fn, with_server=True, ctx_class=None, **kw):
    """Wrap fn(ctx) into a no-arg test that always cleans up and adds
    diagnostics; `ctx_class(name, **kw)` makes a suite's own context."""
    def wrapper():
        ctx = ctx_class(fn.__name__, **kw) if ctx_class else Ctx(fn.__name__, with_server)
        try:
            fn(ctx)
        except TestFailure as e:
            raise TestFailure("%s\n%s" % (e, ctx.diagnostics()))
        finally:
            ctx.close()
    wrapper.__name__ = fn.__name__
    return wrapper

