"""Plumbing of the GearMonkey bridge suite (test_gearmonkey.py): a
redis-server of the test's own (restartable on its port and data, optional
TLS with a throwaway CA, optional password), and a per-test context with a
Gearshift bridging to it plus helpers for both sides (PHP, Perl and CLI
Gearman clients and workers; gearmonkey.py's client and worker).
"""

import os
import re
import shlex
import signal
import subprocess
import sys
import time
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(ROOT, "tests", "interop"))
sys.path.insert(0, HERE)

import harness as h  # noqa: E402
from harness import check  # noqa: E402

import redis  # noqa: E402

import gearmonkey as gm  # noqa: E402

GEARSHIFT = os.environ.get("GEARSHIFT") or os.path.join(ROOT, "target", "debug", "gearshift")
REDIS_SERVER = os.environ.get("REDIS_SERVER") or "redis-server"
CLIENTS = os.path.join(ROOT, "tests", "interop", "clients")
PHP = ["php", "-d", "display_errors=stderr"]
PERL = ["perl"]
GM = [sys.executable, os.path.join(HERE, "gearmonkey.py")]


class Redis:
    """A redis-server of the test's own; restartable on the same port and data."""

    def __init__(self, tmp, tls=False, password=None):
        self.dir = os.path.join(tmp, "redis")
        os.makedirs(self.dir)
        self.port = h.free_port()
        self.proc = None
        self.tls = tls
        self.password = password
        if tls:
            # A throwaway CA and a certificate for 127.0.0.1 signed by it.
            d = self.dir
            ext = os.path.join(d, "ext")
            with open(ext, "w") as f:
                f.write("subjectAltName=IP:127.0.0.1\n")
            for argv in (
                    ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2",
                     "-keyout", "ca.key", "-out", "ca.pem", "-subj", "/CN=gearmonkey-test-ca"],
                    ["openssl", "req", "-newkey", "rsa:2048", "-nodes", "-keyout", "key.pem",
                     "-out", "srv.csr", "-subj", "/CN=127.0.0.1"],
                    ["openssl", "x509", "-req", "-in", "srv.csr", "-CA", "ca.pem", "-CAkey",
                     "ca.key", "-CAcreateserial", "-out", "cert.pem", "-days", "2",
                     "-extfile", ext]):
                r = subprocess.run(argv, cwd=d, capture_output=True, text=True, timeout=30)
                check(r.returncode == 0, "%s: %s" % (" ".join(argv), r.stderr))
        self.start()

    def start(self):
        argv = [REDIS_SERVER, "--bind", "127.0.0.1",
                "--dir", self.dir, "--save", "", "--appendonly", "yes",
                "--appendfsync", "always", "--daemonize", "no", "--logfile", "redis.log"]
        if self.tls:
            argv += ["--port", "0", "--tls-port", str(self.port),
                     "--tls-cert-file", "cert.pem", "--tls-key-file", "key.pem",
                     "--tls-ca-cert-file", "ca.pem", "--tls-auth-clients", "no"]
        else:
            argv += ["--port", str(self.port)]
        if self.password:
            argv += ["--requirepass", self.password]
        self.proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                     stderr=subprocess.DEVNULL, start_new_session=True)
        deadline = time.monotonic() + 10
        while True:
            try:
                if self.client().ping():
                    return
            except redis.RedisError:
                pass
            check(self.proc.poll() is None, "redis-server exited %s" % self.proc.returncode)
            check(time.monotonic() < deadline, "redis-server did not answer within 10 s")
            time.sleep(0.05)

    def stop(self, sig=signal.SIGTERM):
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(sig)
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=5)
        self.proc = None

    def _url(self, tls_suffix):
        auth = (":%s@" % self.password) if self.password else ""
        if self.tls:
            return "rediss://%s127.0.0.1:%d/0%s" % (auth, self.port, tls_suffix)
        return "redis://%s127.0.0.1:%d/0" % (auth, self.port)

    @property
    def url(self):
        """For the bridge (which checks the certificate against --gearmonkey-ca)."""
        return self._url("")

    @property
    def ca(self):
        return os.path.join(self.dir, "ca.pem")

    @property
    def py_url(self):
        """For redis-py (gearmonkey.py), checking against the test CA too."""
        return self._url("?ssl_ca_certs=%s" % self.ca)

    def client(self):
        return redis.Redis.from_url(self.py_url, socket_timeout=60)


