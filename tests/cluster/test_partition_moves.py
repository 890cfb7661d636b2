#!/usr/bin/env python3
"""The cluster suite's tests of partitions that move under load: an owner
killed, a node joining, a node stopping (SIGTERM), an owner frozen
(SIGSTOP), and a seeded chaos run of all of these. Every acknowledged job
must be done, and none run twice except where a move cut a run off. Run
by test_cluster.py; the partitioned-node helpers are test_partitions'.
"""

import os
import random
import signal
import sys
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(ROOT, "tests", "interop"))

import harness as h  # noqa: E402
from harness import check, check_eq  # noqa: E402
from test_cluster import grab, raw_worker, submit_bg, with_cluster, work_jobs  # noqa: E402
from test_partitions import PARTS, functions_on, owners, shared_by, start  # noqa: E402


class Load:
    """Background jobs with unique ids through every live node, and workers
    on every node, until stopped; every acknowledged id must be done."""

    def __init__(self, cl, funcs):
        self.cl, self.funcs = cl, funcs
        self.acked, self.done, self.lock = set(), {}, threading.Lock()
        self.refused = []
        # Every run: [unique, started, completion sent (None if cut off),
        # the node its worker was connected to].
        self.runs = []
        self.stop = threading.Event()
        # Set once the submitters are done: no acknowledgement comes after
        # it (a submission may wait for its owner up to 15 s), so workers
        # may stop when nothing acknowledged is missing.
        self.submitted = threading.Event()
        self.submitters = [threading.Thread(target=self.submit, args=(i,), daemon=True)
                           for i in range(2)]
        # Foreground jobs, one at a time per client: each created one must
        # end in WORK_COMPLETE.
        self.fg_done, self.fg_failed = 0, []
        self.submitters += [threading.Thread(target=self.submit_fg, args=(i,), daemon=True)
                            for i in range(2)]
        self.threads = self.submitters + [threading.Thread(target=self.work, args=(i,),
                                                           daemon=True) for i in range(3)]

    def ports(self):
        return [n.port for n in list(self.cl.nodes.values())]

    def submitting(self, k, one):
        """Calls one(conn, i) for i = 1, 2, ... until stopped, on a
        connection to each live node in turn (a new one when it breaks)."""
        i = 0
        while not self.stop.is_set():
            try:
                c = h.Conn(self.ports()[(k + i) % len(self.ports())], timeout=5)
            except (OSError, ZeroDivisionError):
                time.sleep(0.05)
                continue
            try:
                while not self.stop.is_set():
                    i += 1
                    one(c, i)
            except (OSError, h.TestFailure):
                time.sleep(0.05)
            finally:
                c.close()

    def submit(self, k):
        def one(c, i):
            unique = "s%d-%d" % (k, i)
            c.send_pkt(h.SUBMIT_JOB_BG, self.funcs[i % len(self.funcs)], unique, unique)
            _, t, body = c.read_pkt(timeout=5)
            with self.lock:
                if t == h.JOB_CREATED:
                    self.acked.add(unique)
                else:
                    self.refused.append(body)
            time.sleep(0.002)
        self.submitting(k, one)

    def submit_fg(self, k):
        def one(c, i):
            unique = "fg%d-%d" % (k, i)
            c.send_pkt(h.SUBMIT_JOB, self.funcs[i % len(self.funcs)], unique, unique)
            _, t, body = c.read_pkt(timeout=5)
            if t != h.JOB_CREATED:
                with self.lock:
                    self.refused.append(body)
                return
            handle = body
            while True:
                _, t, body = c.read_pkt(timeout=30)
                if t in (h.WORK_COMPLETE, h.WORK_FAIL, h.WORK_EXCEPTION):
                    break
            with self.lock:
                if t == h.WORK_COMPLETE and body.split(b"\0")[0] == handle:
                    self.fg_done += 1
                else:
                    self.fg_failed.append((unique, t, body))
        self.submitting(k, one)

    def work(self, k):
        while not self.submitted.is_set() or self.missing():
            try:
                nodes = list(self.cl.nodes.items())
                name, node = nodes[k % len(nodes)]
                w = raw_worker(node.port, *self.funcs)
            except (OSError, h.TestFailure, ZeroDivisionError):
                time.sleep(0.05)
                continue
            def one(job, name=name):
                run = [job[2].decode(), time.monotonic(), None, name]
                with self.lock:
                    u = run[0]
                    self.done[u] = self.done.get(u, 0) + 1
                    self.runs.append(run)
                w.send_pkt(h.WORK_COMPLETE, job[0], "")
                run[2] = time.monotonic()
            try:
                work_jobs(w, lambda: not self.submitted.is_set() or self.missing(), one)
            except (OSError, h.TestFailure):
                pass
            finally:
                w.close()

    def missing(self):
        with self.lock:
            return self.acked - set(self.done)

    def __enter__(self):
        for t in self.threads:
            t.start()
        return self

    def finish(self, timeout):
        self.stop.set()
        for t in self.submitters:
            t.join(timeout=30)
        self.submitted.set()
        try:
            h.wait_for(lambda: not self.missing(), timeout, "every acknowledged job done")
        except h.TestFailure:
            gone = sorted(self.missing())[:5]
            rows = self.cl.pg.sql("SELECT id, function, unique_id, partition FROM gearshift_jobs "
                                  "WHERE convert_from(unique_id, 'UTF8') IN (%s)"
                                  % ",".join("'%s'" % u for u in gone))
            # What the cluster says of them, and of its workers.
            said = []
            for n, node in list(self.cl.nodes.items()):
                try:
                    said.append("%s status: %r" % (n, h.admin(node.port, "status")))
                    said.append("%s workers: %r" % (n, h.admin(node.port, "workers")))
                except (OSError, h.TestFailure) as e:
                    said.append("%s: %s" % (n, e))
            raise h.TestFailure("acknowledged jobs never done: %s; stored as %r\n%s"
                                % (gone, rows, "\n".join(said)))
        with self.lock:
            return len(self.acked), sum(1 for n in self.done.values() if n > 1)

    def __exit__(self, *exc):
        self.stop.set()
        self.submitted.set()
        for t in self.threads:
            t.join(timeout=15)


