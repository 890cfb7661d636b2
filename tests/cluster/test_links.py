#!/usr/bin/env python3
"""The cluster suite's tests of links and TLS: how relaying nodes carry
their clients' connections to the leader (one link each, bounded memory,
one client's flood closing that client alone) and TLS listeners on every
node. Run by test_cluster.py, whose cluster helpers they use.
"""

import os
import re
import shutil
import signal
import socket
import sys
import tempfile
import time
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(ROOT, "tests", "interop"))
sys.path.insert(0, os.path.join(ROOT, "tests", "tls"))

import harness as h  # noqa: E402
from harness import check, check_eq  # noqa: E402
import test_tls  # noqa: E402
from test_cluster import grab, http_get, raw_worker, with_cluster  # noqa: E402


def metric(port, name):
    with urllib.request.urlopen("http://127.0.0.1:%d/metrics" % port, timeout=10) as r:
        for line in r.read().decode().splitlines():
            if line.startswith(name + " "):
                return float(line.split()[1])
    return None


@with_cluster
def test_followers_carry_connections_over_links(cl):
    """A follower carries all its Gearman connections to the leader over one
    link; a client of it that never reads is closed alone."""
    limits = "--max-output 64K --max-packet-size 1M"
    a = cl.start("a", wait_leader=True, extra=limits)
    b = cl.start("b", extra=limits)
    c = cl.start("c", extra=limits)
    conns = [h.Conn(n.port) for n in (b, c) for _ in range(25)]
    for i, conn in enumerate(conns):
        conn.send_pkt(h.ECHO_REQ, "hi%d" % i)
    for i, conn in enumerate(conns):
        check_eq(conn.expect_pkt(h.ECHO_RES), b"hi%d" % i, "echo through a follower")
    port = cl.http_port("a")
    check_eq(metric(port, "gearshift_cluster_links_opened_total"), 2.0,
             "links opened to the leader by two followers")
    check(metric(port, "gearshift_cluster_linked_connections_total") >= 50,
          "connections carried over the links")
    for conn in conns:
        conn.close()
    # A foreground client on b that never reads, fed by a worker on the leader.
    w = raw_worker(a.port, "flood")
    w.send_pkt(h.PRE_SLEEP)
    hog = h.Conn(b.port)
    hog.send_pkt(h.SUBMIT_JOB, "flood", "", "x")
    w.expect_pkt(h.NOOP, timeout=10)
    job = grab(w)
    check(job is not None, "the worker got the flood job")
    chunk = "z" * (512 * 1024)
    for _ in range(16):
        w.send_pkt(h.WORK_DATA, job[0], chunk)
    w.send_pkt(h.WORK_COMPLETE, job[0], "")
    # Another client of b is served meanwhile.
    other = h.Conn(b.port)
    other.send_pkt(h.ECHO_REQ, "still here")
    check_eq(other.expect_pkt(h.ECHO_RES, timeout=10), b"still here", "another client of b")
    got = h.bytes_until_closed(hog.sock, 15)
    check(got < 16 * 512 * 1024, "the closed client got only part of the flood (%d bytes)" % got)
    other.send_pkt(h.ECHO_REQ, "and after")
    check_eq(other.expect_pkt(h.ECHO_RES, timeout=10), b"and after", "b after closing the hog")
    w.close()
    other.close()


def rss_kib(pid):
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


