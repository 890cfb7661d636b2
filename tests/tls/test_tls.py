"""TLS on the Gearman port and the access rules, against real peers.

Certificates come from the `openssl` command (a throwaway CA, a server
certificate for 127.0.0.1 and client certificates per test run). Checks:
gearmand's flags and environment variables, clear errors at start for a
missing or bad certificate, plaintext and TLS listeners side by side,
a TLS client that never reads closed alone, Python's `ssl` module speaking the binary protocol, `openssl s_client`
speaking the admin protocol, no plaintext answer on a TLS port, client
certificates (required or optional) whose subject names the worker in
`workers` and the HTTP API, the `[access]` rules by network and by
certificate on the Gearman port and over HTTP (and their SIGHUP reload),
`gearshift submit/work/admin` with `--tls-ca`, libgearman's `gearman`
tool behind a socat TLS sidecar (docs/tls.md's example), and that
Debian's gearmand quietly speaks plaintext when given `--ssl`.

Python 3 stdlib, openssl, socat, gearman-tools, gearman-job-server.
Every wait is bounded. Ends with `N passed, N failed, N skipped`.

usage: python3 tests/tls/test_tls.py [name-substring ...]
  GEARSHIFT  the gearshift binary (default: target/debug/gearshift)
"""

import http.client
import json
import os
import re
import select
import shutil
import signal
import socket
import ssl
import struct
import subprocess
import sys
import time
import urllib.error
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(ROOT, "tests", "interop"))

import harness as h  # noqa: E402
from harness import check, check_eq  # noqa: E402

GEARSHIFT = os.environ.get("GEARSHIFT") or os.path.join(ROOT, "target", "debug", "gearshift")

CAN_DO, SUBMIT_JOB, JOB_CREATED, GRAB_JOB, JOB_ASSIGN, WORK_DATA = 1, 7, 8, 9, 11, 28
WORK_COMPLETE, ERROR, ECHO_REQ, ECHO_RES, SUBMIT_JOB_BG = 13, 19, 16, 17, 18


# --------------------------------------------------------------------------
# Certificates


def openssl(*args, cwd):
    r = subprocess.run(["openssl", *args], cwd=cwd, capture_output=True, text=True, timeout=60)
    check(r.returncode == 0, "openssl %s failed: %s" % (" ".join(args), r.stderr[-500:]))


class Pki:
    """A CA, a server certificate for 127.0.0.1 and client certificates."""

    def __init__(self, tmp):
        self.dir = os.path.join(tmp, "pki")
        os.makedirs(self.dir)
        openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", "ca.key",
                "-out", "ca.pem", "-days", "2", "-subj", "/CN=Gearshift Test CA", cwd=self.dir)
        self.write("server.ext", "subjectAltName=DNS:localhost,IP:127.0.0.1\n"
                   "extendedKeyUsage=serverAuth\n")
        self.write("client.ext", "basicConstraints=CA:FALSE\nextendedKeyUsage=clientAuth\n")
        self.server = self.issue("server", "/CN=localhost", "server.ext")

    def write(self, name, text):
        with open(self.path(name), "w") as f:
            f.write(text)

    def path(self, name):
        return os.path.join(self.dir, name)

    def issue(self, name, subject, ext="client.ext"):
        """(cert, key) paths of a new certificate the CA signed."""
        openssl("req", "-newkey", "rsa:2048", "-nodes", "-keyout", name + ".key",
                "-out", name + ".csr", "-subj", subject, cwd=self.dir)
        openssl("x509", "-req", "-in", name + ".csr", "-CA", "ca.pem", "-CAkey", "ca.key",
                "-CAcreateserial", "-out", name + ".pem", "-days", "2", "-extfile", ext,
                cwd=self.dir)
        return self.path(name + ".pem"), self.path(name + ".key")

    @property
    def ca(self):
        return self.path("ca.pem")


# --------------------------------------------------------------------------
# Servers and connections