@with_cluster
def test_kill_an_owner_under_load(cl):
    start(cl, ["a", "b", "c"])
    funcs = [f for fs in functions_on(cl, 2, prefix="kill").values() for f in fs]
    with Load(cl, funcs) as load:
        h.wait_for(lambda: len(load.done) > 100, 30, "jobs flowing")
        cl.kill("c")
        shared_by(cl, ["a", "b"], timeout=20)
        before = len(load.acked)
        h.wait_for(lambda: len(load.acked) > before + 100, 30, "jobs flowing after the kill")
        acked, twice = load.finish(60)
    print("   %d acknowledged, %d run more than once, %d refused %r"
          % (acked, twice, len(load.refused), load.refused[:3]), flush=True)
    # A second run only for jobs whose first was cut off with its node.
    check(twice <= 10, "few jobs run twice: %d" % twice)


@with_cluster
def test_join_takes_a_share(cl):
    start(cl, ["a", "b"])
    funcs = [f for fs in functions_on(cl, 3, prefix="join").values() for f in fs]
    with Load(cl, funcs) as load:
        h.wait_for(lambda: len(load.done) > 100, 30, "jobs flowing")
        cl.start("c", extra="--partitioned")
        shared_by(cl, ["a", "b", "c"], timeout=30)
        before = len(load.done)
        h.wait_for(lambda: len(load.done) > before + 100, 30, "jobs flowing after the join")
        acked, twice = load.finish(60)
    print("   %d acknowledged, %d run more than once, %d refused %r, %d foreground done"
          % (acked, twice, len(load.refused), load.refused[:3], load.fg_done), flush=True)
    planned_move_checks(load, twice)


