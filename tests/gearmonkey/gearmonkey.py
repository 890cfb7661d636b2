#!/usr/bin/env python3
"""A GearMonkey client and worker written from the protocol's text (seed 003),
with redis-py. The bridge's tests and perf/gearmonkey_bench.py drive them.

Library: Client(r).run(fn, input, prio, blocking, timeout/scheduled) -> id,
Client.get(fn, id) -> hash; Worker(r, fn, work).run_once()/run().

Command line (one job or one worker per process):
  gearmonkey.py URL client FN INPUT [--prio P] [--blocking] [--timeout S]
                                    [--rollcall] [--at EPOCH]
      prints "ID <id>", and with --blocking "STATUS <status>" and
      "OUTPUT <output>"
  gearmonkey.py URL worker FN MODE [--count N] [--log FILE]
      modes: rev (reverse the input), upper, fail (raise "boom:<input>"),
      progress (update 1/3 then 2/3, 0.3 s apart, return "done:<input>"),
      sleep (sleep float(input) seconds, return "slept:<input>");
      --log appends "<id> <input>" per job taken
"""

import argparse
import sys
import time

import redis

# The seed's worker script: a due entry of the scheduled set, removed.
SCHEDULED_SCRIPT = (
    "local item = redis.call('ZRANGEBYSCORE', KEYS[1], 0, ARGV[1], 'LIMIT', 0, 1); "
    "if (#item > 0) then redis.call('ZREM', KEYS[1], item[1]); "
    "return { KEYS[1],  item[1] }; end")


class RollCallError(Exception):
    """OPT_ROLLCALL found no worker for the function."""


class Client:
    def __init__(self, r):
        self.r = r

    def run(self, fn, data, prio="normal", blocking=False, timeout=30,
            scheduled=None, rollcall=False):
        """Creates the job; returns its id, or (id, hash) when blocking (the
        hash is None when the BRPOP timed out)."""
        if rollcall:
            n = self.r.get("count:%s" % fn)
            try:
                if n is None or int(n) < 1:
                    raise RollCallError("no worker for %s (count %r)" % (fn, n))
            except ValueError:
                raise RollCallError("count:%s is %r" % (fn, n))
        jid = self.r.incr("uid:%s" % fn)
        self.r.hset("job:%s:%d" % (fn, jid), mapping={"status": "idle", "input": data})
        self.r.publish("channel:%s" % fn, "create:%d" % jid)
        if prio == "scheduled":
            self.r.zadd("queue:%s:scheduled" % fn, {str(jid): scheduled})
        else:
            self.r.lpush("queue:%s:%s" % (fn, prio), jid)
        if not blocking:
            return jid
        got = self.r.brpop("lock:%s:%d" % (fn, jid), timeout)
        if got is None:
            return jid, None
        return jid, self.get(fn, jid)

    def get(self, fn, jid):
        return self.r.hgetall("job:%s:%d" % (fn, jid))


class Worker:
    def __init__(self, r, fn, work):
        self.r = r
        self.fn = fn
        self.work = work
        self.sha = r.script_load(SCHEDULED_SCRIPT)
        self.current = None

    def __enter__(self):
        self.r.incr("count:%s" % self.fn)
        return self

    def __exit__(self, *exc):
        self.r.decr("count:%s" % self.fn)

    def take(self, wait=1):
        """One job id, or None after `wait` seconds."""
        try:
            got = self.r.evalsha(self.sha, 1, "queue:%s:scheduled" % self.fn, int(time.time()))
        except redis.exceptions.NoScriptError:
            # A restarted Redis forgot the script: load it again.
            self.sha = self.r.script_load(SCHEDULED_SCRIPT)
            return None
        if got:
            return got[1]
        got = self.r.brpop(["queue:%s:high" % self.fn, "queue:%s:normal" % self.fn,
                            "queue:%s:low" % self.fn], wait)
        return got[1] if got else None

    def update(self, dividend, divisor):
        self.r.hset(self.current, mapping={"status:dividend": dividend,
                                           "status:divisor": divisor})

    def run_once(self, wait=1, log=None):
        """Takes and runs one job; returns its id or None."""
        raw = self.take(wait)
        if raw is None:
            return None
        jid = int(raw)
        key = "job:%s:%d" % (self.fn, jid)
        self.current = key
        self.r.publish("channel:%s" % self.fn, "start:%d" % jid)
        self.r.hset(key, "status", "busy")
        data = self.r.hget(key, "input") or b""
        if log:
            with open(log, "ab") as f:
                f.write(b"%d %s\n" % (jid, data))
        try:
            status, output = "success", self.work(self, data)
        except Exception as e:  # noqa: BLE001 - any error is the job's error
            status, output = "error", str(e)
        retrying(lambda: self.finish(key, jid, status, output))
        return jid

    def finish(self, key, jid, status, output):
        self.r.hset(key, mapping={"status": status, "output": output})
        self.r.expire(key, 90000)
        self.r.publish("channel:%s" % self.fn, "finish:%d" % jid)
        self.r.lpush("lock:%s:%d" % (self.fn, jid), "OK")
        self.r.expire("lock:%s:%d" % (self.fn, jid), 10)


def retrying(step, limit=120):
    """Runs step until Redis answers (a worker outliving a Redis restart)."""
    for _ in range(limit):
        try:
            return step()
        except (redis.ConnectionError, redis.TimeoutError) as e:
            print("gearmonkey: redis: %s; retrying" % e, file=sys.stderr, flush=True)
            time.sleep(0.5)
    return step()


def _progress(w, data):
    w.update(1, 3)
    time.sleep(0.3)
    w.update(2, 3)
    time.sleep(0.3)
    return b"done:" + data


def _fail(w, data):
    raise RuntimeError("boom:" + data.decode("utf-8", "replace"))


def _sleep(w, data):
    time.sleep(min(float(data), 60))
    return b"slept:" + data


MODES = {
    "rev": lambda w, d: d[::-1],
    "upper": lambda w, d: d.upper(),
    "fail": _fail,
    "progress": _progress,
    "sleep": _sleep,
}


def main():
    p = argparse.ArgumentParser()
    p.add_argument("url")
    sub = p.add_subparsers(dest="cmd", required=True)
    c = sub.add_parser("client")
    c.add_argument("fn")
    c.add_argument("input")
    c.add_argument("--prio", default="normal")
    c.add_argument("--blocking", action="store_true")
    c.add_argument("--timeout", type=int, default=30)
    c.add_argument("--rollcall", action="store_true")
    c.add_argument("--at", type=int)
    w = sub.add_parser("worker")
    w.add_argument("fn")
    w.add_argument("mode", choices=sorted(MODES))
    w.add_argument("--count", type=int, default=0)
    w.add_argument("--log")
    a = p.parse_args()
    r = redis.Redis.from_url(a.url)
    if a.cmd == "client":
        prio = "scheduled" if a.at is not None else a.prio
        got = Client(r).run(a.fn, a.input, prio, a.blocking, a.timeout, a.at, a.rollcall)
        if not a.blocking:
            print("ID %d" % got, flush=True)
            return 0
        jid, h = got
        print("ID %d" % jid)
        if h is None:
            print("TIMEOUT")
            return 1
        print("STATUS %s" % h.get(b"status", b"").decode())
        print("OUTPUT %s" % h.get(b"output", b"").decode("utf-8", "replace"), flush=True)
        return 0
    done = 0
    with Worker(r, a.fn, MODES[a.mode]) as wk:
        while a.count == 0 or done < a.count:
            if retrying(lambda: wk.run_once(log=a.log)) is not None:
                done += 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