class Gearshift:
    """`gearshift serve` with a plaintext port and TLS listeners; the TLS
    and HTTP ports are read off its log."""

    def __init__(self, extra, env=None, tls=True):
        self.extra = extra
        self.env = env
        self.tls = tls

    def start(self):
        cmd = ("%s serve -L 127.0.0.1 -p {port} --http 127.0.0.1:0 --store memory "
               "--verbose INFO %s" % (GEARSHIFT, self.extra))
        saved = dict(os.environ)
        os.environ.update(self.env or {})
        try:
            self.srv = h.Server(cmd, "tls").start()
        finally:
            os.environ.clear()
            os.environ.update(saved)
        self.port = self.srv.port
        self.tls_port = self.log_port(r"listening on 127\.0\.0\.1:(\d+) \(TLS\)") if self.tls else None
        self.http_port = self.log_port(r"http listening on 127\.0\.0\.1:(\d+)")
        return self

    def log_port(self, pattern):
        found = []

        def seen():
            m = re.search(pattern, self.srv.log_text())
            if m:
                found.append(int(m.group(1)))
            return bool(m)

        h.wait_for(seen, 10, "the log to show %s" % pattern)
        return found[0]

    def log(self):
        return self.srv.log_text()

    def stop(self):
        self.srv.stop()


def start_error(args, env=None):
    """Runs `serve` expecting it to refuse to start; returns its stderr."""
    run_env = dict(os.environ)
    run_env.update(env or {})
    argv = [GEARSHIFT, "serve", "-L", "127.0.0.1", "-p", "0", "--store", "memory"] + args
    r = subprocess.run(argv, capture_output=True, text=True, timeout=20, env=run_env,
                       stdin=subprocess.DEVNULL)
    check(r.returncode != 0, "serve %s started (it should not): %r" % (args, r.stderr[-300:]))
    return r.stderr


def pkt(ptype, *args):
    body = b"\0".join(a if isinstance(a, bytes) else str(a).encode() for a in args)
    return b"\0REQ" + struct.pack(">II", ptype, len(body)) + body


class Tls(h.Conn):
    """harness.Conn over a TLS session (the same bounded reads)."""

    def __init__(self, port, ca, cert=None, timeout=5.0):  # noqa: super not called on purpose
        ctx = ssl.create_default_context(cafile=ca)
        if cert:
            ctx.load_cert_chain(*cert)
        raw = socket.create_connection(("127.0.0.1", port), timeout=timeout)
        self.sock = ctx.wrap_socket(raw, server_hostname="127.0.0.1")
        self.buf = b""
        self.eof = False
        self.timeout = timeout


def job_round(client, worker, func=b"rev", data=b"hello"):
    """A foreground job submitted on `client`, worked on `worker`."""
    worker.send(pkt(CAN_DO, func))
    client.send(pkt(SUBMIT_JOB, func, b"", data))
    handle = client.expect_pkt(JOB_CREATED)
    worker.send(pkt(GRAB_JOB))
    body = worker.expect_pkt(JOB_ASSIGN)
    got_handle, got_func, got_data = body.split(b"\0", 2)
    check_eq((got_handle, got_func, got_data), (handle, func, data), "assignment")
    worker.send(pkt(WORK_COMPLETE, handle, data[::-1]))
    check_eq(client.expect_pkt(WORK_COMPLETE), handle + b"\0" + data[::-1], "result")


def http_get(port, path):
    try:
        with urllib.request.urlopen("http://127.0.0.1:%d%s" % (port, path), timeout=5) as r:
            return r.status, json.loads(r.read() or b"null")
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read() or b"null")


def tls_flags(pki, extra=""):
    cert, key = pki.server
    return "--ssl-listen 127.0.0.1:0 --ssl-certificate %s --ssl-key %s %s" % (cert, key, extra)


# --------------------------------------------------------------------------
# Tests