def planned_move_checks(load, twice):
    """A move on purpose runs nothing twice, and every submission meanwhile
    waits for the new owner: none is refused."""
    check_eq(twice, 0, "jobs run twice after a planned move")
    check_eq(load.refused, [], "submissions refused during a planned move")
    check_eq(load.fg_failed, [], "foreground jobs failed by a planned move")
    check(load.fg_done > 0, "foreground jobs done")


@with_cluster
def test_stopping_node_hands_over(cl):
    start(cl, ["a", "b", "c"])
    funcs = [f for fs in functions_on(cl, 2, prefix="term").values() for f in fs]
    with Load(cl, funcs) as load:
        h.wait_for(lambda: len(load.done) > 100, 30, "jobs flowing")
        t0 = time.monotonic()
        cl.nodes["c"].stop()
        del cl.nodes["c"]
        shared_by(cl, ["a", "b"], timeout=20)
        took = time.monotonic() - t0
        acked, twice = load.finish(60)
    print("   handed over in %.1f s; %d acknowledged, %d run more than once, %d refused %r, "
          "%d foreground done" % (took, acked, twice, len(load.refused), load.refused[:3],
                                  load.fg_done), flush=True)
    planned_move_checks(load, twice)


class Workers:
    """Raw workers, one per port, doing `funcs` until stopped (reconnecting
    when their connection breaks); records every run as [unique, node,
    started, completion sent]."""

    def __init__(self, cl, nodes, funcs, pause=0.0):
        self.cl, self.funcs, self.pause = cl, funcs, pause
        self.runs, self.lock, self.stop = [], threading.Lock(), threading.Event()
        self.threads = [threading.Thread(target=self.work, args=(n,), daemon=True)
                        for n in nodes]
        for t in self.threads:
            t.start()

    def work(self, node):
        while not self.stop.is_set():
            if not self.cl.nodes:  # the cluster was stopped (a failed test)
                return
            try:
                w = raw_worker(self.cl.nodes[node].port, *self.funcs)
            except (OSError, h.TestFailure, KeyError):
                time.sleep(0.05)
                continue
            def one(job):
                run = [job[2].decode(), node, time.monotonic(), None]
                with self.lock:
                    self.runs.append(run)
                time.sleep(self.pause)
                w.send_pkt(h.WORK_COMPLETE, job[0], "")
                run[3] = time.monotonic()
            try:
                work_jobs(w, lambda: not self.stop.is_set(), one, nap=0.2)
            except (OSError, h.TestFailure):
                pass
            finally:
                w.close()

    def done(self):
        with self.lock:
            return {r[0] for r in self.runs if r[3] is not None}

    def count(self):
        out = {}
        with self.lock:
            for r in self.runs:
                out[r[0]] = out.get(r[0], 0) + 1
        return out

    def close(self):
        self.stop.set()
        for t in self.threads:
            t.join(timeout=10)


def epochs(cl):
    return {int(r[0]): (r[1], int(r[2])) for r in
            cl.pg.sql("SELECT partition, node, epoch FROM gearshift_partitions") if r and r[0]}


def stored(cl, unique):
    return int(cl.pg.sql("SELECT count(*) FROM gearshift_jobs "
                         "WHERE convert_from(unique_id, 'UTF8') = '%s'" % unique)[0][0])


def submit_retrying(port, func, unique, timeout=10):
    """A background submission, sent again after an ERROR (an owner change
    not yet seen by the node); the handle."""
    def once():
        c = h.Conn(port)
        try:
            c.send_pkt(h.SUBMIT_JOB_BG, func, unique, unique)
            _, t, body = c.read_pkt(timeout=5)
            return body if t == h.JOB_CREATED else None
        finally:
            c.close()
    return h.wait_for(once, timeout, "%s acknowledged" % unique, interval=0.1)


