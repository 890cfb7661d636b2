"""Plumbing of the etcd bridge suite (test_etcd.py) and perf/etcd_bench.py:
an etcd of the test's own (Debian's etcd-server on free ports of 127.0.0.1,
a temp data dir; stopped, restarted on the same data, or killed), and a
per-test context with one or more `gearshift serve --etcd ...` nodes on
port 0, helpers for the Gearman side (PHP, Perl and CLI workers) and for the
etcd side (etcdqueue.py's submitter, worker and harvester).
"""

import json
import os
import re
import shlex
import shutil
import signal
import ssl
import subprocess
import sys
import time
import urllib.error
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(ROOT, "tests", "interop"))
sys.path.insert(0, HERE)

import harness as h  # noqa: E402
from harness import check  # noqa: E402

import etcdqueue as eq  # noqa: E402

GEARSHIFT = os.environ.get("GEARSHIFT") or os.path.join(ROOT, "target", "debug", "gearshift")
ETCD = os.environ.get("ETCD") or "etcd"
CLIENTS = os.path.join(ROOT, "tests", "interop", "clients")
PHP = ["php", "-d", "display_errors=stderr"]
PERL = ["perl"]
EQ = [sys.executable, os.path.join(HERE, "etcdqueue.py")]


def make_certs(d):
    """A throwaway CA in d, a server certificate for 127.0.0.1 and a client
    certificate signed by it: ca.pem, server.pem/.key, client.pem/.key."""
    ext = os.path.join(d, "ext")
    with open(ext, "w") as f:
        f.write("subjectAltName=IP:127.0.0.1\nextendedKeyUsage=serverAuth,clientAuth\n")
    steps = [["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2",
              "-keyout", "ca.key", "-out", "ca.pem", "-subj", "/CN=etcd-test-ca"]]
    for who in ("server", "client"):
        steps += [["openssl", "req", "-newkey", "rsa:2048", "-nodes", "-keyout", who + ".key",
                   "-out", who + ".csr", "-subj", "/CN=" + who],
                  ["openssl", "x509", "-req", "-in", who + ".csr", "-CA", "ca.pem", "-CAkey",
                   "ca.key", "-CAcreateserial", "-out", who + ".pem", "-days", "2",
                   "-extfile", ext]]
    for argv in steps:
        r = subprocess.run(argv, cwd=d, capture_output=True, text=True, timeout=30)
        check(r.returncode == 0, "%s: %s" % (" ".join(argv), r.stderr))