def test_bad_certificates_stop_the_server_at_start(tmp):
    pki = Pki(tmp)
    cert, key = pki.server
    e = start_error(["--ssl"])
    check("--ssl-certificate" in e and "plaintext" in e, e)
    e = start_error(["--ssl", "--ssl-certificate", pki.path("nope.pem"), "--ssl-key", key])
    check("cannot read the certificate" in e and "nope.pem" in e, e)
    pki.write("junk.pem", "not a certificate\n")
    e = start_error(["--ssl", "--ssl-certificate", pki.path("junk.pem"), "--ssl-key", key])
    check("holds no certificate" in e, e)
    other_cert, other_key = pki.issue("other", "/CN=other")
    e = start_error(["--ssl", "--ssl-certificate", cert, "--ssl-key", other_key])
    check("do not go together" in e, e)
    e = start_error(["--ssl", "--ssl-certificate", cert, "--ssl-key", key, "--ssl-verify-client"])
    check("--ssl-ca-file" in e, e)
    e = start_error(["--ssl-verify-client"])
    check("needs --ssl" in e, e)
    # gearmand's environment variables name the same files.
    e = start_error(["--ssl"], env={"GEARMAND_SERVER_PEM": cert,
                                    "GEARMAND_SERVER_KEY": pki.path("missing.key")})
    check("cannot read the key" in e and "missing.key" in e, e)


def test_plain_and_tls_listeners_side_by_side(tmp):
    pki = Pki(tmp)
    s = Gearshift(tls_flags(pki)).start()
    try:
        # Over TLS both ways, and mixed: a TLS client, a plaintext worker.
        job_round(Tls(s.tls_port, pki.ca), Tls(s.tls_port, pki.ca))
        job_round(Tls(s.tls_port, pki.ca), h.Conn(s.port), func=b"mixed")
        job_round(h.Conn(s.port), Tls(s.tls_port, pki.ca), func=b"mixed2")
        # A background job over TLS shows in plaintext `status`.
        c = Tls(s.tls_port, pki.ca)
        c.send(pkt(SUBMIT_JOB_BG, b"later", b"", b"x"))
        c.expect_pkt(JOB_CREATED)
        check("later\t1\t0\t0" in h.admin(s.port, "status"), "status")
        # A server certificate the client does not trust: no session.
        other = Pki(os.path.join(tmp, "other"))
        try:
            Tls(s.tls_port, other.ca)
            raise h.TestFailure("a client that does not trust the CA got a session")
        except ssl.SSLError:
            pass

        def failures():
            with urllib.request.urlopen("http://127.0.0.1:%d/metrics" % s.http_port, timeout=5) as r:
                m = re.search(r"^gearshift_tls_handshake_failures_total (\d+)$",
                              r.read().decode(), re.M)
            return m and int(m.group(1)) >= 1

        h.wait_for(failures, 10, "the failed handshake counted in /metrics")
    finally:
        s.stop()


def test_a_tls_client_that_never_reads_is_closed_alone(tmp):
    """A TLS client that never reads what a worker floods it with is closed
    once it owes past the hard output limit (so the server holds a bounded
    amount for it); another TLS client is served meanwhile and after."""
    pki = Pki(tmp)
    s = Gearshift(tls_flags(pki, "--max-output 64K --max-packet-size 1M")).start()
    try:
        w = h.Conn(s.port, timeout=10)
        w.send(pkt(CAN_DO, b"flood"))
        hog = Tls(s.tls_port, pki.ca)
        hog.send(pkt(SUBMIT_JOB, b"flood", b"", b"x"))
        handle = hog.expect_pkt(JOB_CREATED)
        w.send(pkt(GRAB_JOB))
        check_eq(w.expect_pkt(JOB_ASSIGN).split(b"\0", 1)[0], handle, "the worker got the job")
        chunk = b"z" * (512 * 1024)
        for _ in range(32):
            w.send(pkt(WORK_DATA, handle, chunk))
        w.send(pkt(WORK_COMPLETE, handle, b""))
        other = Tls(s.tls_port, pki.ca)
        other.send(pkt(ECHO_REQ, b"still here"))
        check_eq(other.expect_pkt(ECHO_RES, timeout=10), b"still here", "another TLS client")
        got = h.bytes_until_closed(hog.sock, 15, ends=(ConnectionResetError, ssl.SSLError))
        check(got < 32 * len(chunk), "the closed client got only part of the flood (%d bytes)" % got)
        check("its peer does not read what it is sent" in s.log(), "the log says why: %s"
              % s.log()[-800:])
        other.send(pkt(ECHO_REQ, b"and after"))
        check_eq(other.expect_pkt(ECHO_RES, timeout=10), b"and after", "served after the close")
    finally:
        s.stop()