def freeze_b(cl, held_f, busy_f, workers_during=True):
    """Common to the frozen-owner tests: queued jobs of held_f, one of them
    held by a worker connected to b; queued and running jobs of busy_f,
    done by slow workers on a and c. Returns (acked, busy workers, the
    worker on b, the held job)."""
    busy = Workers(cl, ["a", "c"], [busy_f], pause=0.05)
    held = ["held-%d" % i for i in range(10)]
    for u in held:
        submit_bg(cl.nodes["a"].port, held_f, u, u)
    mine = raw_worker(cl.nodes["b"].port, held_f)
    job = grab(mine)
    check(job is not None and job[2] == b"held-0", "the job b hands out: %r" % (job,))
    h.wait_for(lambda: cl.pg.sql("SELECT count(*) FROM gearshift_running r JOIN gearshift_jobs j "
                                 "USING (id) WHERE convert_from(j.unique_id, 'UTF8') = 'held-0'"
                                 )[0][0] == "1", 5, "held-0's start stored")
    acked = set(held)
    for i in range(30):
        u = "busy-%d" % i
        submit_bg(cl.nodes["c"].port, busy_f, u, u)
        acked.add(u)
    h.wait_for(lambda: len(busy.runs) >= 3, 5, "busy jobs running")
    return acked, busy, mine, job