@with_cluster
def test_a_follower_holds_little_for_a_stopped_leader(cl):
    """A client pipelining into a follower while the leader reads nothing is
    held back once the link's queue is full: the follower's memory stays
    bounded, and every request is answered once the leader runs again."""
    cl.timeout_ms = 5000  # the leader is stopped for a second, not deposed
    a = cl.start("a", wait_leader=True)
    b = cl.start("b")
    linked = h.Conn(b.port)
    linked.echo_sync()
    linked.close()
    chunk = memoryview(h.packet(h.SUBMIT_JOB, "slow", "", "p" * 1000) * 1000)  # ~1 MB
    client = h.Conn(b.port)
    client.sock.settimeout(0.2)
    base = rss_kib(b.pid)
    cl.kill("a", signal.SIGSTOP)
    sent, off, peak = 0, 0, base
    until = time.time() + 1.5
    try:
        while time.time() < until:
            try:
                n = client.sock.send(chunk[off:])
                sent += n
                off = (off + n) % len(chunk)
            except socket.timeout:
                pass
            peak = max(peak, rss_kib(b.pid))
    finally:
        os.kill(a.pid, signal.SIGCONT)
    check(sent >= 4 * len(chunk), "the client sent little before blocking (%d bytes)" % sent)
    check(peak - base < 64 * 1024,
          "b grew by %d KiB while the leader was stopped (%d bytes sent)" % (peak - base, sent))
    client.sock.settimeout(30)
    # Every job the follower took reaches the leader and is answered.
    w = raw_worker(a.port, "slow")
    check(grab(w, timeout=30) is not None, "a job after the leader woke")
    w.close()
    client.close()


def tls_port(node):
    found = []

    def seen():
        m = re.search(r"listening on 127\.0\.0\.1:(\d+) \(TLS\)", node.log_text())
        if m:
            found.append(int(m.group(1)))
        return bool(m)

    h.wait_for(seen, 10, "the TLS port in the node's log")
    return found[0]


@with_cluster
def test_tls_listeners_on_every_node(cl):
    """A TLS client of a follower is carried to the leader with its
    certificate's subject; a TLS client of the leader is served there; a
    plaintext client of a TLS port gets no session; node links use the
    plaintext ports."""
    tmp = tempfile.mkdtemp(prefix="gs-cluster-tls-")
    try:
        pki = test_tls.Pki(tmp)
        flags = test_tls.tls_flags(pki, "--ssl-ca-file %s" % pki.ca)
        a = cl.start("a", wait_leader=True, extra=flags)
        b = cl.start("b", extra=flags)
        cert = pki.issue("w1", "/O=Acme/CN=worker-on-b")
        worker = test_tls.Tls(tls_port(b), pki.ca, cert=cert)
        client = test_tls.Tls(tls_port(a), pki.ca)
        test_tls.job_round(client, worker)
        workers = h.admin(a.port, "workers")
        check(re.search(r"^\d+ 127\.0\.0\.1 O=Acme,CN=worker-on-b : rev$", workers, re.M),
              "workers on the leader: %r" % workers)
        # Bytes that are not TLS on a follower's TLS port: no session, and
        # the node goes on.
        raw = h.Conn(tls_port(b))
        try:
            raw.send_pkt(h.ECHO_REQ, "plain")
            raw.read_pkt(timeout=5)
            raise h.TestFailure("a plaintext client was answered on a TLS port")
        except (h.TestFailure, ConnectionResetError) as e:
            if "was answered" in str(e):
                raise
        raw.close()
        test_tls.job_round(test_tls.Tls(tls_port(b), pki.ca), worker, func=b"again")
        worker.close()
        client.close()
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


@with_cluster
def test_gearmand_style_ssl_cluster(cl):
    """With `--ssl` every port speaks TLS: nodes still link to the leader
    (in plaintext, on its TLS port) and TLS clients of both nodes meet."""
    tmp = tempfile.mkdtemp(prefix="gs-cluster-ssl-")
    try:
        pki = test_tls.Pki(tmp)
        cert, key = pki.server
        flags = "--ssl --ssl-certificate %s --ssl-key %s" % (cert, key)
        a = cl.start("a", wait_leader=True, extra=flags)
        b = cl.start("b", extra=flags)
        worker = test_tls.Tls(b.port, pki.ca)
        client = test_tls.Tls(a.port, pki.ca)
        test_tls.job_round(client, worker)
        worker.close()
        client.close()
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