class Etcd:
    """A single-member etcd of the test's own; restartable on its ports and
    data. tls: https with a throwaway CA, and client certificates required;
    password: auth enabled, user root."""

    def __init__(self, tmp, name="etcd", tls=False, password=None):
        self.dir = os.path.join(tmp, name)
        os.makedirs(self.dir)
        self.name = name
        self.port, self.peer_port, self.metrics_port = h.free_port(), h.free_port(), h.free_port()
        self.proc = None
        self.log_path = os.path.join(self.dir, "etcd.log")
        self.tls, self.password = tls, password
        self.user = "root" if password else None
        if tls:
            make_certs(self.dir)
        for attempt in range(3):
            try:
                self.start()
                break
            except h.TestFailure:
                # A free port taken by someone else meanwhile: fresh ports and data.
                if attempt == 2 or "address already in use" not in self.log_tail(4000):
                    raise
                shutil.rmtree(os.path.join(self.dir, "data"), ignore_errors=True)
                self.port, self.peer_port = h.free_port(), h.free_port()
                self.metrics_port = h.free_port()
        if password:
            tls_args = ["--cacert", self.ca, "--cert", self.cert, "--key", self.key] if tls else []
            for cmd in (["user", "add", "root", "--new-user-password=" + password],
                        ["auth", "enable"]):
                r = h.run(["etcdctl", "--endpoints", self.url] + tls_args + cmd, timeout=20)
                check(r.returncode == 0, "etcdctl %s: %s %s" % (cmd, r.stdout, r.stderr))

    def file(self, name):
        return os.path.join(self.dir, name) if self.tls else None

    ca = property(lambda self: self.file("ca.pem"))
    cert = property(lambda self: self.file("client.pem"))
    key = property(lambda self: self.file("client.key"))

    @property
    def url(self):
        return "%s://127.0.0.1:%d" % ("https" if self.tls else "http", self.port)

    def _healthy(self):
        ctx = None
        if self.tls:
            ctx = ssl.create_default_context(cafile=self.ca)
            ctx.load_cert_chain(self.cert, self.key)
        try:
            with urllib.request.urlopen(self.url + "/health", timeout=1, context=ctx) as r:
                return b'"true"' in r.read()
        except urllib.error.HTTPError as e:
            # With auth on, /health may answer 503 for want of a token: it is up.
            return e.code in (401, 503) and self.password is not None
        except OSError:
            return False

    def start(self, timeout=15):
        self.launch()
        return self.wait_healthy(timeout)

    def launch(self):
        peer = "http://127.0.0.1:%d" % self.peer_port
        cluster = getattr(self, "cluster_args", None) or [
            "--initial-cluster", "%s=%s" % (self.name, peer)]
        argv = [ETCD, "--name", self.name, "--data-dir", os.path.join(self.dir, "data"),
                "--listen-client-urls", self.url, "--advertise-client-urls", self.url,
                "--listen-peer-urls", peer, "--initial-advertise-peer-urls", peer,
                "--listen-metrics-urls", "http://127.0.0.1:%d" % self.metrics_port,
                # Quick elections (a lone member's, or a cluster's on loopback).
                "--heartbeat-interval", "50", "--election-timeout", "300",
                "--logger", "zap", "--log-outputs", "stderr"] + cluster
        if self.tls:
            argv += ["--cert-file", os.path.join(self.dir, "server.pem"),
                     "--key-file", os.path.join(self.dir, "server.key"),
                     "--trusted-ca-file", self.ca, "--client-cert-auth"]
        with open(self.log_path, "ab") as log:
            self.proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=log,
                                         stderr=subprocess.STDOUT, start_new_session=True)
        return self.proc

    def wait_healthy(self, timeout=15):
        deadline = time.monotonic() + timeout
        while True:
            if self._healthy():
                return self
            check(self.proc.poll() is None, "etcd exited %s: %s"
                  % (self.proc.returncode, self.log_tail()))
            check(time.monotonic() < deadline, "etcd not healthy within %d s" % timeout)
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

    def kill(self):
        self.stop(signal.SIGKILL)

    def restart(self):
        self.stop()
        self.start()

    def log_tail(self, n=600):
        try:
            with open(self.log_path, "rb") as f:
                return f.read().decode("utf-8", "replace")[-n:]
        except OSError:
            return ""

    def client(self, timeout=5.0):
        return eq.Etcd(self.url, timeout, self.user, self.password, self.ca, self.cert, self.key)

    def queue_args(self):
        """etcdqueue.py's connection options (the password goes in its env)."""
        out = ["--user", self.user] if self.user else []
        if self.tls:
            out += ["--ca", self.ca, "--cert", self.cert, "--key", self.key]
        return out

    def gearshift_args(self):
        """gearshift serve's options for this etcd (the password goes in its env)."""
        out = ["--etcd-user", self.user] if self.user else []
        if self.tls:
            out += ["--etcd-ca", self.ca, "--etcd-cert", self.cert, "--etcd-key", self.key]
        return out

    def metrics(self):
        with urllib.request.urlopen("http://127.0.0.1:%d/metrics" % self.metrics_port,
                                    timeout=5) as r:
            return r.read().decode()

    def requests(self):
        """{method: count} of the gRPC messages etcd received (unary calls,
        and each message of a stream: watch creations, lease keep-alives)."""
        out = {}
        for line in self.metrics().splitlines():
            if line.startswith("grpc_server_msg_received_total{"):
                m = re.search(r'grpc_method="([^"]+)"', line)
                v = float(line.rsplit(" ", 1)[1])
                if m and v:
                    out[m.group(1)] = out.get(m.group(1), 0) + int(v)
        return out