@with_cluster
def test_frozen_owner_fenced_per_partition(cl):
    """Node b is frozen (SIGSTOP) holding queued and running jobs of its
    functions. One timeout later a and c take b's partitions only, each at
    the next epoch (their own keep theirs), replay b's jobs (a run cut off
    is requeued, `worker_lost`) and their workers do them, submitted
    through a or c, while b is still stopped.

    Then b wakes (SIGCONT). Its job server trusted its leases only until
    three quarters of a timeout after its last beat, so it drops what was
    waiting in its sockets (here the completion of the job it had handed
    out: that job stays stored and is done again on a or c); were anything
    to reach its store, the store is fenced on the epochs b no longer
    holds. Its next beat (beat.rs) renews nothing (its leases were taken),
    heartbeats its node row and finds itself live again; its owner server
    restarts on the empty set. The fair share now counts b, so a and c
    give up their surplus (their highest partitions) at their next beats
    and b takes them at the next epoch. Observed: b does not exit; it
    rejoins with a share of 21 or 22 about half a second after waking,
    and serves it (a job of a function b now owns is done). Every job is
    done once, except the run cut off by the freeze (held-0, done again
    on a or c) and busy runs whose completion b never stored (at most one
    per busy worker).

    A submission waiting in b's socket when it wakes is another story:
    see test_frozen_owner_woken_with_a_submission_pending.
    """
    start(cl, ["a", "b", "c"])
    by_node = functions_on(cl, 2, prefix="frz")
    held_f, busy_f = by_node["b"]
    before = epochs(cl)
    acked, busy, mine, job = freeze_b(cl, held_f, busy_f)
    b = cl.nodes["b"]
    os.kill(b.pid, signal.SIGSTOP)
    frozen = time.monotonic()
    try:
        # Waiting in b's socket: held-0's completion.
        mine.send_pkt(h.WORK_COMPLETE, job[0], "")
        h.wait_for(lambda: set(owners(cl).values()) == {"a", "c"} and len(owners(cl)) == PARTS,
                   cl.timeout_ms / 1000 + 5, "a and c to take b's partitions")
        took = time.monotonic() - frozen
        check(took < cl.timeout_ms / 1000 + 3, "took over after %.1f s" % took)
        after = epochs(cl)
        for p, (node, epoch) in before.items():
            if node == "b":
                check(after[p][0] in ("a", "c") and after[p][1] > epoch,
                      "b's partition %d moved at a new epoch: %r -> %r" % (p, before[p], after[p]))
            else:
                check_eq(after[p], (node, epoch), "%s's partition %d" % (node, p))
        # Submitted through a and c while b sleeps; done by their workers.
        for i in range(10):
            u = "during-%d" % i
            submit_retrying(cl.nodes["a" if i % 2 else "c"].port, busy_f, u)
            acked.add(u)
        h.wait_for(lambda: {u for u in acked if u.startswith(("busy", "during"))} <= busy.done(),
                   20, "busy_f's jobs done by a's and c's workers while b is stopped")
        check_eq(stored(cl, "held-0"), 1, "held-0 still stored (its completion was never stored)")
    finally:
        os.kill(b.pid, signal.SIGCONT)
    woke = time.monotonic()
    # b rejoins and gets its share back.
    shared_by(cl, ["a", "b", "c"], timeout=20)
    rejoined = time.monotonic() - woke
    check(b.alive(), "b is still running")
    # b's late completion of held-0 never reached the store: held-0 is
    # still queued (nobody on a or c does held_f yet).
    check_eq(stored(cl, "held-0"), 1, "held-0 after b woke (b's completion is fenced)")
    mine.close()
    # b serves its new share: a job of a function it now owns is done.
    fresh = functions_on(cl, 1, prefix="back")["b"][0]
    back = Workers(cl, ["c"], [fresh])
    t0 = time.monotonic()
    try:
        submit_retrying(cl.nodes["a"].port, fresh, "back")
        h.wait_for(lambda: "back" in back.done(), 5, "a job of b's new share done")
    finally:
        back.close()
    served = time.monotonic() - t0
    # Now held_f's jobs are done on a and c (b owns none of it... or may:
    # wherever held_f lives now, workers on a and c do it).
    rest = Workers(cl, ["a", "c"], [held_f])
    try:
        h.wait_for(lambda: acked <= busy.done() | rest.done(), 30, "every acknowledged job done")
    finally:
        busy.close()
        rest.close()
    runs = busy.count()
    for u, n in rest.count().items():
        runs[u] = runs.get(u, 0) + n
    check_eq(runs.get("held-0"), 1, "held-0 run again once, on a or c")
    check(all(r[1] in ("a", "c") for r in busy.runs + rest.runs), "runs only on a and c")
    again = sorted(u for u, n in runs.items() if n > 1)
    # A busy run cut off by the freeze runs again: one per worker at most.
    check(len(again) <= 2 and all(runs[u] == 2 and u.startswith("busy") for u in again),
          "jobs run again: %r" % {u: runs[u] for u in again})
    check(not set(runs) - acked, "runs of jobs never submitted: %r" % (set(runs) - acked))
    h.wait_for(lambda: cl.pg.sql("SELECT count(*) FROM gearshift_jobs")[0][0] == "0", 10,
               "the store to empty")
    print("   taken over in %.1f s; b rejoined %.1f s after waking and served its share "
          "%.1f s later; run again: %r" % (took, rejoined, served, again), flush=True)