@with_cluster
def test_tls_on_partitioned_nodes(cl):
    """Partitioned nodes with TLS listeners: a TLS worker of `b` takes the
    job a TLS client of `a` submitted to a function `c` owns, and `c` knows
    the worker by its certificate's subject; with `--ssl` (every port TLS)
    nodes still link to each other, in plaintext."""
    from test_partitions import functions_on, shared_by  # noqa: E402
    tmp = tempfile.mkdtemp(prefix="gs-partitions-tls-")
    try:
        pki = test_tls.Pki(tmp)
        flags = "--partitioned " + test_tls.tls_flags(pki, "--ssl-ca-file %s" % pki.ca)
        for n in "abc":
            cl.start(n, extra=flags)
        shared_by(cl, ["a", "b", "c"])
        func = functions_on(cl, 1, prefix="tls")["c"][0].encode()
        cert = pki.issue("w1", "/O=Acme/CN=worker-on-b")
        worker = test_tls.Tls(tls_port(cl.nodes["b"]), pki.ca, cert=cert)
        client = test_tls.Tls(tls_port(cl.nodes["a"]), pki.ca)
        test_tls.job_round(client, worker, func=func)
        workers = h.admin(cl.nodes["c"].port, "workers")
        check(re.search(r"^\d+ 127\.0\.0\.1 O=Acme,CN=worker-on-b : %s$" % func.decode(),
                        workers, re.M), "workers on the owner: %r" % workers)
        worker.close()
        client.close()
        # A failed handshake on a's TLS port is counted in /metrics.
        name = "gearshift_tls_handshake_failures_total"
        check_eq(metric(cl.http_port("a"), name), 0.0, "handshake failures before")
        with socket.create_connection(("127.0.0.1", tls_port(cl.nodes["a"])), timeout=5) as s:
            s.sendall(b"\0REQ\0\0\0\x10\0\0\0\0")
            got = b"".join(iter(lambda: s.recv(100), b""))
            check(got == b"" or got.startswith(b"\x15\x03"),
                  "a plaintext packet on the TLS port gets at most an alert: %r" % got)
        h.wait_for(lambda: metric(cl.http_port("a"), name) == 1.0, 10,
                   "a's /metrics to count the failed handshake")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    for n in list(cl.nodes):
        cl.nodes[n].stop()
        del cl.nodes[n]
    tmp = tempfile.mkdtemp(prefix="gs-partitions-ssl-")
    try:
        pki = test_tls.Pki(tmp)
        cert, key = pki.server
        for n in "de":
            cl.start(n, extra="--partitioned --ssl --ssl-certificate %s --ssl-key %s"
                     % (cert, key))
        shared_by(cl, ["d", "e"])
        func = functions_on(cl, 1, prefix="ssl")["e"][0].encode()
        worker = test_tls.Tls(cl.nodes["e"].port, pki.ca)
        client = test_tls.Tls(cl.nodes["d"].port, pki.ca)
        test_tls.job_round(client, worker, func=func)
        worker.close()
        client.close()
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def link_tls_flags(pki, name="node"):
    """A node certificate (server and client use, for 127.0.0.1) and the
    flags that make nodes talk over TLS with it."""
    pki.write("node.ext", "subjectAltName=IP:127.0.0.1\n"
              "extendedKeyUsage=serverAuth,clientAuth\n")
    cert, key = pki.issue(name, "/CN=gearshift-node", "node.ext")
    return "--link-tls-certificate %s --link-tls-key %s --link-tls-ca %s" % (cert, key, pki.ca)


def refused_in_the_clear(cl, node, line):
    """Sends a node's preamble in the clear to `node`: it closes the
    connection unanswered and logs why."""
    raw = socket.create_connection(("127.0.0.1", node.port), timeout=10)
    raw.sendall(line + h.packet(h.ECHO_REQ, "x"))
    try:
        check_eq(raw.recv(1024), b"", "a preamble in the clear is not answered")
    except ConnectionResetError:
        pass
    raw.close()
    h.wait_for(lambda: "takes nodes over TLS only" in node.log_text(), 10,
               "the refusal in the node's log")


def job_across(cl, func, at, by):
    """A foreground job of `func` submitted on node `at` reaches a worker on
    node `by`, and its result comes back to the client."""
    w = raw_worker(cl.nodes[by].port, func)
    client = h.Conn(cl.nodes[at].port)
    client.send_pkt(h.SUBMIT_JOB, func, "", "ping")
    handle = client.expect_pkt(h.JOB_CREATED)
    job = grab(w)
    check(job is not None and job[0] == handle, "%s's worker got %s's job of %s" % (by, at, func))
    w.send_pkt(h.WORK_COMPLETE, handle, "pong")
    check_eq(client.expect_pkt(h.WORK_COMPLETE), handle + b"\0pong", "the result on %s" % at)
    w.close()
    client.close()


