#!/usr/bin/env python3
"""The web dashboard in a real headless Chromium, against the real server.

Starts `gearshift serve` (env GEARSHIFT_BIN, default target/debug/gearshift)
with its HTTP listener on a free port and a policy file, drives Chromium
through chromedriver's W3C WebDriver HTTP API (stdlib only), talks Gearman
over raw sockets to make jobs, and checks what the page shows against the
JSON API.

    python3 tests/dashboard/test_dashboard.py       # screenshots to a temp dir
    SAVE_SCREENSHOTS=1 python3 tests/dashboard/...  # ... to docs/screenshots/

Needs the Debian packages chromium and chromium-driver. Exits non-zero on
any failure; the last line is "N passed, M failed, 0 skipped".
"""
import base64
import contextlib
import json
import os
import re
import shutil
import socket
import struct
import subprocess
import sys
import tempfile
import time
import traceback
import urllib.error
import urllib.request

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BIN = os.environ.get("GEARSHIFT_BIN", os.path.join(ROOT, "target", "debug", "gearshift"))
CHROME = os.environ.get("CHROME_BIN", "/usr/bin/chromium")
DRIVER = os.environ.get("CHROMEDRIVER", "/usr/bin/chromedriver")
ELEMENT = "element-6066-11e4-a52e-4f735466cecf"  # the W3C element reference key
POLICY = """
[[function]]
match = "boom"
max_attempts = 1

[[function]]
match = "retry_*"
max_attempts = 3
retry_on = ["fail"]
initial_delay = "10ms"
jitter = false
keep_results = "10m"

[[function]]
match = "dash_*"
max_attempts = 1
keep_results = "10m"
"""


class Fail(Exception):
    pass


def wait_for(what, check, timeout=10.0, every=0.1):
    """Polls check() until it returns something truthy; Fail after timeout."""
    deadline = time.time() + timeout
    last = None
    while time.time() < deadline:
        try:
            got = check()
            if got:
                return got
        except Fail as e:
            last = e
        time.sleep(every)
    raise Fail("timed out waiting for %s%s" % (what, " (%s)" % last if last else ""))


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


# ---- WebDriver over HTTP ---------------------------------------------------