@with_cluster
def test_frozen_owner_woken_with_a_submission_pending(cl):
    """As above, but a client's SUBMIT_JOB_BG is waiting in b's socket when
    b wakes. b's hub, no longer trusting its leases, is fenced and drops
    every effect, the submission's store write included. It used to wait
    for that write in its graceful stop until it was aborted 10 s later,
    while b already owned a new share it did not serve (a fenced hub now
    waits for nothing).

    Asserted: the waiting client gets an answer (ERROR, JOB_CREATED, or the
    connection closed) within two timeouts of b waking, b serves its new
    share within two timeouts of rejoining, and every acknowledged job is
    done.
    """
    start(cl, ["a", "b", "c"])
    by_node = functions_on(cl, 2, prefix="frz")
    held_f, busy_f = by_node["b"]
    acked, busy, mine, job = freeze_b(cl, held_f, busy_f)
    b = cl.nodes["b"]
    late = h.Conn(b.port)
    os.kill(b.pid, signal.SIGSTOP)
    try:
        mine.send_pkt(h.WORK_COMPLETE, job[0], "")
        late.send_pkt(h.SUBMIT_JOB_BG, held_f, "late", "late")
        h.wait_for(lambda: set(owners(cl).values()) == {"a", "c"} and len(owners(cl)) == PARTS,
                   cl.timeout_ms / 1000 + 5, "a and c to take b's partitions")
    finally:
        os.kill(b.pid, signal.SIGCONT)
    woke = time.monotonic()
    bound = 2 * cl.timeout_ms / 1000
    # b takes its share again, and is asked to serve it at once.
    shared_by(cl, ["a", "b", "c"], timeout=20)
    rejoined = time.monotonic() - woke
    fresh = functions_on(cl, 1, prefix="back")["b"][0]
    back = Workers(cl, ["c"], [fresh])
    t0 = time.monotonic()
    try:
        submit_retrying(cl.nodes["a"].port, fresh, "back", timeout=15)
        h.wait_for(lambda: "back" in back.done(), 15, "a job of b's new share done")
    finally:
        back.close()
    served = time.monotonic() - t0
    # The waiting client's answer: waits well past the bound, to report
    # what happens instead.
    try:
        _, t, body = late.read_pkt(timeout=15)
        answer = h.PACKET_NAMES.get(t, t)
        if t == h.JOB_CREATED:
            acked.add("late")
    except OSError:
        answer = "reset"
    except h.TestFailure as e:
        answer = "closed" if "closed" in str(e) else "nothing"
    answered = time.monotonic() - woke
    late.close()
    mine.close()
    rest = Workers(cl, ["a", "c"], [held_f])
    try:
        h.wait_for(lambda: acked <= busy.done() | rest.done(), 30, "every acknowledged job done")
    finally:
        busy.close()
        rest.close()
    said = [line for line in b.log_text().splitlines()
            if "did not stop in time" in line or "no longer trusted" in line]
    print("   late submission: %s %.1f s after b woke; b rejoined %.1f s after waking and "
          "served its new share %.1f s later; b logged %r"
          % (answer, answered, rejoined, served, said), flush=True)
    check(answer in ("ERROR", "JOB_CREATED", "closed", "reset") and answered < bound,
          "the submission waiting in b's socket: %s %.1f s after b woke (bound %.1f s)"
          % (answer, answered, bound))
    check(served < bound, "b served its new share %.1f s after rejoining (bound %.1f s)"
          % (served, bound))