@with_cluster
def test_nodes_talk_over_tls(cl):
    """With --link-tls-*, links and relays between nodes run in TLS with
    certificates the cluster's CA signed: a job crosses a leader-mode
    cluster from a client of one follower to a worker of the other (both
    links), the leader's HTTP API answers through a follower (a relay),
    and a link preamble sent in the clear, secret and all, is refused."""
    tmp = tempfile.mkdtemp(prefix="gs-cluster-link-tls-")
    try:
        pki = test_tls.Pki(tmp)
        flags = link_tls_flags(pki)
        a = cl.start("a", wait_leader=True, extra=flags)
        b = cl.start("b", extra=flags)
        c = cl.start("c", extra=flags)
        w = raw_worker(b.port, "over_tls")
        client = h.Conn(c.port)
        client.send_pkt(h.SUBMIT_JOB, "over_tls", "", "ping")
        handle = client.expect_pkt(h.JOB_CREATED)
        job = grab(w)
        check(job is not None and job[0] == handle, "the worker on b got c's job: %r" % (job,))
        w.send_pkt(h.WORK_COMPLETE, handle, "pong")
        check_eq(client.expect_pkt(h.WORK_COMPLETE), handle + b"\0pong", "the result on c")
        # Megabytes each way through both TLS links, past the sockets' buffers.
        big = os.urandom(3 << 20)
        client.send_pkt(h.SUBMIT_JOB, "over_tls", "", big)
        handle = client.expect_pkt(h.JOB_CREATED, timeout=20)
        w.send_pkt(h.GRAB_JOB)
        _, t, body = w.read_pkt(timeout=20)
        check(t == h.JOB_ASSIGN and body.endswith(b"\0" + big), "the big job on b")
        w.send_pkt(h.WORK_COMPLETE, handle, big[::-1])
        check(client.expect_pkt(h.WORK_COMPLETE, timeout=20) == handle + b"\0" + big[::-1],
              "the big result on c")
        w.close()
        client.close()
        check_eq(metric(cl.http_port("a"), "gearshift_cluster_links_opened_total"), 2.0,
                 "two links to the leader")
        # b's HTTP port relays to the leader's, whose API lists the job's function.
        with urllib.request.urlopen("http://%s/api/v1/functions"
                                    % cl.pg.sql("SELECT http_addr FROM gearshift_nodes "
                                                "WHERE name = 'b'")[0][0], timeout=10) as r:
            names = [f["name"] for f in __import__("json").loads(r.read())["functions"]]
        check("over_tls" in names, "the leader's functions through b: %r" % names)
        secret = cl.pg.sql("SELECT secret FROM gearshift_cluster")[0][0]
        refused_in_the_clear(cl, a, ("gearshift-link %s intruder\n" % secret).encode())
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


@with_cluster
def test_partitioned_nodes_talk_over_tls(cl):
    """Partitioned nodes with --link-tls-*: a client of `d` and a worker of
    `e` meet at `f`, the function's owner, over TLS links; d's JSON API
    asks e and f for their parts over node TLS; `f` refuses a link in the
    clear."""
    from test_partitions import functions_on, shared_by  # noqa: E402
    tmp = tempfile.mkdtemp(prefix="gs-partitions-link-tls-")
    try:
        pki = test_tls.Pki(tmp)
        flags = link_tls_flags(pki)
        for n in "def":
            cl.start(n, extra="--partitioned " + flags)
        shared_by(cl, ["d", "e", "f"])
        func = functions_on(cl, 1, prefix="ptls")["f"][0]
        job_across(cl, func, "d", "e")
        # d's JSON API asks e and f for their parts over node TLS.
        got = http_get(cl.http_port("d"), "/api/v1/functions")
        check_eq(got["unreachable"], [], "every node answered d's call")
        check(func in [f["name"] for f in got["functions"]], "f's function through d: %r" % got)
        for n in "ef":
            h.wait_for(lambda: "HTTP from another node over node TLS" in cl.nodes[n].log_text(),
                       10, "node %s took d's call over node TLS" % n)
        secret = cl.pg.sql("SELECT secret FROM gearshift_cluster")[0][0]
        refused_in_the_clear(cl, cl.nodes["f"], ("gearshift-link %s intruder\n" % secret).encode())
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