def test_sighup_reloads_the_certificate(tmp):
    """A renewed certificate and key, written over the files, are served
    from the SIGHUP on; a session opened before keeps working; a file
    that does not load on a later SIGHUP keeps the renewed one in force."""
    pki = Pki(tmp)
    s = Gearshift(tls_flags(pki)).start()
    try:
        def served():
            c = Tls(s.tls_port, pki.ca)
            der = c.sock.getpeercert(binary_form=True)
            c.close()
            return der
        first = served()
        before = Tls(s.tls_port, pki.ca)
        cert, key = pki.server
        new_cert, new_key = pki.issue("renewed", "/CN=localhost", "server.ext")
        shutil.copyfile(new_cert, cert)
        shutil.copyfile(new_key, key)
        with open(new_cert, "rb") as f:
            renewed = ssl.PEM_cert_to_DER_cert(f.read().decode())
        check(renewed != first, "the renewed certificate differs")
        os.kill(s.srv.pid, signal.SIGHUP)
        h.wait_for(lambda: "SIGHUP: TLS certificate reloaded" in s.log(), 10, "the reload logged")
        check_eq(served(), renewed, "the certificate served after the SIGHUP")
        job_round(before, Tls(s.tls_port, pki.ca), func=b"across_reload")
        with open(key, "w") as f:
            f.write("not a key\n")
        os.kill(s.srv.pid, signal.SIGHUP)
        h.wait_for(lambda: "keeping the TLS certificate in force" in s.log(), 10,
                   "the bad key refused")
        check_eq(served(), renewed, "the renewed certificate kept")
    finally:
        s.stop()


def test_https_on_the_http_port(tmp):
    """--http-tls: the JSON API answers over HTTPS with the Gearman
    certificate, plain HTTP gets no answer (a failed handshake, counted),
    the Gearman port stays plaintext, a SIGHUP's renewed certificate is
    served on the HTTP port too, and partitioned nodes without node TLS
    refuse the flag."""
    pki = Pki(tmp)
    cert, key = pki.server
    s = Gearshift("--ssl-certificate %s --ssl-key %s --http-tls" % (cert, key), tls=False).start()
    try:
        ctx = ssl.create_default_context(cafile=pki.ca)

        def https_get(path):
            url = "https://127.0.0.1:%d%s" % (s.http_port, path)
            with urllib.request.urlopen(url, timeout=5, context=ctx) as r:
                return r.status, r.read().decode()
        status, body = https_get("/api/v1/overview")
        check_eq(status, 200, "HTTPS overview")
        check("totals" in json.loads(body), "an overview: %r" % body[:200])
        try:
            urllib.request.urlopen("http://127.0.0.1:%d/api/v1/overview" % s.http_port, timeout=5)
            raise h.TestFailure("plain HTTP was answered on an HTTPS-only port")
        except (OSError, http.client.HTTPException):
            pass
        h.wait_for(lambda: re.search(r"^gearshift_tls_handshake_failures_total [1-9]",
                                     https_get("/metrics")[1], re.M), 10,
                   "the plain request counted as a failed handshake")
        job_round(h.Conn(s.port), h.Conn(s.port), func=b"plain_gearman")
        new_cert, new_key = pki.issue("renewed_http", "/CN=localhost", "server.ext")
        shutil.copyfile(new_cert, cert)
        shutil.copyfile(new_key, key)
        os.kill(s.srv.pid, signal.SIGHUP)
        h.wait_for(lambda: "SIGHUP: TLS certificate reloaded" in s.log(), 10, "the reload")
        raw = socket.create_connection(("127.0.0.1", s.http_port), timeout=5)
        served = ctx.wrap_socket(raw, server_hostname="127.0.0.1").getpeercert(binary_form=True)
        with open(new_cert) as f:
            check_eq(served, ssl.PEM_cert_to_DER_cert(f.read()), "the renewed certificate on HTTPS")
    finally:
        s.stop()
    r = h.run([GEARSHIFT, "serve", "-L", "127.0.0.1", "-p", "0",
               "--store", "postgres://gearshift@127.0.0.1:1/none", "--partitioned",
               "--ssl-certificate", cert, "--ssl-key", key, "--http-tls"], timeout=20)
    check(r.returncode != 0 and "needs --link-tls" in r.stderr,
          "partitioned nodes without node TLS refuse --http-tls: %r" % r.stderr[-300:])