class Ctx(h.Ctx):
    """A fresh Redis and a Gearshift bridging to it."""

    def __init__(self, name, config=None, durable=False, match=(), tls=False, password=None):
        """config: a policy file's text, `{url}` in it replaced by the Redis URL;
        one with a `[[gearmonkey]]` section replaces the `--gearmonkey` flag."""
        super().__init__(name, with_server=False)
        self.redis = Redis(self.tmp, tls, password)
        self.r = self.redis.client()
        extra = ""
        if config and "[[gearmonkey]]" in config:
            config = config.replace("{url}", self.redis.url)
        else:
            extra += " --gearmonkey %s" % shlex.quote(self.redis.url)
        if config:
            path = self.path("policy.toml")
            with open(path, "w") as f:
                f.write(config)
            extra += " --config %s" % shlex.quote(path)
        for m in match:
            extra += " --gearmonkey-match %s" % shlex.quote(m)
        if tls:
            extra += " --gearmonkey-ca %s" % shlex.quote(self.redis.ca)
        store = ("--store log --data-dir %s" % shlex.quote(self.path("data"))) if durable \
            else "--store memory"
        self.template = ("%s serve -L 127.0.0.1 -p {port} --http 127.0.0.1:0 %s "
                         "--verbose INFO%s" % (shlex.quote(GEARSHIFT), store, extra))
        self.start_server()

    def start_server(self):
        self.server = h.Server(self.template, "gearshift-gm").start()
        self.port = self.server.port

    def close(self):
        try:
            super().close()
        finally:
            self.redis.stop()

    def http(self, path, timeout=10):
        """An open response of the server's HTTP listener (its port from its log)."""
        m = re.search(r"http listening on (127\.0\.0\.1:\d+)", self.server.log_text())
        check(m is not None, "no http address in the log")
        return urllib.request.urlopen("http://%s%s" % (m.group(1), path), timeout=timeout)

    def metrics(self):
        """The server's /metrics text."""
        with self.http("/metrics") as resp:
            return resp.read().decode()

    def diagnostics(self):
        out = super().diagnostics()
        try:
            with open(os.path.join(self.redis.dir, "redis.log")) as f:
                out += "\n  [redis log] %r" % f.read()[-400:]
        except OSError:
            pass
        return out

    # Gearman side
    def php_worker(self, mode, func, gate=""):
        return self.spawn(PHP + [os.path.join(CLIENTS, "worker.php"), str(self.port), mode,
                                 func, "0", self.path("php-%s.log" % func), gate],
                          "php-worker-%s-%s" % (mode, func))

    def perl_worker(self, mode, func):
        return self.spawn(PERL + [os.path.join(CLIENTS, "worker.pl"), str(self.port), mode,
                                  func, "0", ""], "perl-worker-%s-%s" % (mode, func))

    def cli_worker(self, func, *cmd):
        return self.spawn(["gearman", "-w", "-h", h.HOST, "-p", str(self.port), "-f", func,
                           "--"] + list(cmd), "gearman-worker-" + func)

    def php_client(self, *args, timeout=30):
        r = h.run(PHP + [os.path.join(CLIENTS, "client.php"), str(self.port)] + list(args),
                  timeout=timeout)
        check(r.returncode == 0, "client.php %s exited %d: %s %s"
              % (" ".join(args), r.returncode, r.stdout, r.stderr))
        return r.stdout

    def perl_client(self, *args, timeout=30):
        r = h.run(PERL + [os.path.join(CLIENTS, "client.pl"), str(self.port)] + list(args),
                  timeout=timeout)
        check(r.returncode == 0, "client.pl %s exited %d: %s %s"
              % (" ".join(args), r.returncode, r.stdout, r.stderr))
        return r.stdout

    def cli_client(self, func, *args, timeout=30):
        r = h.run(["gearman", "-h", h.HOST, "-p", str(self.port), "-f", func] + list(args),
                  timeout=timeout)
        check(r.returncode == 0, "gearman exited %d: %r %r" % (r.returncode, r.stdout, r.stderr))
        return r.stdout

    # GearMonkey side
    def gm_worker(self, func, mode, log=None):
        argv = GM + [self.redis.py_url, "worker", func, mode]
        if log:
            argv += ["--log", log]
        return self.spawn(argv, "gm-worker-%s-%s" % (mode, func))

    def gm(self):
        return gm.Client(self.r)

    def wait_job(self, func, jid, timeout=20, want=(b"success", b"error")):
        """The job hash once its status is one of `want`."""
        key = "job:%s:%d" % (func, jid)
        got = {}

        def done():
            got.update(self.r.hgetall(key))
            return got.get(b"status") in want
        h.wait_for(done, timeout, "%s status in %r (now %r)" % (key, want, got))
        return got


def wait_count(ctx, func, n, timeout=10):
    h.wait_for(lambda: int(ctx.r.get("count:%s" % func) or 0) == n, timeout,
               "count:%s == %d (now %r)" % (func, n, ctx.r.get("count:%s" % func)))


def wrap(fn, **kw):
    """fn(ctx) as a suite test in a fresh Ctx made with **kw."""
    return h.with_ctx(fn, ctx_class=Ctx, **kw)