@with_cluster
def test_node_tls_turned_on_one_node_at_a_time(cl):
    """Halfway through turning node TLS on: `d` has no node TLS, `e` and `f`
    have it with --link-tls-allow-clear. Jobs owned by each node cross
    links both ways: e and f link to d in the clear once d refuses TLS
    (and say so), d's clear links are taken, e and f talk TLS to each
    other; the JSON API of each node still answers for all three."""
    from test_partitions import functions_on, shared_by  # noqa: E402
    tmp = tempfile.mkdtemp(prefix="gs-partitions-link-tls-half-")
    try:
        pki = test_tls.Pki(tmp)
        flags = link_tls_flags(pki) + " --link-tls-allow-clear"
        cl.start("d", extra="--partitioned")
        for n in "ef":
            cl.start(n, extra="--partitioned " + flags)
        shared_by(cl, ["d", "e", "f"])
        funcs = functions_on(cl, 1, prefix="half")
        # (owner, client's node, worker's node): every link, both ways.
        for owner, at, by in [("d", "e", "f"), ("e", "f", "d"), ("f", "d", "e")]:
            job_across(cl, funcs[owner][0], at, by)

        def fell_back(n, to):
            addr = "127.0.0.1:%d" % cl.nodes[to].port
            return [line for line in cl.nodes[n].log_text().splitlines()
                    if "refused TLS" in line and addr in line]
        for n in "ef":
            h.wait_for(lambda: fell_back(n, "d"), 10, "%s linked to d in the clear" % n)
        check_eq(fell_back("e", "f") + fell_back("f", "e"), [], "e and f link in TLS")
        for n in "def":
            got = http_get(cl.http_port(n), "/api/v1/functions")
            check_eq(got["unreachable"], [], "every node answered %s's call" % n)
            names = [f["name"] for f in got["functions"]]
            check(all(funcs[o][0] in names for o in "def"), "all functions through %s" % n)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


@with_cluster
def test_node_tls_certificates_reload_on_sighup(cl):
    """A node's renewed link certificate, written over its files, is read
    at SIGHUP; a node that joins afterwards links with it both ways and a
    job crosses; a key that does not load on a later SIGHUP is refused and
    the renewed one kept."""
    from test_partitions import functions_on, shared_by  # noqa: E402
    tmp = tempfile.mkdtemp(prefix="gs-partitions-link-tls-reload-")
    try:
        pki = test_tls.Pki(tmp)
        d = cl.start("d", extra="--partitioned " + link_tls_flags(pki, "node_d"))
        cl.start("e", extra="--partitioned " + link_tls_flags(pki))
        shared_by(cl, ["d", "e"])
        cert, key = pki.path("node_d.pem"), pki.path("node_d.key")
        new_cert, new_key = pki.issue("node_d2", "/CN=gearshift-node-renewed", "node.ext")
        shutil.copyfile(new_cert, cert)
        shutil.copyfile(new_key, key)
        os.kill(d.pid, signal.SIGHUP)
        h.wait_for(lambda: "SIGHUP: node TLS certificate reloaded" in d.log_text(), 10,
                   "d's reload logged")
        cl.start("f", extra="--partitioned " + link_tls_flags(pki))
        shared_by(cl, ["d", "e", "f"])
        job_across(cl, functions_on(cl, 1, prefix="reload")["d"][0], "e", "f")
        with open(key, "w") as f:
            f.write("not a key\n")
        os.kill(d.pid, signal.SIGHUP)
        h.wait_for(lambda: "keeping the node TLS certificate in force" in d.log_text(), 10,
                   "the bad key refused")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