class EtcdCluster:
    """A 3-member (or `n`) etcd cluster of the test's own, on free ports of
    127.0.0.1 (peer and client URLs): `url` lists every member (for
    `--etcd`), `client()` speaks to the first; `leader()` and
    `move_leader()` through etcdctl; `stop()` and `start()` all members."""

    def __init__(self, tmp, n=3):
        token = "gearshift-test-%d-%d" % (os.getpid(), h.free_port())
        self.members = [Etcd.__new__(Etcd) for _ in range(n)]
        for i, m in enumerate(self.members):
            m.name, m.dir = "m%d" % i, os.path.join(tmp, "etcd-m%d" % i)
            os.makedirs(m.dir)
            m.port, m.peer_port, m.metrics_port = h.free_port(), h.free_port(), h.free_port()
            m.proc, m.log_path = None, os.path.join(m.dir, "etcd.log")
            m.tls, m.password, m.user = False, None, None
        initial = ",".join("%s=http://127.0.0.1:%d" % (m.name, m.peer_port)
                           for m in self.members)
        for m in self.members:
            m.cluster_args = ["--initial-cluster", initial, "--initial-cluster-token", token,
                              "--initial-cluster-state", "new"]
        self.tls, self.password, self.user = False, None, None
        self.start()

    @property
    def url(self):
        return ",".join(m.url for m in self.members)

    def start(self, timeout=20):
        # Members wait for a quorum: start them all, then wait for each.
        procs = [m.launch() for m in self.members]
        for m, _ in zip(self.members, procs):
            m.wait_healthy(timeout)
        return self

    def stop(self):
        for m in self.members:
            m.stop()

    def client(self, timeout=5.0):
        return self.members[0].client(timeout)

    def gearshift_args(self):
        return []

    def queue_args(self):
        return []

    def log_tail(self, n=600):
        return " | ".join("%s: %s" % (m.name, m.log_tail(n // len(self.members)))
                          for m in self.members)

    def status(self):
        """[(member, its id in hex, is leader)] from `etcdctl endpoint status`."""
        r = h.run(["etcdctl", "--endpoints", self.url, "endpoint", "status", "-w", "json"],
                  timeout=10)
        check(r.returncode == 0, "etcdctl endpoint status: %s" % r.stderr)
        out = []
        for m, st in zip(self.members, json.loads(r.stdout)):
            me, leader = st["Status"]["header"]["member_id"], st["Status"]["leader"]
            out.append((m, "%x" % me, me == leader))
        return out

    def leader(self):
        return [(m, mid) for m, mid, lead in self.status() if lead][0]

    def move_leader(self):
        """Moves the leadership to another member; returns (old, new) members."""
        old, _ = self.leader()
        new, new_id = [(m, mid) for m, mid, lead in self.status() if not lead][0]
        r = h.run(["etcdctl", "--endpoints", old.url, "move-leader", new_id], timeout=15)
        check(r.returncode == 0, "etcdctl move-leader: %s %s" % (r.stdout, r.stderr))
        h.wait_for(lambda: self.leader()[0] is new, 10, "%s leads" % new.name)
        return old, new


def gearshift_argv(etcd_urls, prefix="/", layout="single", harvest_after=3, node=None,
                   extra=(), flags=True):
    """A `gearshift serve` bridging to etcd, on a free port and an HTTP port 0
    (flags=False: no --etcd flags, a config file in `extra` gives them)."""
    argv = [GEARSHIFT, "serve", "-L", "127.0.0.1", "-p", "{port}", "--http", "127.0.0.1:0",
            "--store", "memory", "--verbose", "INFO"]
    if flags:
        argv += ["--etcd", etcd_urls, "--etcd-prefix", prefix,
                 "--etcd-harvest-after", str(harvest_after), "--etcd-layout", layout]
    if node:
        argv += ["--node-name", node]
    return argv + list(extra)


class Node:
    """One `gearshift serve --etcd` process (h.Server) and its HTTP address."""

    def __init__(self, argv, label):
        self.server = h.Server(" ".join(shlex.quote(a) for a in argv), label).start()
        self.port = self.server.port

    @property
    def pid(self):
        return self.server.pid

    def http_addr(self, timeout=10):
        m = h.wait_for(lambda: re.search(r"http listening on (127\.0\.0\.1:\d+)",
                                         self.server.log_text()), timeout, "http address in log")
        return m.group(1)

    def http(self, path, timeout=10):
        return urllib.request.urlopen("http://%s%s" % (self.http_addr(), path), timeout=timeout)

    def metrics(self):
        with self.http("/metrics") as r:
            return r.read().decode()

    def etcd_counters(self):
        """{event: n} of gearshift_etcd_total."""
        out = {}
        for line in self.metrics().splitlines():
            m = re.match(r'gearshift_etcd_total\{event="([^"]+)"\} (\d+)', line)
            if m:
                out[m.group(1)] = int(m.group(2))
        return out

    def kill(self):
        os.kill(self.server.pid, signal.SIGKILL)
        self.server.proc.wait(timeout=5)

    def stop(self):
        self.server.stop()


class Ctx(h.Ctx):
    """A fresh etcd and `nodes` Gearshift nodes bridging to it (0: none).
    config: a config file's text, `{url}` in it replaced by etcd's URL; one
    with an `[etcd]` table replaces the --etcd flags."""

    def __init__(self, name, nodes=1, prefix="/", layout="single", harvest_after=3,
                 extra=(), config=None, tls=False, password=None, members=1):
        super().__init__(name, with_server=False)
        if members > 1:
            self.etcd = EtcdCluster(self.tmp, members)
        else:
            self.etcd = Etcd(self.tmp, tls=tls, password=password)
        self.prefix, self.layout, self.harvest_after = prefix, layout, harvest_after
        self.extra = list(extra)
        self.flags = not (config and "[etcd]" in config)
        if config is not None:
            path = self.path("gearshift.toml")
            with open(path, "w") as f:
                f.write(config.replace("{url}", self.etcd.url))
            self.extra += ["--config", path]
        self.e = self.etcd.client()
        self.q = eq.Queue(self.e, prefix, layout)
        self.nodes = []
        for i in range(nodes):
            self.start_node()
        self.port = self.nodes[0].port if self.nodes else None

    def start_node(self, name=None):
        name = name or "node%d" % len(self.nodes)
        extra = self.extra + (self.etcd.gearshift_args() if self.flags else [])
        # The password through the environment, as an operator keeps it out of argv.
        if self.etcd.password:
            os.environ["GEARSHIFT_ETCD_PASSWORD"] = self.etcd.password
        try:
            node = Node(gearshift_argv(self.etcd.url, self.prefix, self.layout,
                                       self.harvest_after, name, extra, self.flags),
                        "gearshift-" + name)
        finally:
            os.environ.pop("GEARSHIFT_ETCD_PASSWORD", None)
        self.nodes.append(node)
        return node

    def close(self):
        keep = os.environ.get("ETCD_TEST_LOGS")  # a directory to keep the nodes' logs in
        try:
            for i, n in enumerate(self.nodes):
                if keep:
                    with open(os.path.join(keep, "%s-node%d.log" % (self.name, i)), "w") as f:
                        f.write(n.server.log_text())
                n.stop()
            super().close()
        finally:
            self.etcd.stop()

    def diagnostics(self):
        out = [super().diagnostics()]
        for i, n in enumerate(self.nodes):
            out.append("  [gearshift node%d log] %r" % (i, n.server.log_text()[-1500:]))
        out.append("  [etcd log] %r" % self.etcd.log_tail(400))
        return "\n".join(out)

    # Gearman side (tests/interop/clients)
    def php_worker(self, mode, func, log="", gate="", port=None):
        return self.spawn(PHP + [os.path.join(CLIENTS, "worker.php"), str(port or self.port),
                                 mode, func, "0", log, gate], "php-worker-%s-%s" % (mode, func))

    def perl_worker(self, mode, func, log="", port=None):
        return self.spawn(PERL + [os.path.join(CLIENTS, "worker.pl"), str(port or self.port),
                                  mode, func, "0", log], "perl-worker-%s-%s" % (mode, func))

    def cli_worker(self, func, shell, port=None, name=None):
        """`gearman -w` running `sh -c SHELL` per job (workload on its stdin)."""
        return self.spawn(["gearman", "-w", "-h", h.HOST, "-p", str(port or self.port),
                           "-f", func, "--", "sh", "-c", shell], name or "gearman-worker-" + func)

    # etcd side (etcdqueue.py)
    def native_worker(self, name, mode, log=None, harvest=True, harvest_after=None):
        argv = EQ + [self.etcd.url, "--prefix", self.prefix, "--layout", self.layout]
        argv += self.etcd.queue_args() + ["worker", name, mode, "--harvest-after",
                                          str(harvest_after or self.harvest_after)]
        if log:
            argv += ["--log", log]
        if not harvest:
            argv.append("--no-harvest")
        env = dict(os.environ, ETCDQUEUE_PASSWORD=self.etcd.password or "")
        return self.spawn(argv, "native-" + name, env=env)

    def submit(self, config="", function=None, extra=None):
        return self.q.submit(config, function, extra)

    def wait_state(self, jid, states=("FINISHED",), timeout=20):
        """The job's document once its last state is one of `states`."""
        deadline = time.monotonic() + timeout
        while True:
            try:
                _, doc = self.q.job(jid)
            except eq.EtcdError:
                doc = None
            if eq.last_state(doc) in states:
                return doc
            check(time.monotonic() < deadline, "job %s not in %r within %.0f s (now %s)"
                  % (jid, states, timeout, str(doc)[-400:]))
            time.sleep(0.03)

    def workers(self):
        """{key name: document} of the registry."""
        return {kv.key.rsplit("/", 1)[-1]: kv.json() for kv in self.q.workers()}


def run_counts(path):
    """{job id: runs} from the log lines "run <id> ..." of a native worker's
    --log, or the JSON workloads a Gearman worker recorded one a line (the id
    then is the document's Container.Config)."""
    out = {}
    if not os.path.exists(path):
        return out
    with open(path) as f:
        for line in f:
            line = line.strip()
            if line.startswith("run "):
                key = line.split()[1]
            elif line.startswith("{"):
                try:
                    key = str(eq.json.loads(line)["Container"]["Config"])
                except (ValueError, KeyError, TypeError):
                    continue
            else:
                continue
            out[key] = out.get(key, 0) + 1
    return out


def wrap(fn, **kw):
    """fn(ctx) as a suite test in a fresh Ctx made with **kw."""
    return h.with_ctx(fn, ctx_class=Ctx, **kw)