def test_gearmand_style_ssl_makes_every_listener_tls(tmp):
    pki = Pki(tmp)
    cert, key = pki.server
    env = {"GEARMAND_SERVER_PEM": cert, "GEARMAND_SERVER_KEY": key}
    cmd = ("%s serve -L 127.0.0.1 -p {port} --store memory --ssl --verbose INFO"
           % GEARSHIFT)
    saved = dict(os.environ)
    os.environ.update(env)
    try:
        srv = h.Server(cmd, "ssl").start()
    finally:
        os.environ.clear()
        os.environ.update(saved)
    try:
        h.wait_for(lambda: "(TLS)" in srv.log_text(), 10, "the TLS listener")
        c = Tls(srv.port, pki.ca)
        c.echo_sync(b"over tls")
        # No plaintext fallback: a plaintext ECHO gets no ECHO_RES, only
        # a TLS alert or a close; other sessions are untouched.
        p = socket.create_connection(("127.0.0.1", srv.port), timeout=5)
        p.sendall(pkt(ECHO_REQ, b"plain"))
        got = b""
        try:
            while True:
                d = p.recv(4096)
                if not d:
                    break
                got += d
        except (socket.timeout, ConnectionResetError):
            pass
        check(b"RES" not in got and b"plain" not in got, "plaintext answer: %r" % got)
        c.echo_sync(b"still here")
        h.wait_for(lambda: "TLS handshake failed" in srv.log_text(), 5, "the refusal logged")
    finally:
        srv.stop()


