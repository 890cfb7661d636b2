#!/usr/bin/env python3
"""The etcd job queue of seed 004, written from its text: a submitter, a
worker and a harvester on etcd's v3 API through etcd's JSON gateway
(etcdv3.py), Python's standard library only. The key mapping is the bridge's
(docs/etcd.md): `<P>jobs/<id>` (split layout: `<P>new/`, `<P>running/`,
`<P>finished/`), `<P>workers/<name>`, the id counter `<P>seq/jobs`; ids are
decimal, zero-padded to 20 digits.

Library: Etcd(url), Queue(etcd, prefix, layout).submit(...)/jobs()/job(id),
Worker(queue, name, run).run()/harvest(). The bridge's tests
(tests/etcd/test_etcd.py) and perf/etcd_bench.py drive them.

Command line:
  etcdqueue.py URL [--prefix P] [--layout single|split] [--user U] [--ca FILE]
      [--cert FILE --key FILE]  (the password: --password or ETCDQUEUE_PASSWORD)
  etcdqueue.py URL ... submit [--function F]
      [--config C] [--count N]                       prints one id a line
  etcdqueue.py URL ... worker NAME MODE [--harvest-after S] [--log FILE]
      [--count N] [--no-harvest]
      modes: echo (Info = Container.Config), upper (Info = it upper-cased),
      sleep (sleep float(Container.Config) s, then as echo), fail (FAILURE
      "boom:<Config>"), steps (Step "1/3", "2/3", then as echo);
      --log appends "run <id> <name>" per job taken and "finished <id>" or
      "fenced <id>" at its end
  etcdqueue.py URL ... harvest [--harvest-after S]    prints the harvested
  etcdqueue.py URL ... show ID                        prints the document
"""

import argparse
import datetime
import json
import os
import re
import sys
import threading
import time

# (re-exported: the tests and the bench reach the client through this module)
from etcdv3 import (EtcdError, Etcd, KV, b64, prefix_end, put_op,  # noqa: F401
                    delete_op, same_mod, absent, dump)

ID_DIGITS = 20