@with_cluster
def test_https_on_every_nodes_http_port(cl):
    """Leader mode with --http-tls on every node: the JSON API answers over
    HTTPS on the leader and through a follower (which ends the session and
    relays what it carries), and the follower answers a plain request with
    nothing."""
    import ssl
    tmp = tempfile.mkdtemp(prefix="gs-cluster-https-")
    try:
        pki = test_tls.Pki(tmp)
        cert, key = pki.server
        flags = "--ssl-certificate %s --ssl-key %s --http-tls" % (cert, key)
        cl.start("a", wait_leader=True, extra=flags)
        cl.start("b", extra=flags)
        ctx = ssl.create_default_context(cafile=pki.ca)
        w = raw_worker(cl.nodes["b"].port, "over_https")
        for n in "ab":
            url = "https://127.0.0.1:%d/api/v1/functions" % cl.http_port(n)
            with urllib.request.urlopen(url, timeout=10, context=ctx) as r:
                names = [f["name"] for f in __import__("json").loads(r.read())["functions"]]
            check("over_https" in names, "the leader's functions over HTTPS via %s: %r" % (n, names))
        w.close()
        try:
            urllib.request.urlopen("http://127.0.0.1:%d/api/v1/functions" % cl.http_port("b"),
                                   timeout=5)
            raise h.TestFailure("a follower answered plain HTTP on an HTTPS-only port")
        except (OSError, __import__("http.client").client.HTTPException):
            pass
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


@with_cluster
def test_https_on_partitioned_nodes(cl):
    """Partitioned nodes with --http-tls and node TLS: each HTTP port serves
    HTTPS to everyone and takes the other nodes' calls in node TLS (told
    apart by ALPN), so d's JSON API over HTTPS lists a function e owns and
    e's log says d called it over node TLS; plain HTTP gets nothing."""
    import ssl
    from test_partitions import functions_on, owners  # noqa: E402
    tmp = tempfile.mkdtemp(prefix="gs-partitions-https-")
    try:
        pki = test_tls.Pki(tmp)
        cert, key = pki.server
        flags = "--partitioned %s --ssl-certificate %s --ssl-key %s --http-tls" % (
            link_tls_flags(pki), cert, key)
        for n in "de":
            cl.start(n, extra=flags)
        ctx = ssl.create_default_context(cafile=pki.ca)

        def https_get(n, path):
            url = "https://127.0.0.1:%d%s" % (cl.http_port(n), path)
            with urllib.request.urlopen(url, timeout=10, context=ctx) as r:
                return __import__("json").loads(r.read())
        # As shared_by, with each node's view read over HTTPS.
        h.wait_for(lambda: sorted(set(owners(cl).values())) == ["d", "e"]
                   and all({p["node"] for p in https_get(n, "/api/v1/cluster")["partitions"]}
                           == {"d", "e"} for n in "de"), 30, "d and e sharing the partitions")
        func = functions_on(cl, 1, prefix="https")["e"][0]
        w = raw_worker(cl.nodes["e"].port, func)
        got = https_get("d", "/api/v1/functions")
        check_eq(got["unreachable"], [], "e answered d's call")
        check(func in [f["name"] for f in got["functions"]], "e's function through d: %r" % got)
        h.wait_for(lambda: "HTTP from another node over node TLS" in cl.nodes["e"].log_text(),
                   10, "e took d's call over node TLS")
        w.close()
        try:
            urllib.request.urlopen("http://127.0.0.1:%d/api/v1/functions" % cl.http_port("d"),
                                   timeout=5)
            raise h.TestFailure("plain HTTP was answered on an HTTPS-only port")
        except (OSError, __import__("http.client").client.HTTPException):
            pass
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


TESTS = [test_followers_carry_connections_over_links,
         test_a_follower_holds_little_for_a_stopped_leader, test_tls_listeners_on_every_node,
         test_gearmand_style_ssl_cluster, test_tls_on_partitioned_nodes,
         test_nodes_talk_over_tls, test_partitioned_nodes_talk_over_tls,
         test_node_tls_turned_on_one_node_at_a_time, test_node_tls_certificates_reload_on_sighup,
         test_https_on_every_nodes_http_port, test_https_on_partitioned_nodes]