def test_openssl_s_client_speaks_the_admin_protocol(tmp):
    pki = Pki(tmp)
    s = Gearshift(tls_flags(pki)).start()
    try:
        # -quiet keeps the session open at the end of input (-ign_eof):
        # read the replies, then end it.
        p = subprocess.Popen(
            ["openssl", "s_client", "-quiet", "-verify_return_error", "-CAfile", pki.ca,
             "-connect", "127.0.0.1:%d" % s.tls_port],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        try:
            p.stdin.write(b"version\nstatus\n")
            p.stdin.flush()
            out = b""
            deadline = time.monotonic() + 15
            while not out.endswith(b".\n") and time.monotonic() < deadline:
                ready, _, _ = select.select([p.stdout], [], [], 0.5)
                if ready:
                    chunk = os.read(p.stdout.fileno(), 4096)
                    if not chunk:
                        break
                    out += chunk
        finally:
            p.kill()
            p.wait(timeout=5)
        check(out.startswith(b"OK ") and out.endswith(b".\n"), "s_client got %r" % out)
    finally:
        s.stop()


def test_client_certificates_name_workers(tmp):
    pki = Pki(tmp)
    w1 = pki.issue("w1", "/O=Acme/CN=worker-1")
    s = Gearshift(tls_flags(pki, "--ssl-ca-file %s --ssl-verify-client" % pki.ca)).start()
    try:
        # Required: no certificate, no session.
        try:
            c = Tls(s.tls_port, pki.ca)
            c.echo_sync()
            raise h.TestFailure("a client without a certificate was served")
        except (ssl.SSLError, h.TestFailure, ConnectionResetError, BrokenPipeError) as e:
            if "was served" in str(e):
                raise
        w = Tls(s.tls_port, pki.ca, cert=w1)
        w.send(pkt(CAN_DO, b"resize"))
        w.echo_sync()
        workers = h.admin(s.port, "workers")
        check(re.search(r"^\d+ 127\.0\.0\.1 O=Acme,CN=worker-1 : resize$", workers, re.M),
              "workers: %r" % workers)
        code, body = http_get(s.http_port, "/api/v1/workers")
        check_eq(code, 200, "HTTP status")
        ids = [x.get("identity") for x in body["workers"]]
        check("O=Acme,CN=worker-1" in ids, "identities %r" % ids)
    finally:
        s.stop()
    # Optional: with a CA but without --ssl-verify-client both may connect.
    s = Gearshift(tls_flags(pki, "--ssl-ca-file %s" % pki.ca)).start()
    try:
        Tls(s.tls_port, pki.ca).echo_sync()
        Tls(s.tls_port, pki.ca, cert=w1).echo_sync()
    finally:
        s.stop()


def test_access_rules_by_network_and_certificate(tmp):
    pki = Pki(tmp)
    w1 = pki.issue("w1", "/O=Acme/CN=worker-1")
    w2 = pki.issue("w2", "/O=Acme/CN=worker-2")
    app = pki.issue("app", "/O=Acme/CN=app")
    conf = os.path.join(tmp, "gearshift.toml")
    with open(conf, "w") as f:
        f.write('[access]\nsubmit = ["cert:CN=app"]\nwork = ["cert:CN=worker-1"]\n'
                'admin_read = ["cert:*"]\n')
    s = Gearshift(tls_flags(pki, "--ssl-ca-file %s --config %s" % (pki.ca, conf))).start()
    try:
        # Plaintext loopback: no certificate, so no submit, work or reads;
        # loopback may still change (and shut down).
        p = h.Conn(s.port)
        p.send(pkt(SUBMIT_JOB_BG, b"f", b"", b"x"))
        check_eq(p.expect_pkt(ERROR),
                 b"PERMISSION_DENIED\0submitting jobs is not allowed for this peer", "submit")
        p.send(pkt(CAN_DO, b"f"))
        check_eq(p.expect_pkt(ERROR),
                 b"PERMISSION_DENIED\0working on jobs is not allowed for this peer", "can_do")
        check_eq(p.admin("status"),
                 b"ERR PERMISSION_DENIED admin+commands+are+not+allowed+from+this+peer\r\n",
                 "status")
        check_eq(p.admin("maxqueue f 5"), b"OK\r\n", "a loopback change")
        # The connection stays usable after refusals.
        p.echo_sync()
        # worker-2 may not work; worker-1 may; app may submit but not work.
        bad = Tls(s.tls_port, pki.ca, cert=w2)
        bad.send(pkt(CAN_DO, b"f"))
        check(bad.expect_pkt(ERROR).startswith(b"PERMISSION_DENIED"), "worker-2")
        job_round(Tls(s.tls_port, pki.ca, cert=app), Tls(s.tls_port, pki.ca, cert=w1), func=b"f")
        a = Tls(s.tls_port, pki.ca, cert=app)
        check(a.admin("status").endswith(b".\n"), "a certificate may read")
        check("request refused by the access rules" in s.log(), "refusals are logged")
        # HTTP: reads by address, and loopback is not in admin_read.
        code, body = http_get(s.http_port, "/api/v1/overview")
        check_eq(code, 403, "HTTP read")
        check("read" in body["error"], body)
        # SIGHUP: new rules for connections opened from then on.
        with open(conf, "w") as f:
            f.write('[access]\nadmin_read = ["loopback"]\n')
        os.kill(s.srv.pid, signal.SIGHUP)
        h.wait_for(lambda: "policies reloaded" in s.log(), 10, "the reload")
        check(h.admin(s.port, "status").endswith(".\n"), "loopback reads after the reload")
        check_eq(http_get(s.http_port, "/api/v1/overview")[0], 200, "HTTP read after reload")
        q = h.Conn(s.port)
        q.send(pkt(SUBMIT_JOB_BG, b"f", b"", b"x"))
        q.expect_pkt(JOB_CREATED)
    finally:
        s.stop()


def test_gearshift_cli_over_tls(tmp):
    pki = Pki(tmp)
    w1 = pki.issue("w1", "/CN=cli-worker")
    s = Gearshift(tls_flags(pki, "--ssl-ca-file %s" % pki.ca)).start()
    procs = []
    try:
        addr = "127.0.0.1:%d" % s.tls_port
        worker = h.Proc([GEARSHIFT, "work", "-s", addr, "--tls-ca", pki.ca,
                         "--tls-cert", w1[0], "--tls-key", w1[1], "-f", "up", "--", "tr", "a-z", "A-Z"],
                        tmp, "worker")
        procs.append(worker)
        h.wait_for(lambda: "cli-worker" in h.admin(s.port, "workers"), 15,
                   "the CLI worker over TLS")
        r = h.run([GEARSHIFT, "submit", "-s", addr, "--tls-ca", pki.ca, "-f", "up", "hello"],
                  timeout=20)
        check_eq((r.returncode, r.stdout.strip()), (0, "HELLO"), "submit over TLS")
        r = h.run([GEARSHIFT, "admin", "-s", addr, "--tls-ca", pki.ca, "status"], timeout=20)
        check(r.returncode == 0 and "up" in r.stdout, "admin over TLS: %r %r" % (r.stdout, r.stderr))
        # No plaintext fallback: --tls against the plaintext port fails.
        r = h.run([GEARSHIFT, "submit", "-s", "127.0.0.1:%d" % s.port, "--tls-ca", pki.ca,
                   "-f", "up", "x"], timeout=20)
        check(r.returncode != 0, "TLS to a plaintext port: %r" % r.stdout)
    finally:
        for p in procs:
            p.stop()
        s.stop()


def test_libgearman_behind_a_socat_sidecar(tmp):
    """docs/tls.md's example: the `gearman` tool (libgearman, no TLS on
    Debian) reaches a TLS-only server through a local socat sidecar."""
    missing = [t for t in ("socat", "gearman") if not shutil.which(t)]
    check(not missing, "needs %s" % missing)
    pki = Pki(tmp)
    cert, key = pki.server
    cmd = ("%s serve -L 127.0.0.1 -p {port} --store memory --ssl --ssl-certificate %s "
           "--ssl-key %s --verbose INFO" % (GEARSHIFT, cert, key))
    srv = h.Server(cmd, "sidecar").start()
    procs = []
    try:
        side = h.free_port()
        procs.append(h.Proc(
            ["socat", "TCP-LISTEN:%d,bind=127.0.0.1,reuseaddr,fork" % side,
             "OPENSSL:127.0.0.1:%d,cafile=%s,commonname=localhost" % (srv.port, pki.ca)],
            tmp, "socat"))
        h.wait_for(lambda: h._listening(side), 10, "the sidecar")
        procs.append(h.Proc(["gearman", "-h", "127.0.0.1", "-p", str(side), "-w", "-f",
                             "rev", "--", "rev"], tmp, "gearman-worker"))
        r = h.run(["gearman", "-h", "127.0.0.1", "-p", str(side), "-f", "rev", "hello"],
                  timeout=20)
        check_eq((r.returncode, r.stdout.strip()), (0, "olleh"), "a job through the sidecar")
        r = h.run(["gearadmin", "-h", "127.0.0.1", "-p", str(side), "--status"], timeout=20)
        check("rev\t0\t0\t1" in r.stdout, "gearadmin through the sidecar: %r" % r.stdout)
    finally:
        for p in procs:
            p.stop()
        srv.stop()


def test_debian_gearmand_ssl_is_plaintext(tmp):
    """Why the sidecar: Debian's gearmand is built without TLS and takes
    --ssl silently, still speaking plaintext (gearmand #207)."""
    gearmand = shutil.which("gearmand") or "/usr/sbin/gearmand"
    check(os.path.exists(gearmand), "needs gearmand (gearman-job-server)")
    srv = h.Server("%s --ssl -L 127.0.0.1 -p {port} --log-file none" % gearmand,
                   "gearmand-ssl").start()
    try:
        r = subprocess.run(["openssl", "s_client", "-connect", "127.0.0.1:%d" % srv.port],
                           input="", capture_output=True, text=True, timeout=20)
        check(r.returncode != 0, "gearmand --ssl completed a TLS handshake")
        c = h.Conn(srv.port)
        c.echo_sync(b"plaintext")
    finally:
        srv.stop()


TESTS = [
    test_bad_certificates_stop_the_server_at_start,
    test_plain_and_tls_listeners_side_by_side,
    test_a_tls_client_that_never_reads_is_closed_alone,
    test_sighup_reloads_the_certificate,
    test_https_on_the_http_port,
    test_gearmand_style_ssl_makes_every_listener_tls,
    test_openssl_s_client_speaks_the_admin_protocol,
    test_client_certificates_name_workers,
    test_access_rules_by_network_and_certificate,
    test_gearshift_cli_over_tls,
    test_libgearman_behind_a_socat_sidecar,
    test_debian_gearmand_ssl_is_plaintext,
]

if __name__ == "__main__":
    sys.exit(h.run_tmp_suite("tls", TESTS, "gearshift-tls-", "GEARSHIFT=%s" % GEARSHIFT))