def now():
    """RFC 3339 UTC, milliseconds."""
    t = datetime.datetime.now(datetime.timezone.utc)
    return t.strftime("%Y-%m-%dT%H:%M:%S.") + "%03dZ" % (t.microsecond // 1000)


_TS = re.compile(r"^(\d{4})-(\d\d)-(\d\d)[Tt ](\d\d):(\d\d):(\d\d)(\.\d+)?([Zz]|[+-]\d\d:\d\d)$")


def parse_time(s):
    """An RFC 3339 timestamp (any fraction digits), or a number of Unix
    seconds, as epoch seconds; None if neither."""
    if isinstance(s, (int, float)) and not isinstance(s, bool):
        return float(s)
    m = _TS.match(s or "") if isinstance(s, str) else None
    if not m:
        return None
    y, mo, d, hh, mi, ss = (int(x) for x in m.groups()[:6])
    frac = float(m.group(7)) if m.group(7) else 0.0
    tz = m.group(8)
    off = 0
    if tz not in ("Z", "z"):
        off = (int(tz[1:3]) * 60 + int(tz[4:6])) * 60 * (1 if tz[0] == "+" else -1)
    dt = datetime.datetime(y, mo, d, hh, mi, ss, tzinfo=datetime.timezone.utc)
    return dt.timestamp() - off + frac


def job_id(n):
    return "%0*d" % (ID_DIGITS, int(n))


def last_state(doc):
    states = doc.get("States") if isinstance(doc, dict) else None
    if isinstance(states, list) and states and isinstance(states[-1], dict):
        return states[-1].get("State")
    return None


class Queue:
    """The queue's keys under a prefix, in the single or the split layout."""

    def __init__(self, etcd, prefix="/", layout="single"):
        self.etcd = etcd
        self.prefix = prefix
        self.layout = layout

    def dir(self, state):
        """The directory a job in `state` lives in."""
        if self.layout == "single":
            return self.prefix + "jobs/"
        return self.prefix + {"QUEUED": "new/", "STARTED": "running/",
                              "FINISHED": "finished/"}[state]

    def worker_key(self, name):
        return self.prefix + "workers/" + name

    def submit(self, config="", function=None, extra=None):
        """Allocates the next id by CAS on `<P>seq/jobs` and puts the QUEUED
        document in the same transaction; returns the id."""
        seq = self.prefix + "seq/jobs"
        doc = {"Container": {"Config": config},
               "Fileset": {"Input": {"Name": "in", "Patterns": []},
                           "Output": {"Name": "out", "Patterns": []}},
               "States": [{"State": "QUEUED", "Step": "", "Date": now()}]}
        if function is not None:
            doc["Function"] = function
        doc.update(extra or {})
        while True:
            kv = self.etcd.get(seq)
            last = int(kv.raw) if kv else 0
            jid = job_id(last + 1)
            cmp = same_mod(seq, kv.mod_revision) if kv else absent(seq)
            ok, _ = self.etcd.txn([cmp], [put_op(seq, str(last + 1)),
                                          put_op(self.dir("QUEUED") + jid, dump(doc))])
            if ok:
                return jid

    def jobs(self):
        """{id: document or raw bytes} of every job in every directory."""
        out = {}
        dirs = ["jobs/"] if self.layout == "single" else ["new/", "running/", "finished/"]
        for d in dirs:
            kvs, _, _ = self.etcd.range(self.prefix + d, prefix_end(self.prefix + d))
            for kv in kvs:
                doc = kv.json()
                out[kv.key[len(self.prefix + d):]] = doc if doc is not None else kv.raw
        return out

    def job(self, jid):
        """(KV, document) of a job wherever it is, or (None, None)."""
        jid = job_id(jid)
        for state in ("QUEUED", "STARTED", "FINISHED"):
            kv = self.etcd.get(self.dir(state) + jid)
            if kv:
                return kv, kv.json()
        return None, None

    def workers(self):
        kvs, _, _ = self.etcd.range(self.prefix + "workers/", prefix_end(self.prefix + "workers/"))
        return kvs

    def move(self, jid, old_state, old_rev, new_state, doc, also=(), also_cmp=()):
        """The job rewritten (moved between directories in the split layout),
        fenced on its revision: (succeeded, revision)."""
        src, dst = self.dir(old_state) + jid, self.dir(new_state) + jid
        ops = [put_op(dst, dump(doc))]
        if src != dst:
            ops.insert(0, delete_op(src))
        return self.etcd.txn([same_mod(src, old_rev)] + list(also_cmp), ops + list(also))

    def harvest(self, harvest_after, skip=()):
        """The seed's harvest: every ALIVE worker whose Heartbeat is older than
        harvest_after is set DEAD and its unfinished job put back to QUEUED, in
        one transaction on both revisions. Returns the names harvested."""
        done = []
        for wkv in self.workers():
            w = wkv.json()
            if w is None or w.get("Status") != "ALIVE" or wkv.key in skip:
                continue
            beat = parse_time(w.get("Heartbeat"))
            if beat is not None and time.time() - beat <= harvest_after:
                continue
            name = w.get("Name") or wkv.key.rsplit("/", 1)[-1]
            dead = dict(w, Status="DEAD")
            ops, cmps = [put_op(wkv.key, dump(dead))], [same_mod(wkv.key, wkv.mod_revision)]
            jkv, jdoc, jid = None, None, None
            if w.get("Job") not in (None, ""):
                try:
                    jid = job_id(w["Job"])
                except (TypeError, ValueError):
                    jid = None
            if jid:
                jkv, jdoc = self.job(jid)
            state = last_state(jdoc)
            # Only a job this worker still owns (not one harvested and taken since).
            owned = jdoc is not None and jdoc.get("Owner") in (name, wkv.key.rsplit("/", 1)[-1])
            if jkv is not None and owned and state not in ("FINISHED", "QUEUED"):
                requeued = dict(jdoc)
                requeued["States"] = list(jdoc["States"]) + [{
                    "State": "QUEUED", "Step": "harvested: worker %s lost" % name,
                    "Date": now()}]
                requeued["Owner"] = ""
                ok, _ = self.move(jid, state, jkv.mod_revision, "QUEUED", requeued,
                                  also=ops, also_cmp=cmps)
            else:
                ok, _ = self.etcd.txn(cmps, ops)
            if ok:
                done.append(name)
        return done


class Fenced(Exception):
    """A write of a claimed job failed its revision check: the job was
    taken away (harvested)."""


class Worker:
    """The seed's worker lifecycle: list jobs, CAS the first QUEUED one to
    STARTED (Owner set, and the worker entry's Job in the same transaction),
    run it, append FINISHED with the Result; heartbeat the worker entry and
    now and then harvest stale workers.

    run(worker, jid, doc) -> (status, info); it may call worker.step(text)."""

    def __init__(self, queue, name, run, harvest_after=60.0, harvest=True, log=None):
        self.q = queue
        self.etcd = queue.etcd
        self.name = name
        self.key = queue.worker_key(name)
        self.job_run = run
        self.harvest_after = harvest_after
        self.harvest_on = harvest
        self.log = log
        self.lock = threading.Lock()  # the worker entry and its revision
        self.doc = {"Name": name, "InstanceId": name, "PrivateIp": "127.0.0.1",
                    "PublicIp": "127.0.0.1", "Job": "", "Heartbeat": now(),
                    "Stats": {"Cpu": 0.0, "Mem": 0}, "Status": "ALIVE"}
        self.wrev = 0
        self.dead = False
        self.stopping = False
        self.wake = threading.Event()
        self.cursor = queue.dir("QUEUED")
        self.current = None  # (jid, state, revision of the last own write)
        self.done = 0
        self.claim_latency = []  # seconds from the job's QUEUED Date to its claim

    def _logline(self, line):
        if self.log:
            with open(self.log, "a") as f:
                f.write(line + "\n")

    def register(self):
        with self.lock:
            self.wrev = self.etcd.put(self.key, dump(self.doc))

    def _put_self(self, **changes):
        """The worker entry rewritten on its own revision (caller holds lock):
        False if someone else (a harvester) changed it."""
        doc = dict(self.doc, **changes)
        ok, rev = self.etcd.txn([same_mod(self.key, self.wrev)], [put_op(self.key, dump(doc))])
        if ok:
            self.doc, self.wrev = doc, rev
        return ok

    def heartbeat(self):
        with self.lock:
            if self.dead:
                return
            if not self._put_self(Heartbeat=now(), Stats=self._stats()):
                kv = self.etcd.get(self.key)
                w = kv.json() if kv else None
                if w is None or w.get("Status") == "DEAD":
                    self.dead = True
                    self._logline("harvested %s" % self.name)

    def _stats(self):
        t = os.times()
        return {"Cpu": round(t.user + t.system, 2), "Mem": 0}

    def _heartbeats(self):
        while not self.stopping and not self.dead:
            time.sleep(self.harvest_after / 3.0)
            try:
                self.heartbeat()
                if self.harvest_on:
                    for n in self.q.harvest(self.harvest_after, skip=(self.key,)):
                        self._logline("harvest %s" % n)
            except EtcdError as e:
                print("etcdqueue %s: %s" % (self.name, e), file=sys.stderr, flush=True)

    def _watch(self):
        d = self.q.dir("QUEUED")

        def ev(kind, kv):
            # Only a job becoming QUEUED is worth a new listing.
            if kind != "DELETE" and last_state(kv.json()) == "QUEUED":
                self.wake.set()
        while not self.stopping and not self.dead:
            try:
                _, _, rev = self.etcd.range(d, limit=1)
                self.etcd.watch(d, prefix_end(d), rev + 1, ev, lambda: self.stopping or self.dead)
            except (EtcdError, OSError, ValueError):
                time.sleep(0.2)
            self.wake.set()

    def claim(self):
        """The first QUEUED job, CAS'd to STARTED: (jid, doc) or None."""
        d = self.q.dir("QUEUED")
        start, end = self.cursor, prefix_end(d)
        moving = True  # the cursor follows a prefix of FINISHED jobs
        while True:
            kvs, more, _ = self.etcd.range(start, end, limit=64)
            for kv in kvs:
                doc = kv.json()
                state = last_state(doc)
                if moving and state == "FINISHED" and self.q.layout == "single":
                    self.cursor = kv.key + "\0"
                    continue
                moving = False
                if state != "QUEUED":
                    continue
                jid = kv.key[len(d):]
                started = dict(doc, Owner=self.name)
                started["States"] = list(doc["States"]) + [
                    {"State": "STARTED", "Step": "", "Date": now()}]
                with self.lock:
                    if self.dead:
                        return None
                    wdoc = dict(self.doc, Job=jid, Heartbeat=now())
                    ok, rev = self.q.move(jid, "QUEUED", kv.mod_revision, "STARTED", started,
                                          also=[put_op(self.key, dump(wdoc))],
                                          also_cmp=[same_mod(self.key, self.wrev)])
                    if ok:
                        self.doc, self.wrev = wdoc, rev
                if ok:
                    queued = parse_time(doc["States"][-1].get("Date"))
                    if queued is not None:
                        self.claim_latency.append(time.time() - queued)
                    self.current = [jid, "STARTED", rev, started]
                    return jid, started
                # Another worker got it (or our entry changed): the next one.
            if not more or not kvs:
                return None
            start = kvs[-1].key + "\0"

    def step(self, text):
        """The running job's Step, fenced on our last write of it."""
        jid, state, rev, doc = self.current
        doc = dict(doc)
        doc["States"] = list(doc["States"][:-1]) + [dict(doc["States"][-1], Step=text)]
        ok, new = self.q.move(jid, state, rev, state, doc)
        if not ok:
            raise Fenced(jid)
        self.current = [jid, state, new, doc]

    def finish(self, status, info):
        jid, state, rev, doc = self.current
        doc = dict(doc, Result={"Status": status, "Info": info})
        doc["States"] = list(doc["States"]) + [{"State": "FINISHED", "Step": "", "Date": now()}]
        with self.lock:
            wdoc = dict(self.doc, Job="")
            ok, new = self.q.move(jid, state, rev, "FINISHED", doc,
                                  also=[put_op(self.key, dump(wdoc))],
                                  also_cmp=[same_mod(self.key, self.wrev)])
            if ok:
                self.doc, self.wrev = wdoc, new
            elif not self.dead:
                # Our entry may have moved on (a heartbeat race): the job alone.
                ok, new = self.q.move(jid, state, rev, "FINISHED", doc)
        self.current = None
        if not ok:
            raise Fenced(jid)

    def run_once(self):
        """Claims and runs one job: its id, or None when none was QUEUED."""
        got = self.claim()
        if got is None:
            return None
        jid, doc = got
        self._logline("run %s %s" % (jid, self.name))
        try:
            status, info = self.job_run(self, jid, doc)
        except Fenced:
            status, info = None, None
        except Exception as e:  # noqa: BLE001 - the job's own failure
            status, info = "FAILURE", "error: %s" % e
        self._finish_retrying(jid, status, info)
        return jid

    def _finish_retrying(self, jid, status, info):
        """FINISHED written, through etcd errors (an answer lost to a
        restart: the retry is fenced if the first write went through)."""
        deadline = time.monotonic() + 120
        while True:
            try:
                if status is None:
                    raise Fenced(jid)
                self.finish(status, info)
                self._logline("finished %s" % jid)
            except Fenced:
                self.current = None
                self._logline("fenced %s" % jid)
            except EtcdError as e:
                if time.monotonic() > deadline:
                    raise
                print("etcdqueue %s: %s (retrying)" % (self.name, e), file=sys.stderr, flush=True)
                time.sleep(0.2)
                continue
            self.done += 1
            return

    def recover(self):
        """After an etcd error: a job our entry names, still STARTED and ours
        (a claim whose answer was lost), is run now."""
        kv = self.etcd.get(self.key)
        w = kv.json() if kv else None
        if w is None or w.get("Status") != "ALIVE" or not w.get("Job"):
            return
        with self.lock:
            self.doc, self.wrev = w, kv.mod_revision
        jid = job_id(w["Job"])
        jkv, doc = self.q.job(jid)
        if jkv is None or doc.get("Owner") != self.name or last_state(doc) != "STARTED":
            return
        self.current = [jid, "STARTED", jkv.mod_revision, doc]
        self._logline("run %s %s" % (jid, self.name))
        try:
            status, info = self.job_run(self, jid, doc)
        except Fenced:
            status, info = None, None
        except Exception as e:  # noqa: BLE001 - the job's own failure
            status, info = "FAILURE", "error: %s" % e
        self._finish_retrying(jid, status, info)

    def run(self, count=0, idle_exit=None):
        """The worker loop, with its heartbeat and watch threads."""
        self.register()
        threads = [threading.Thread(target=self._heartbeats, daemon=True),
                   threading.Thread(target=self._watch, daemon=True)]
        for t in threads:
            t.start()
        idle_since = time.monotonic()
        try:
            while not self.dead and not self.stopping and (not count or self.done < count):
                self.wake.clear()
                try:
                    jid = self.run_once()
                except EtcdError as e:
                    print("etcdqueue %s: %s" % (self.name, e), file=sys.stderr, flush=True)
                    time.sleep(0.2)
                    try:
                        self.recover()
                    except EtcdError:
                        pass
                    continue
                if jid is None:
                    if idle_exit is not None and time.monotonic() - idle_since > idle_exit:
                        break
                    self.wake.wait(1.0)
                else:
                    idle_since = time.monotonic()
        finally:
            self.stopping = True


def mode_run(mode):
    """The CLI worker's job behaviours (see the module's text)."""
    def run(worker, jid, doc):
        cfg = str((doc.get("Container") or {}).get("Config", ""))
        if mode == "sleep":
            time.sleep(min(float(cfg or 0), 60.0))
            return "SUCCESS", cfg
        if mode == "fail":
            return "FAILURE", "boom:" + cfg
        if mode == "upper":
            return "SUCCESS", cfg.upper()
        if mode == "steps":
            worker.step("1/3")
            time.sleep(0.2)
            worker.step("2/3")
            return "SUCCESS", cfg
        return "SUCCESS", cfg
    return run


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("url")
    ap.add_argument("--prefix", default="/")
    ap.add_argument("--layout", default="single", choices=("single", "split"))
    ap.add_argument("--user")
    ap.add_argument("--password", default=os.environ.get("ETCDQUEUE_PASSWORD"))
    ap.add_argument("--ca")
    ap.add_argument("--cert")
    ap.add_argument("--key")
    sub = ap.add_subparsers(dest="cmd", required=True)
    s = sub.add_parser("submit")
    s.add_argument("--function")
    s.add_argument("--config", default="")
    s.add_argument("--count", type=int, default=1)
    w = sub.add_parser("worker")
    w.add_argument("name")
    w.add_argument("mode", choices=("echo", "upper", "sleep", "fail", "steps"))
    w.add_argument("--harvest-after", type=float, default=60.0)
    w.add_argument("--log")
    w.add_argument("--count", type=int, default=0)
    w.add_argument("--no-harvest", action="store_true")
    hv = sub.add_parser("harvest")
    hv.add_argument("--harvest-after", type=float, default=60.0)
    sh = sub.add_parser("show")
    sh.add_argument("id")
    a = ap.parse_args()
    q = Queue(Etcd(a.url, user=a.user, password=a.password, ca=a.ca, cert=a.cert, key=a.key),
              a.prefix, a.layout)
    if a.cmd == "submit":
        for _ in range(a.count):
            print(q.submit(a.config, a.function), flush=True)
    elif a.cmd == "worker":
        wk = Worker(q, a.name, mode_run(a.mode), a.harvest_after, not a.no_harvest, a.log)
        wk.run(a.count)
    elif a.cmd == "harvest":
        for n in q.harvest(a.harvest_after):
            print(n)
    elif a.cmd == "show":
        _, doc = q.job(a.id)
        print(json.dumps(doc, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