class Browser:
    """Just enough of W3C WebDriver: one session on a chromedriver child."""

    def __init__(self, tmp):
        self.port = free_port()
        self.log = open(os.path.join(tmp, "chromedriver.log"), "wb")
        self.proc = subprocess.Popen([DRIVER, "--port=%d" % self.port],
                                     stdout=self.log, stderr=subprocess.STDOUT)
        self.base = "http://127.0.0.1:%d" % self.port
        wait_for("chromedriver", lambda: self._ready(), timeout=15)
        profile = tempfile.mkdtemp(prefix="dash-chrome-", dir=tmp)
        caps = {"capabilities": {"alwaysMatch": {
            "browserName": "chrome",
            "unhandledPromptBehavior": "ignore",  # the token prompt is answered by the test
            "goog:chromeOptions": {"binary": CHROME, "args": [
                "--headless=new", "--no-sandbox", "--disable-gpu", "--disable-quic",
                "--no-first-run", "--disable-background-networking",
                "--disable-component-update", "--disable-sync",
                "--window-size=1280,900", "--user-data-dir=" + profile]}}}}
        self.session = self._call("POST", "/session", caps)["sessionId"]

    def _ready(self):
        try:
            with urllib.request.urlopen(self.base + "/status", timeout=1) as r:
                return json.load(r)["value"].get("ready")
        except (OSError, ValueError):
            return False

    def _call(self, method, path, body=None):
        data = json.dumps(body if body is not None else {}).encode() if method == "POST" else None
        req = urllib.request.Request(self.base + path, data=data, method=method,
                                     headers={"Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(req, timeout=60) as r:
                return json.load(r)["value"]
        except urllib.error.HTTPError as e:
            try:
                v = json.load(e)["value"]
                msg = "%s: %s" % (v.get("error"), v.get("message", "").splitlines()[0])
            except (ValueError, KeyError, IndexError):
                msg = str(e)
            raise Fail("webdriver %s %s: %s" % (method, path.split("/")[-1], msg))

    def s(self, path, body=None, method="POST"):
        return self._call(method, "/session/%s%s" % (self.session, path), body)

    def go(self, url):
        self.s("/url", {"url": url})

    def js(self, script, *args):
        return self.s("/execute/sync", {"script": script, "args": list(args)})

    def find_all(self, css):
        return [e[ELEMENT] for e in self.s("/elements", {"using": "css selector", "value": css})]

    def find(self, css, timeout=10.0):
        return wait_for("element %s" % css, lambda: (self.find_all(css) or [None])[0], timeout)

    def click(self, css, timeout=10.0):
        # The page re-renders often; retry when the element went stale between find and click.
        def attempt():
            try:
                self.s("/element/%s/click" % self.find(css, timeout))
                return True
            except Fail as e:
                if "stale" in str(e) or "not interactable" in str(e):
                    return False
                raise
        wait_for("a click on %s" % css, attempt, timeout)

    def text(self, css):
        """The element's text, or None when it is absent (no waiting)."""
        return self.js("var e = document.querySelector(arguments[0]); return e ? e.textContent : null;", css)

    def wait_text(self, css, want, timeout=10.0):
        try:
            wait_for("%s to read %r" % (css, want), lambda: self.text(css) == want, timeout)
        except Fail as e:
            raise Fail("%s; it reads %r" % (e, self.text(css)))

    def answer_prompt(self, text, timeout=10.0):
        """Types text into the page's window.prompt and accepts it; returns the prompt's message."""
        def shown():
            try:
                return self.s("/alert/text", method="GET") or " "
            except Fail as e:
                if "no such alert" in str(e):
                    return None
                raise
        message = wait_for("a prompt", shown, timeout)
        self.s("/alert/text", {"text": text})
        self.s("/alert/accept")
        return message

    def screenshot(self, path):
        with open(path, "wb") as f:
            f.write(base64.b64decode(self.s("/screenshot", method="GET")))

    def emulate(self, width, height, mobile):
        """Device metrics as a phone would report them (CDP through chromedriver)."""
        if width:
            self.s("/goog/cdp/execute", {"cmd": "Emulation.setDeviceMetricsOverride", "params": {
                "width": width, "height": height, "deviceScaleFactor": 2 if mobile else 1, "mobile": mobile}})
        else:
            self.s("/goog/cdp/execute", {"cmd": "Emulation.clearDeviceMetricsOverride", "params": {}})

    def quit(self):
        try:
            self._call("DELETE", "/session/%s" % self.session)
        except Exception:
            pass
        self.proc.terminate()
        try:
            self.proc.wait(5)
        except subprocess.TimeoutExpired:
            self.proc.kill()
        self.log.close()


# ---- the server under test, and Gearman over raw sockets -------------------

class Server:
    def __init__(self, tmp, extra=(), name="server", store="memory"):
        policy = os.path.join(tmp, "policy.toml")
        with open(policy, "w") as f:
            f.write(POLICY)
        self.logpath = os.path.join(tmp, name + ".log")
        self.log = open(self.logpath, "wb")
        self.proc = subprocess.Popen(
            [BIN, "serve", "-L", "127.0.0.1", "-p", "0", "--store", store, "--log-file", "stderr",
             "--http", "127.0.0.1:0", "--config", policy] + list(extra),
            stdin=subprocess.DEVNULL, stdout=self.log, stderr=subprocess.STDOUT)
        self.port = self.http = None

        def ports():
            if self.proc.poll() is not None:
                raise SystemExit("gearshift serve exited at start:\n" + self.log_text())
            for line in self.log_text().splitlines():
                m = re.search(r"listening on (?:http://)?127\.0\.0\.1:(\d+)", line)
                if m and re.search(r"\bhttp\b", line, re.I):
                    self.http = int(m.group(1))
                elif m:
                    self.port = int(m.group(1))
            return self.port and self.http
        try:
            wait_for("the server to log its Gearman and HTTP ports", ports, timeout=15)
        except Fail as e:
            self.stop()
            raise SystemExit("%s; its log:\n%s" % (e, self.log_text()))
        self.url = "http://127.0.0.1:%d" % self.http

    def log_text(self):
        with open(self.logpath, "rb") as f:
            return f.read().decode("utf-8", "replace")

    def get(self, path):
        with urllib.request.urlopen(self.url + path, timeout=5) as r:
            return json.load(r)

    def post(self, path, token=None):
        req = urllib.request.Request(self.url + path, data=b"", method="POST")
        if token:
            req.add_header("Authorization", "Bearer " + token)
        try:
            with urllib.request.urlopen(req, timeout=5) as r:
                return r.status
        except urllib.error.HTTPError as e:
            return e.code

    def stop(self):
        self.proc.terminate()
        try:
            self.proc.wait(5)
        except subprocess.TimeoutExpired:
            self.proc.kill()
        self.log.close()



@contextlib.contextmanager
def postgres_server(tmp, extra, name):
    """A throwaway PostgreSQL and a server storing in it: (its cluster,
    its URL, the server); both stopped at the end."""
    sys.path.insert(0, os.path.join(ROOT, "tests", "interop"))
    sys.path.insert(0, os.path.join(ROOT, "tests", "import"))
    from test_import import Postgres
    pgtmp = tempfile.mkdtemp(prefix="dash-pg-")
    os.chmod(pgtmp, 0o755)  # as root, PostgreSQL runs as `postgres`
    pg = Postgres(pgtmp).start()
    srv = None
    try:
        url = "postgres://gearshift@127.0.0.1:%d/postgres" % pg.port
        srv = Server(tmp, extra, name=name, store=url)
        yield pg, url, srv
    finally:
        if srv:
            srv.stop()
        pg.stop()
        shutil.rmtree(pgtmp, ignore_errors=True)

class Gearman:
    """One connection speaking the binary protocol."""

    def __init__(self, port):
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=5)

    def send(self, ptype, *args):
        body = b"\0".join(a if isinstance(a, bytes) else a.encode() for a in args)
        self.sock.sendall(b"\0REQ" + struct.pack(">II", ptype, len(body)) + body)

    def recv(self):
        def exactly(n):
            buf = b""
            while len(buf) < n:
                chunk = self.sock.recv(n - len(buf))
                if not chunk:
                    raise Fail("the server closed the Gearman connection")
                buf += chunk
            return buf
        head = exactly(12)
        ptype, size = struct.unpack(">II", head[4:])
        return ptype, exactly(size)

    def submit_epoch(self, function, unique, at, payload):
        self.send(36, function, unique, str(at), payload)   # SUBMIT_JOB_EPOCH
        ptype, body = self.recv()
        if ptype != 8:                           # JOB_CREATED
            raise Fail("SUBMIT_JOB_EPOCH answered with packet %d %r" % (ptype, body))
        return body.decode()

    def submit_bg(self, function, payload):
        self.send(18, function, "", payload)   # SUBMIT_JOB_BG
        ptype, body = self.recv()
        if ptype != 8:                           # JOB_CREATED
            raise Fail("SUBMIT_JOB_BG answered with packet %d %r" % (ptype, body))
        return body.decode()

    def work(self, function, n, fail=False):
        """Grabs n jobs of function; WORK_FAIL or WORK_COMPLETE ("done:" + data) each."""
        self.send(1, function)                   # CAN_DO
        done = []
        deadline = time.time() + 10
        while len(done) < n and time.time() < deadline:
            self.send(9)                         # GRAB_JOB
            ptype, body = self.recv()
            if ptype == 10:                      # NO_JOB
                time.sleep(0.1)
                continue
            if ptype != 11:                      # JOB_ASSIGN
                raise Fail("GRAB_JOB answered with packet %d" % ptype)
            handle, _, data = body.split(b"\0", 2)
            if fail:
                self.send(14, handle)            # WORK_FAIL
            else:
                self.send(13, handle, b"done:" + data)  # WORK_COMPLETE
            done.append(handle.decode())
        if len(done) < n:
            raise Fail("the worker got %d of %d %s jobs" % (len(done), n, function))
        return done

    def close(self):
        self.sock.close()


# ---- scenarios ---------------------------------------------------------------

class Run:
    def __init__(self, server, browser, shots):
        self.srv, self.b, self.shots = server, browser, shots
        self.passed = self.failed = 0
        self.state = {}

    def check(self, name, fn):
        t0 = time.time()
        try:
            fn()
            self.passed += 1
            print("PASS %s (%.1fs)" % (name, time.time() - t0), flush=True)
        except Exception as e:  # one failed scenario must not hide the others
            self.failed += 1
            print("FAIL %s: %s" % (name, e), flush=True)
            if not isinstance(e, Fail):
                traceback.print_exc()
            try:
                self.b.screenshot(os.path.join(self.shots, "FAILED-%s.png" % re.sub(r"\W+", "-", name)))
            except Exception:
                pass

    def tid(self, testid):
        return '[data-testid="%s"]' % testid.replace("\\", "\\\\").replace('"', '\\"')

    def overview_and_live_counts(self):
        b, t = self.b, self.tid
        b.go(self.srv.url + "/")
        b.find(t("totals"))
        wait_for("the event stream to connect", lambda: b.text(t("live-status")) == "live")
        url = b.js("return window.__gearshiftEventsUrl;") or ""
        if "kinds=" not in url or "stats" not in url or "created" in url:
            raise Fail("by default the page should ask for the notable kinds and stats, not every event: %r" % url)
        if b.js("return document.querySelector(arguments[0]).checked;", t("feed-all")):
            raise Fail("the 'every job event' box is on by default")
        b.js("window.__notReloaded = true;")
        b.click(t("nav-functions"))
        wait_for("the Functions view", lambda: b.text("main h1") == "Functions")
        g = Gearman(self.srv.port)
        handles = [g.submit_bg("dash_fn", "payload-%d" % i) for i in range(3)]
        b.wait_text(t("count-queued-dash_fn"), "3")
        handles += [g.submit_bg("dash_fn", "payload-%d" % i) for i in range(3, 5)]
        b.wait_text(t("count-queued-dash_fn"), "5")
        g.close()
        # The counts come from the stream's per-second stats, not from job events.
        wait_for("a stats event with 5 queued", lambda: b.js(
            "var s = window.__gearshiftStats; return !!s && s.last.totals.queued === 5 && s.count;"))
        shown = b.js("return Array.from(document.querySelectorAll('[data-testid=event]')).map(e => e.dataset.kind);")
        if "created" in shown or "stats" in shown:
            raise Fail("the default feed lists %r; it should hold notable events only" % shown)
        w = Gearman(self.srv.port)
        self.state["completed"] = w.work("dash_fn", 2)
        wait_for("worker_joined in the feed", lambda: "dash_fn" in (b.text(
            '[data-testid=event][data-kind=worker_joined]') or ""))
        w.close()
        b.wait_text(t("count-completed-dash_fn"), "2")
        b.wait_text(t("count-queued-dash_fn"), "3")
        if not b.js("return window.__notReloaded === true;"):
            raise Fail("the page reloaded")
        b.click(t("nav-overview"))
        b.wait_text(t("total-queued-value"), "3")
        b.wait_text(t("total-completed-value"), "2")
        for c in ("chart-depth", "chart-throughput"):
            w_ = b.js("var c = document.querySelector(arguments[0]); return c ? c.width : 0;", t(c))
            if not w_:
                raise Fail("no %s canvas drawn" % c)
        time.sleep(3)  # a few more samples in the series for the picture
        b.screenshot(os.path.join(self.shots, "overview.png"))

    def dead_and_retry(self):
        b, t = self.b, self.tid
        # The feed shows only what arrives while the stream is open, and the
        # test before this one leaves it reconnecting.
        wait_for("the event stream to connect", lambda: b.text(t("live-status")) == "live")
        g = Gearman(self.srv.port)
        handle = g.submit_bg("boom", "kaboom")
        g.close()
        w = Gearman(self.srv.port)
        w.work("boom", 1, fail=True)
        wait_for("the boom job in /api/v1/dead",
                 lambda: any(d["handle"] == handle for d in self.srv.get("/api/v1/dead")["dead"]))
        w.close()
        self.state["dead"] = handle
        b.click(t("nav-dead"))
        b.find(t("dead-row-" + handle))
        row = b.text(t("dead-row-" + handle))
        if "boom" not in row:
            raise Fail("the dead row does not name the function: %r" % row)
        kinds_of = ("return Array.from(document.querySelectorAll('[data-testid=event]'))"
                    ".filter(e => e.textContent.indexOf(arguments[0]) >= 0).map(e => e.dataset.kind);")
        wait_for("failed and dead events of %s in the feed" % handle,
                 lambda: {"failed", "dead"} <= set(b.js(kinds_of, handle)))
        b.screenshot(os.path.join(self.shots, "dead.png"))
        b.click(t("retry-" + handle))
        wait_for("the job to leave /api/v1/dead",
                 lambda: all(d["handle"] != handle for d in self.srv.get("/api/v1/dead")["dead"]))
        wait_for("a revived event of %s in the feed" % handle, lambda: "revived" in b.js(kinds_of, handle))
        job = self.srv.get("/api/v1/jobs/" + urllib.request.quote(handle, safe=""))
        if job["state"] not in ("queued", "running", "retrying"):
            raise Fail("after Retry the job is %r, not queued again" % job["state"])
        wait_for("the dead row to go away", lambda: b.text(t("dead-row-" + handle)) is None)

    def every_job_event(self):
        """The "every job event" box: the full stream, created events listed, kept across a reload."""
        b, t = self.b, self.tid
        url = "return window.__gearshiftEventsUrl || '';"
        b.go(self.srv.url + "/#/functions")
        wait_for("the event stream to connect", lambda: b.text(t("live-status")) == "live")
        b.click(t("feed-all"))
        wait_for("a reconnect without kinds", lambda: "kinds=" not in b.js(url))
        wait_for("the full stream to connect", lambda: b.text(t("live-status")) == "live")
        if b.js("return localStorage.getItem('gearshift.allEvents');") != "1":
            raise Fail("the box is not kept in local storage")
        g = Gearman(self.srv.port)
        handles = [g.submit_bg("dash_all", "x%d" % i) for i in range(2)]
        g.close()
        created = "return Array.from(document.querySelectorAll('[data-testid=event][data-kind=created]')).map(e => e.textContent).join(' ');"
        wait_for("created events of %s in the feed" % handles,
                 lambda: all(h in b.js(created) for h in handles))
        b.js("location.reload();")
        wait_for("the page to load again", lambda: b.js("return document.readyState === 'complete' && !!window.__gearshiftEventsUrl;"))
        if not b.js("return document.querySelector(arguments[0]).checked;", t("feed-all")):
            raise Fail("the box is off after a reload")
        if "kinds=" in b.js(url):
            raise Fail("after a reload the page asks for kinds again: %r" % b.js(url))
        b.click(t("feed-all"))
        wait_for("a reconnect with kinds", lambda: "kinds=" in b.js(url))
        if b.js("return localStorage.getItem('gearshift.allEvents');"):
            raise Fail("turning the box off did not clear local storage")

    def job_page(self):
        b, t = self.b, self.tid
        done = self.state["completed"][0]
        b.go(self.srv.url + "/#/job/" + urllib.request.quote(done, safe=""))
        b.wait_text(t("job-handle"), done)
        b.wait_text(t("job-state"), "completed")
        b.find(t("job-history"))
        hist = b.text(t("job-history"))
        for ev in ("started", "completed"):
            if ev not in hist:
                raise Fail("the history of %s lacks %r: %r" % (done, ev, hist))
        result = b.text(t("job-result"))
        if not (result or "").startswith("done:payload-"):
            raise Fail("the job page shows result %r" % result)
        if b.find_all(t("cancel-job")):
            raise Fail("a Cancel button on a completed job")
        # The revived job: a longer history, live again, so it can be cancelled.
        handle = self.state["dead"]
        b.go(self.srv.url + "/#/job/" + urllib.request.quote(handle, safe=""))
        b.wait_text(t("job-handle"), handle)
        n = wait_for("3 or more history items",
                     lambda: len(b.find_all(t("job-history") + " li")) >= 3 and len(b.find_all(t("job-history") + " li")))
        times = b.js("return Array.from(document.querySelectorAll('[data-testid=job-history] time')).map(e => e.textContent);")
        if len(times) != n or not all(re.match(r"^(\d{4}-\d\d-\d\d )?\d\d:\d\d:\d\d$", x) for x in times):
            raise Fail("history times look wrong: %r" % times)
        b.find(t("cancel-job"))
        b.screenshot(os.path.join(self.shots, "job.png"))

    def schedules(self):
        """An epoch job waiting for its time is listed with the schedules."""
        b, t = self.b, self.tid
        at = int(time.time()) + 7500  # "in 2h" on the page
        g = Gearman(self.srv.port)
        handle = g.submit_epoch("dash_later", "daily", at, "x")
        g.close()
        listed = [s for s in self.srv.get("/api/v1/schedules")["schedules"] if s["handle"] == handle]
        if not listed or listed[0]["kind"] != "epoch" or listed[0]["next_ms"] != at * 1000:
            raise Fail("/api/v1/schedules lists the epoch job as %r" % listed)
        b.go(self.srv.url + "/#/schedules")
        row = t("schedule-row-" + handle)
        b.find(row)
        text = b.text(row)
        for want in (handle, "dash_later", "once", "daily", "client", "in 2h"):
            if want not in text:
                raise Fail("the schedule row lacks %r: %r" % (want, text))
        if b.js("return document.querySelector(arguments[0]).dataset.kind;", row) != "epoch":
            raise Fail("the row is not marked as an epoch job")
        b.screenshot(os.path.join(self.shots, "schedules.png"))
        # Its handle opens its job page: scheduled, due then.
        b.click(row + " a")
        b.wait_text(t("job-handle"), handle)
        b.wait_text(t("job-state"), "scheduled")

    def outcome_apart_from_failure(self):
        """A job that completed on its second attempt reads completed, its failure apart."""
        b, t = self.b, self.tid
        g = Gearman(self.srv.port)
        handle = g.submit_bg("retry_dash", "x")
        g.close()
        w = Gearman(self.srv.port)
        w.work("retry_dash", 1, fail=True)
        w.work("retry_dash", 1)
        w.close()
        path = "/api/v1/jobs/" + urllib.request.quote(handle, safe="")
        wait_for("the job to complete", lambda: self.srv.get(path)["state"] == "completed")
        b.go(self.srv.url + "/#/job/" + urllib.request.quote(handle, safe=""))
        b.wait_text(t("job-state"), "completed")
        b.wait_text(t("job-outcome"), "completed")
        failure = b.text(t("job-last-failure")) or ""
        if not failure.startswith("fail (attempt 1, "):
            raise Fail("the last failure reads %r" % failure)
        if b.find_all(t("job-error")):
            raise Fail("a bare error field is still shown beside the outcome")
        fields = b.text(t("job-fields")) or ""
        if "error" in fields:
            raise Fail("the fields still say error: %r" % fields)

    def phone(self):
        b, t = self.b, self.tid
        b.emulate(390, 844, True)
        try:
            b.go(self.srv.url + "/#/functions")
            b.find(t("function-row-dash_fn"))
            iw = b.js("return window.innerWidth;")
            if iw != 390:
                raise Fail("the phone viewport is %r px wide, not 390" % iw)
            visible = "var e = document.querySelector(arguments[0]); return !!e && e.getClientRects().length > 0;"
            if not b.js(visible, t("nav-toggle")):
                raise Fail("no menu button on a phone")
            if b.js(visible, t("nav-dead")):
                raise Fail("the nav is not collapsed on a phone")
            b.click(t("nav-toggle"))
            wait_for("the nav to open", lambda: b.js(visible, t("nav-dead")))
            overflow = ("return [document.documentElement.scrollWidth, window.innerWidth];")
            for route, ready in (("functions", "function-row-dash_fn"), ("overview", "totals"),
                                 ("dead", "dead-empty"), ("workers", "workers-empty")):
                b.go(self.srv.url + "/#/" + route)
                b.find(t(ready))
                sw, w = b.js(overflow)
                if sw > w:
                    raise Fail("#/%s overflows a phone: scrollWidth %d > innerWidth %d" % (route, sw, w))
            b.go(self.srv.url + "/#/functions")
            b.find(t("function-row-dash_fn"))
            b.screenshot(os.path.join(self.shots, "phone.png"))
        finally:
            b.emulate(None, None, False)

    def escaping(self):
        b, t = self.b, self.tid
        evil = '<img src=x onerror="window.__xss=1">'
        g = Gearman(self.srv.port)
        g.submit_bg(evil, "x")
        g.close()
        b.go(self.srv.url + "/#/functions")
        b.find(t("function-row-" + evil))
        if b.js("return window.__xss === 1 || !!document.querySelector('main img');"):
            raise Fail("a function name was parsed as HTML")
        names = [f["name"] for f in self.srv.get("/api/v1/functions")["functions"]]
        if "favicon.ico" in names:
            raise Fail("loading the page made a job (a GET /favicon.ico was taken for a gearmand HTTP submission)")
        if evil not in b.text(t("function-row-" + evil)):
            raise Fail("the function name is not shown as text")

    def perl_prefix(self):
        """A real Perl worker and client with prefix => "app" ("app\\tdash_rev"
        on the wire): the Functions view lists the name with its TAB shown as
        \\x09, as `status` prints it, with its worker and completed job."""
        b, t = self.b, self.tid
        clients = os.path.join(ROOT, "tests", "interop", "clients")
        env = dict(os.environ, GEARMAN_PREFIX="app")
        worker = subprocess.Popen(["perl", os.path.join(clients, "worker.pl"), str(self.srv.port),
                                   "rev", "dash_rev"], env=env,
                                  stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            out = subprocess.run(["perl", os.path.join(clients, "client.pl"), str(self.srv.port),
                                  "do", "dash_rev", "abc"], env=env, capture_output=True,
                                 text=True, timeout=30).stdout.strip()
            if out != "RESULT:cba":
                raise Fail("the prefixed Perl job answered %r" % out)
            name = "app\tdash_rev"
            b.go(self.srv.url + "/#/functions")
            row = t("function-row-" + name)
            b.find(row)
            wait_for("the row to show the completed job",
                     lambda: b.text(t("count-completed-" + name)) == "1")
            cell = b.js("return document.querySelector(arguments[0] + ' td').textContent;", row)
            if cell != "app\\x09dash_rev":
                raise Fail("the function cell reads %r, not app\\x09dash_rev" % cell)
            if b.text(t("count-workers-" + name)) != "1":
                raise Fail("the Perl worker is not counted on its function's row")
        finally:
            worker.kill()
            worker.wait(timeout=10)

    def cluster_view(self, tmp):
        """A partitioned node on PostgreSQL offers the Cluster view: itself,
        its 64 partitions, its worker and its pins; a memory server does not
        offer it."""
        b, t = self.b, self.tid
        b.go(self.srv.url + "/")
        b.find(t("totals"))
        time.sleep(1.0)  # the dashboard's probe of /api/v1/cluster has answered 404
        if b.js("return document.querySelector(arguments[0]).hidden;", t("nav-cluster")) is not True:
            raise Fail("a memory server offers the Cluster view")
        with postgres_server(tmp, ["--partitioned", "--node-name", "dash-node"],
                             "server-cluster") as (_, url, srv):
            w = Gearman(srv.port)
            w.send(1, "dash_cluster")  # CAN_DO
            wait_for("the node to own every partition and count the worker", lambda: (
                lambda c: len([p for p in c.get("partitions", []) if p["node"] == "dash-node"]) == 64
                and c["workers"] == 1)(srv.get("/api/v1/cluster")), timeout=20)
            b.go(srv.url + "/#/cluster")
            wait_for("the Cluster link", lambda: b.js(
                "return document.querySelector(arguments[0]).hidden;", t("nav-cluster")) is False)
            b.find(t("node-row-dash-node"))
            b.wait_text(t("node-role-dash-node"), "64 (0-63)")
            b.wait_text(t("node-workers-dash-node"), "1")
            if "Partitioned" not in b.text(t("cluster-mode")):
                raise Fail("the mode reads %r" % b.text(t("cluster-mode")))
            if "(this node)" not in b.text(t("node-row-dash-node")):
                raise Fail("the node is not marked as this node")
            if b.js("return document.querySelector(arguments[0]) !== null;", t("pins")):
                raise Fail("pins are listed before any function is pinned")
            r = subprocess.run([BIN, "pin", "--store", url, "dash_pinned", "7"],
                               capture_output=True, text=True, timeout=30)
            if r.returncode != 0:
                raise Fail("gearshift pin failed: %s%s" % (r.stdout, r.stderr))
            b.find(t("pin-row-dash_pinned"), timeout=20)
            cells = b.js("return Array.from(document.querySelectorAll(arguments[0] + ' td'))"
                         ".map(function (c) { return c.textContent; });", t("pin-row-dash_pinned"))
            if cells != ["dash_pinned", "7", "dash-node"]:
                raise Fail("the pin's row reads %r" % (cells,))
            b.screenshot(os.path.join(self.shots, "cluster.png"))
            # The Functions view names each function's node and partition.
            placed = next(f for f in srv.get("/api/v1/functions")["functions"]
                          if f["name"] == "dash_cluster")
            b.go(srv.url + "/#/functions")
            b.wait_text(t("node-of-dash_cluster"), "dash-node (%d)" % placed["partition"])
            w.close()
            self.pin_asked(tmp, url, srv)

    def pin_asked(self, tmp, url, srv):
        """With a second node, a pin asked for while the function's job
        runs is listed as asked until the job is done, then as in force."""
        b, t = self.b, self.tid
        other = Server(tmp, ["--partitioned", "--node-name", "dash-other"],
                       name="server-other", store=url)
        try:
            def owners():
                return {p["partition"]: p["node"] for p in srv.get("/api/v1/cluster")["partitions"]}
            wait_for("the second node to take its share", lambda: (
                lambda o: len(o) == 64 and None not in o.values()
                and sorted(set(o.values())) == ["dash-node", "dash-other"])(owners()), timeout=30)
            f = "dash_asked"
            r = subprocess.run([BIN, "pin", "--store", url, f], capture_output=True, text=True,
                               timeout=30)
            m = re.search(r"partition (\d+) \(its name's hash\), owned by node (\S+)", r.stdout)
            if not m:
                raise Fail("where %s lives: %s%s" % (f, r.stdout, r.stderr))
            src, mover = int(m.group(1)), m.group(2)
            own = owners()
            dst = next(p for p in sorted(own) if own[p] != mover)
            w = Gearman(srv.port)
            w.submit_bg(f, "held")
            w.send(1, f)                             # CAN_DO
            w.send(9)                                # GRAB_JOB
            ptype, body = w.recv()
            if ptype != 11:                          # JOB_ASSIGN
                raise Fail("GRAB_JOB answered with packet %d %r" % (ptype, body))
            handle = body.split(b"\0")[0]
            r = subprocess.run([BIN, "pin", "--store", url, "--wait", "0", f, str(dst)],
                               capture_output=True, text=True, timeout=30)
            if r.returncode != 0 or "asked of node %s" % mover not in r.stdout:
                raise Fail("gearshift pin --wait 0: %s%s" % (r.stdout, r.stderr))
            b.go(srv.url + "/#/cluster")
            b.find(t("pin-asked-row-" + f), timeout=20)
            cells = b.js("return Array.from(document.querySelectorAll(arguments[0] + ' td'))"
                         ".map(function (c) { return c.textContent; });", t("pin-asked-row-" + f))
            if cells != [f, str(src), str(dst), mover]:
                raise Fail("the asked pin's row reads %r" % (cells,))
            b.screenshot(os.path.join(self.shots, "cluster-pin-asked.png"))
            w.send(13, handle, b"")                  # WORK_COMPLETE
            b.find(t("pin-row-" + f), timeout=20)
            wait_for("the asked pin's row to go", lambda: b.js(
                "return document.querySelector(arguments[0]) === null;",
                t("pin-asked-row-" + f)), timeout=10)
            w.close()
        finally:
            other.stop()

    def store_failing(self, tmp):
        """The database goes away under a PostgreSQL-backed server: a
        submission is refused, and the overview says the store is failing;
        a healthy server's overview says nothing of its store."""
        b, t = self.b, self.tid
        b.go(self.srv.url + "/")
        b.find(t("totals"))
        if b.js("return document.querySelector(arguments[0]) !== null;", t("store-health")):
            raise Fail("a healthy memory server shows a store warning")
        with postgres_server(tmp, [], "server-store") as (pg, _, srv):
            g = Gearman(srv.port)
            g.submit_bg("dash_store", "stored")
            b.go(srv.url + "/")
            b.find(t("totals"))
            if b.js("return document.querySelector(arguments[0]) !== null;", t("store-health")):
                raise Fail("a healthy PostgreSQL store shows a warning")
            pg.stop()
            try:
                g.submit_bg("dash_store", "not stored")
                raise Fail("a submission was accepted with the database gone")
            except Fail as e:
                if "QUEUE_ERROR" not in str(e):
                    raise
            g.close()
            b.find(t("store-health"))
            health = b.js("var e = document.querySelector(arguments[0]);"
                          "return [e.dataset.state, e.getAttribute('role'), e.textContent];",
                          t("store-health"))
            if health[0] != "failing" or health[1] != "alert":
                raise Fail("the store's line is %r, not a failing alert" % (health,))
            if "ERROR QUEUE_ERROR: 1." not in health[2] or "failing" not in health[2]:
                raise Fail("the store's line reads %r" % health[2])
            b.screenshot(os.path.join(self.shots, "store-failing.png"))

    def token(self, tmp):
        """With --http-token-file: a change asks for the token, a wrong one shows a clear 401."""
        b, t = self.b, self.tid
        path = os.path.join(tmp, "token")
        with open(path, "w") as f:
            f.write("s3cret-token\n")
        srv = Server(tmp, ["--http-token-file", path], name="server-token")
        try:
            g = Gearman(srv.port)
            g.submit_bg("dash_auth", "x")
            g.close()
            if srv.post("/api/v1/functions/dash_auth/pause") != 401:
                raise Fail("a change without the token was not refused with 401")
            b.go(srv.url + "/#/functions")
            b.click(t("pause-dash_auth"))
            b.answer_prompt("wrong-token")
            wait_for("a 401 message", lambda: "401" in (b.text(t("message")) or ""))
            if b.js("return document.querySelector(arguments[0]).hidden;", t("message")):
                raise Fail("the 401 message is hidden")
            b.click(t("token-button"))
            b.answer_prompt("s3cret-token")
            b.click(t("pause-dash_auth"))
            b.wait_text(t("paused-dash_auth"), "paused")
            if not [f for f in srv.get("/api/v1/functions")["functions"] if f["name"] == "dash_auth" and f["paused"]]:
                raise Fail("the API does not report dash_auth paused")
            if b.js("return localStorage.getItem('gearshift.token');") != "s3cret-token":
                raise Fail("the token is not kept in local storage")
        finally:
            srv.stop()


def main():
    for path in (BIN, CHROME, DRIVER):
        if not os.access(path, os.X_OK):
            print("missing %s (build with `cargo build -p gearshift`; "
                  "apt-get install -y chromium chromium-driver)" % path)
            print("0 passed, 1 failed, 0 skipped")
            return 1
    tmp = tempfile.mkdtemp(prefix="dash-test-")
    shots = os.path.join(ROOT, "docs", "screenshots") if os.environ.get("SAVE_SCREENSHOTS") == "1" else tmp
    os.makedirs(shots, exist_ok=True)
    started = time.time()
    server = Server(tmp)
    browser = None
    run = None
    try:
        browser = Browser(tmp)
        run = Run(server, browser, shots)
        run.check("overview renders, counts update live from stats", run.overview_and_live_counts)
        run.check("'every job event' streams and lists created events", run.every_job_event)
        run.check("a dead job is retried from the Dead view", run.dead_and_retry)
        run.check("the job page shows fields, history and result", run.job_page)
        run.check("epoch jobs are listed in the Schedules view", run.schedules)
        run.check("a job that completed after a failure reads completed", run.outcome_apart_from_failure)
        run.check("a phone-sized screen: collapsed nav, no overflow", run.phone)
        run.check("server strings are shown as text, not HTML", run.escaping)
        run.check("Perl's prefixed names in the Functions view", run.perl_prefix)
        run.check("a token is asked for, kept, and a 401 explained", lambda: run.token(tmp))
        run.check("a cluster node offers the Cluster view", lambda: run.cluster_view(tmp))
        run.check("a store that cannot write shows on the overview", lambda: run.store_failing(tmp))
    finally:
        if browser:
            browser.quit()
        server.stop()
    passed, failed = (run.passed, run.failed) if run else (0, 1)
    print("screenshots in %s; %.1fs" % (shots, time.time() - started))
    if failed:
        print("server log: %s" % server.logpath)
    else:
        if shots != tmp:
            shutil.rmtree(tmp, ignore_errors=True)
    print("%d passed, %d failed, 0 skipped" % (passed, failed))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