@with_cluster
def test_seeded_chaos_partitioned(cl):
    """Three or four partitioned nodes under the steady load of Load while
    a seeded sequence (CHAOS_SEED, default random and printed; CHAOS_SECONDS,
    default 40) kills nodes with SIGKILL, stops them with SIGTERM, and
    restarts them under their old name or joins new ones (at most four
    live), never leaving fewer than one live node; or kills one with
    SIGKILL and starts it again at once under the same name (its leases
    not yet expired: the new process renews them at the same epochs); or
    pins one of the load's functions to a partition (`gearshift pin`), or
    unpins it. After each move it
    waits until every partition is owned by a live node.
    Afterwards: every acknowledged job was done (none lost), a job ran
    again only when its earlier run was cut off by a kill (its completion
    unsent, or sent within a second before the kill, or the run started
    before the kill's effects were over: a timeout plus a drain; a join, a
    SIGTERM or a pin runs nothing twice),
    jobs flowed again after every move, and the store ends empty once a
    last worker has done the unacknowledged submissions that were stored.
    """
    import test_pins  # it imports this module
    seed = int(os.environ.get("CHAOS_SEED") or random.randrange(1 << 31))
    seconds = float(os.environ.get("CHAOS_SECONDS", "40"))
    rng = random.Random(seed)
    first = ["a", "b", "c", "d"][:rng.choice((3, 4))]
    print("   chaos seed %d (CHAOS_SEED=%d to repeat), %.0f s, nodes %s"
          % (seed, seed, seconds, ",".join(first)), flush=True)
    start(cl, first)
    funcs = [f for fs in functions_on(cl, 2, prefix="chaos").values() for f in fs]
    timeout = cl.timeout_ms / 1000
    spare = ["e", "f", "g", "h", "i", "j"]
    gone = []  # names that may come back
    moves = []  # (when, what, kind)
    pinned = set()
    with Load(cl, funcs) as load:
        h.wait_for(lambda: len(load.done) > 50, 30, "jobs flowing")
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            time.sleep(rng.uniform(1.0, 3.0))
            live = sorted(cl.nodes)
            kinds = []
            if len(live) >= 2:
                kinds += ["kill", "kill", "term"]
            kinds.append("bounce")  # kill -9 and start again at once, same name
            if len(live) < 4:
                kinds += ["start", "start"]
            kinds.append("pin")
            kind = rng.choice(kinds)
            if kind == "pin":
                f = rng.choice(funcs)
                if f in pinned and rng.random() < 0.5:
                    args = [f, "--unpin"]
                    pinned.discard(f)
                else:
                    args = [f, str(rng.randrange(PARTS))]
                    pinned.add(f)
                moves.append((time.monotonic(), "pin " + " ".join(args), kind))
                test_pins.pin(cl, *args)
            elif kind == "start":
                # With fewer than four live, a name is gone if no spare is left.
                if gone and (rng.random() < 0.6 or not spare):
                    name = gone.pop(rng.randrange(len(gone)))
                else:
                    name = spare.pop(0)
                moves.append((time.monotonic(), "start " + name, kind))
                cl.start(name, extra="--partitioned")
            else:
                victim = rng.choice(live)
                moves.append((time.monotonic(), "%s %s" % (kind, victim), kind))
                if kind in ("kill", "bounce"):
                    cl.kill(victim)
                else:
                    node = cl.nodes.pop(victim)
                    node.stop()
                if kind == "bounce":
                    # Its leases have not expired: it renews them, same epochs.
                    cl.start(victim, extra="--partitioned")
                else:
                    gone.append(victim)
            print("   %5.1f s: %s" % (seconds - (end - time.monotonic()), moves[-1][1]),
                  flush=True)
            # Every partition owned again by a live node within a timeout
            # and a beat or two (a SIGKILL waits for its leases to expire).
            h.wait_for(lambda: len(owners(cl)) == PARTS
                       and set(owners(cl).values()) <= set(cl.nodes),
                       timeout + 10, "every partition owned by a live node after %s"
                       % moves[-1][1])
        shared_by(cl, sorted(cl.nodes), timeout=30)
        before = len(load.done)
        h.wait_for(lambda: len(load.done) > before + 50, 30, "jobs flowing at the end")
        acked, twice = load.finish(60)
    runs = list(load.runs)
    # A job run again: its earlier run was cut off by a kill. Moves on
    # purpose (a join, a SIGTERM, a pin) run nothing twice.
    window = timeout + 4
    kills = [m for m in moves if m[2] in ("kill", "bounce")]
    by_unique = {}
    for u, started, done, _ in runs:
        by_unique.setdefault(u, []).append((started, done))
    for u, rs in by_unique.items():
        rs.sort()
        for started, done in rs[:-1]:
            cut = any(started < k + window and (done is None or done > k - 1.0)
                      for k, _, _ in kills)
            check(cut, "job %s ran again though its run of %.3f-%s was not cut off by a kill "
                  "(moves: %s)" % (u, started, done, [m[:2] for m in moves]))
    again = sum(len(rs) - 1 for rs in by_unique.values())
    check(again <= 10 * len(kills), "%d runs again after %d kills" % (again, len(kills)))
    # Jobs flowed again after every move.
    for k, what, _ in moves:
        after = [d for _, _, d, _ in runs if d is not None and d > k]
        check(after and min(after) - k < timeout + 10,
              "no job done within %.1f s of %s" % (timeout + 10, what))
    # Submissions stored but never acknowledged (their node went away
    # first) are done by a last worker; then the store is empty.
    w = raw_worker(cl.nodes[sorted(cl.nodes)[0]].port, *funcs)
    extra = 0
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        job = grab(w)
        if job is None:
            if cl.pg.sql("SELECT count(*) FROM gearshift_jobs")[0][0] == "0":
                break
            time.sleep(0.2)
            continue
        extra += 1
        w.send_pkt(h.WORK_COMPLETE, job[0], "")
    w.close()
    left = cl.pg.sql("SELECT id, function, unique_id, partition FROM gearshift_jobs LIMIT 5")
    check(cl.pg.sql("SELECT count(*) FROM gearshift_jobs")[0][0] == "0",
          "the store to empty; left: %r" % left)
    print("   %d moves; %d acknowledged, %d runs, %d run again after a kill, %d unacknowledged "
          "done at the end" % (len(moves), acked, len(runs), again, extra), flush=True)

