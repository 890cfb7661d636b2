#!/usr/bin/env python3
"""etcd bridge registry suite: what Gearshift writes into the entries of
its Gearman workers beyond the basics test_etcd.py checks: `Stats` that
`gearshift work` reports (its commands' CPU and memory, through Gearshift's
`stats` option), and `Name` from a worker's TLS client certificate.

test_etcd.py runs these tests too; alone: `python3 test_etcd_registry.py
[substring ...]`. Env as test_etcd.py's (GEARSHIFT, ETCD).
"""

import json
import os
import sys
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

from etcd_harness import GEARSHIFT, make_certs, wrap  # noqa: E402
import harness as h  # noqa: E402  (tests/interop, on the path etcd_harness set)
from harness import check, check_eq  # noqa: E402

# Burns a little CPU per job (so CPU time shows), then answers.
BUSY = "cat >/dev/null; i=0; while [ $i -lt 300000 ]; do i=$((i+1)); done; echo done"


def entry_named(ctx, name):
    for key, doc in ctx.workers().items():
        if doc and doc.get("Name") == name:
            return key, doc
    return None


def gearshift_work(ctx, port, func, client_id, *tls):
    return ctx.spawn([GEARSHIFT, "work", "-s", "127.0.0.1:%d" % port, "-f", func,
                      "--client-id", client_id] + list(tls) + ["--", "sh", "-c", BUSY],
                     "gearshift-work-" + client_id)


def gearshift_work_reports_stats(ctx):
    gearshift_work(ctx, ctx.port, "etcd-job", "gw-1")
    h.wait_workers(ctx.port, "etcd-job")
    key, doc = h.wait_for(lambda: entry_named(ctx, "gw-1"), 10, "the entry of gw-1")
    check("Stats" not in doc, "no Stats before a job: %r" % doc)
    ids = [ctx.submit("s%d" % i) for i in range(2)]
    for jid in ids:
        check_eq(ctx.wait_state(jid)["Result"]["Status"], "SUCCESS", "job %s" % jid)

    def stats():
        s = ctx.workers()[key].get("Stats") or {}
        return s if s.get("Cpu", 0) > 0 and s.get("Mem", 0) > 0 else None
    s = h.wait_for(stats, 10, "Stats with CPU and memory in %s" % key)
    check(s["Cpu"] < 60 and s["Mem"] < 1024, "plausible figures: %r" % s)
    # The same figures in the HTTP API.
    with ctx.nodes[0].http("/api/v1/workers") as r:
        ws = json.loads(r.read())["workers"]
    mine = [w for w in ws if w["client_id"] == "gw-1"]
    check_eq(len(mine), 1, "gw-1 in /api/v1/workers: %r" % ws)
    check(mine[0]["stats"]["cpu_ms"] > 0 and mine[0]["stats"]["max_rss_kib"] > 0,
          "stats in the API: %r" % mine[0])


def certificate_names_the_entry(ctx):
    certs = ctx.path("gm-certs")
    os.makedirs(certs)
    make_certs(certs)
    tls_port = h.free_port()
    f = lambda n: os.path.join(certs, n)  # noqa: E731
    ctx.extra += ["--ssl-listen", "127.0.0.1:%d" % tls_port, "--ssl-certificate",
                  f("server.pem"), "--ssl-key", f("server.key"), "--ssl-ca-file", f("ca.pem"),
                  "--ssl-verify-client"]
    ctx.port = ctx.start_node().port
    # With a client certificate: its CN (`client`) names the entry, not the client id.
    gearshift_work(ctx, tls_port, "etcd-job", "cid-tls", "--tls-ca", f("ca.pem"),
                   "--tls-cert", f("client.pem"), "--tls-key", f("client.key"))
    # Without one: the client id.
    gearshift_work(ctx, ctx.port, "etcd-job", "cid-plain")
    h.wait_workers(ctx.port, "etcd-job", 2)
    key, doc = h.wait_for(lambda: entry_named(ctx, "client"), 10, "an entry named client")
    check_eq(doc["Status"], "ALIVE", "the TLS worker's entry")
    h.wait_for(lambda: entry_named(ctx, "cid-plain"), 10, "an entry named cid-plain")
    check(entry_named(ctx, "cid-tls") is None, "the client id does not name the TLS entry")
    with urllib.request.urlopen("http://%s/api/v1/workers" % ctx.nodes[0].http_addr(),
                                timeout=5) as r:
        ids = {w["client_id"]: w["identity"] for w in json.loads(r.read())["workers"]}
    check_eq(ids.get("cid-tls"), "CN=client", "identity in the API")


TESTS = [gearshift_work_reports_stats]
SPECIAL = {certificate_names_the_entry: {"nodes": 0}}


def tests():
    """(name, test) of every test here, for test_etcd.py."""
    out = [(f.__name__, wrap(f)) for f in TESTS]
    return out + [(f.__name__, wrap(f, **kw)) for f, kw in SPECIAL.items()]


if __name__ == "__main__":
    os.environ["SERVER_CMD"] = "%s serve ... --etcd http://127.0.0.1:<own port>" % GEARSHIFT
    sys.exit(h.run_suite("etcd bridge registry", tests()))
