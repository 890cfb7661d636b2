"""etcd's v3 API through its JSON gateway (`/v3/kv/range`, `/v3/kv/put`,
`/v3/kv/txn`, `/v3/watch`, `/v3/lease/grant`, `/v3/auth/authenticate`;
keys and values base64), Python's standard library only: the client under
etcdqueue.py, the bridge's tests and perf/etcd_bench.py.
"""

import base64
import http.client
import json
import ssl
import threading
import urllib.parse


class EtcdError(Exception):
    """etcd did not answer, or answered with an error."""


def b64(s):
    if isinstance(s, str):
        s = s.encode()
    return base64.b64encode(s).decode()


def unb64(s):
    return base64.b64decode(s or "")


def prefix_end(p):
    """The range_end that makes `p` a prefix range."""
    b = bytearray(p.encode() if isinstance(p, str) else p)
    while b:
        if b[-1] < 0xFF:
            b[-1] += 1
            return bytes(b)
        b.pop()
    return b"\0"


class KV:
    """One key of a range answer."""

    def __init__(self, d):
        self.key = unb64(d.get("key")).decode("utf-8", "replace")
        self.raw = unb64(d.get("value"))
        self.mod_revision = int(d.get("mod_revision", 0))
        self.create_revision = int(d.get("create_revision", 0))

    def json(self):
        """The value as a JSON object, or None if it is not one."""
        try:
            v = json.loads(self.raw)
        except ValueError:
            return None
        return v if isinstance(v, dict) else None


class Etcd:
    """etcd's v3 JSON gateway, one keep-alive connection per thread; every
    request counted in `requests` (what perf/etcd_bench.py compares)."""

    def __init__(self, url, timeout=5.0, user=None, password=None, ca=None, cert=None,
                 key=None):
        u = urllib.parse.urlsplit(url)
        self.host, self.port = u.hostname, u.port or 2379
        self.timeout = timeout
        self.tls = None
        if u.scheme == "https":
            self.tls = ssl.create_default_context(cafile=ca)
            if cert:
                self.tls.load_cert_chain(cert, key)
        self.user, self.password, self.token = user, password, None
        self.local = threading.local()
        self.requests = 0
        self.lock = threading.Lock()

    def connect(self, timeout):
        if self.tls:
            return http.client.HTTPSConnection(self.host, self.port, timeout=timeout,
                                               context=self.tls)
        return http.client.HTTPConnection(self.host, self.port, timeout=timeout)

    def _conn(self):
        c = getattr(self.local, "conn", None)
        if c is None:
            c = self.connect(self.timeout)
            self.local.conn = c
        return c

    def headers(self, path="/v3/kv/range"):
        """The request headers, with an auth token when a user is set."""
        hd = {"Content-Type": "application/json"}
        if self.user and path != "/v3/auth/authenticate":
            if self.token is None:
                self.token = self.call("/v3/auth/authenticate",
                                       {"name": self.user, "password": self.password})["token"]
            hd["Authorization"] = self.token
        return hd

    def call(self, path, body):
        with self.lock:
            self.requests += 1
        data = json.dumps(body).encode()
        for attempt in (0, 1):
            c = self._conn()
            try:
                c.request("POST", path, data, self.headers(path))
                resp = c.getresponse()
                text = resp.read()
            except (OSError, http.client.HTTPException) as e:
                c.close()
                self.local.conn = None
                if attempt:
                    raise EtcdError("%s: %s" % (path, e))
                continue
            if resp.status != 200 and b"token" in text and not attempt:
                self.token = None  # expired: authenticate again
                continue
            if resp.status != 200:
                raise EtcdError("%s: HTTP %d %s" % (path, resp.status, text[:300]))
            try:
                return json.loads(text)
            except ValueError:
                raise EtcdError("%s: not JSON: %r" % (path, text[:300]))
        raise EtcdError(path)

    def range(self, key, end=None, limit=0):
        """(kvs, more, revision) of [key, end) (a single key without end)."""
        body = {"key": b64(key)}
        if end is not None:
            body["range_end"] = b64(end)
        if limit:
            body["limit"] = limit
        r = self.call("/v3/kv/range", body)
        return ([KV(d) for d in r.get("kvs", [])], bool(r.get("more")),
                int(r.get("header", {}).get("revision", 0)))

    def get(self, key):
        kvs, _, _ = self.range(key)
        return kvs[0] if kvs else None

    def put(self, key, value, lease=None):
        body = {"key": b64(key), "value": b64(value)}
        if lease:
            body["lease"] = str(lease)
        return int(self.call("/v3/kv/put", body)["header"]["revision"])

    def txn(self, compare, success, failure=()):
        """(succeeded, revision after it)."""
        r = self.call("/v3/kv/txn", {"compare": compare, "success": list(success),
                                     "failure": list(failure)})
        return bool(r.get("succeeded")), int(r.get("header", {}).get("revision", 0))

    def lease_grant(self, ttl):
        return int(self.call("/v3/lease/grant", {"TTL": ttl})["ID"])

    def watch(self, key, end, start_revision, on_event, stop):
        """Calls on_event(type, KV) for each change under [key, end) from
        start_revision until stop() is true or the stream ends (a thread's loop)."""
        body = {"create_request": {"key": b64(key), "range_end": b64(end),
                                   "start_revision": str(start_revision)}}
        # (a quiet stream times out after 30 s: the caller opens a new one)
        c = self.connect(30.0)
        with self.lock:
            self.requests += 1
        try:
            c.request("POST", "/v3/watch", json.dumps(body).encode(), self.headers())
            resp = c.getresponse()
            buf = b""
            while not stop():
                chunk = resp.read1(65536)
                if not chunk:
                    return
                buf += chunk
                # The gateway sends one JSON object a line.
                while b"\n" in buf:
                    line, buf = buf.split(b"\n", 1)
                    if not line.strip():
                        continue
                    res = json.loads(line).get("result", {})
                    for ev in res.get("events", []):
                        on_event(ev.get("type", "PUT"), KV(ev.get("kv", {})))
        finally:
            c.close()


def put_op(key, value):
    return {"request_put": {"key": b64(key), "value": b64(value)}}


def delete_op(key):
    return {"request_delete_range": {"key": b64(key)}}


def same_mod(key, rev):
    return {"key": b64(key), "target": "MOD", "result": "EQUAL", "mod_revision": str(rev)}


def absent(key):
    return {"key": b64(key), "target": "CREATE", "result": "EQUAL", "create_revision": "0"}


def dump(doc):
    return json.dumps(doc, separators=(",", ":"))