@with_cluster
def test_a_pause_moves_with_its_function(cl):
    """A pause is stored with its function's partition: after the owner
    stops (SIGTERM) and the partition moves, the new owner keeps the
    function paused until it is resumed."""
    start(cl, ["a", "b"])
    f = functions_on(cl, 1, prefix="paused")["b"][0]
    check_eq(h.admin(cl.nodes["a"].port, "pause %s" % f), "OK\r\n", "pause through a")
    handle = submit_bg(cl.nodes["a"].port, f, "", "held")
    cl.nodes["b"].stop()
    del cl.nodes["b"]
    shared_by(cl, ["a"])
    w = raw_worker(cl.nodes["a"].port, f)
    check(grab(w, timeout=2) is None, "the function is still paused on its new owner")
    check_eq(h.admin(cl.nodes["a"].port, "resume %s" % f), "OK\r\n", "resume")
    got = grab(w, timeout=5)
    check(got is not None and got[0] == handle, "the held job after the resume: %r" % (got,))
    w.close()


@with_cluster
def test_a_leader_mode_database_taken_on_by_partitioned_nodes(cl):
    """An upgrade in place: the jobs a leader-mode node stored (no
    partition on their rows) are placed when partitioned nodes open the
    database, and a worker on either node gets each once."""
    cl.start("a", wait_leader=True)
    funcs = ["upgraded%d" % i for i in range(6)]
    handles = sorted(submit_bg(cl.nodes["a"].port, f, "u-" + f, f) for f in funcs)
    check_eq(cl.pg.sql("SELECT count(*) FROM gearshift_jobs WHERE partition IS NULL")[0][0],
             "6", "a leader's rows carry no partition")
    cl.nodes.pop("a").stop()
    start(cl, ["a", "b"])
    check_eq(cl.pg.sql("SELECT count(*) FROM gearshift_jobs WHERE partition IS NULL")[0][0],
             "0", "every row placed")
    w = raw_worker(cl.nodes["b"].port, *funcs)
    got = []
    for _ in funcs:
        job = grab(w, timeout=5)
        check(job is not None, "a job for each function (got %d)" % len(got))
        got.append(job[0])
        w.send_pkt(h.WORK_COMPLETE, job[0], "")
    check_eq(grab(w, timeout=1), None, "nothing more")
    w.close()
    check_eq(sorted(got), handles, "the leader's jobs, under their handles")
    h.wait_for(lambda: cl.pg.sql("SELECT count(*) FROM gearshift_jobs")[0][0] == "0", 10,
               "their ends stored")


TESTS = [test_kill_an_owner_under_load, test_join_takes_a_share, test_stopping_node_hands_over,
         test_frozen_owner_fenced_per_partition, test_frozen_owner_woken_with_a_submission_pending,
         test_seeded_chaos_partitioned, test_a_pause_moves_with_its_function,
         test_a_leader_mode_database_taken_on_by_partitioned_nodes]
