#!/usr/bin/env python3
"""The cluster suite's tests of `gearshift pin`: a pin asked for is moved
by the owner of the function's partition once its running jobs are done,
without restarting any job server; a pin survives its mover's death; and
`--at-once`. Run by test_cluster.py; the partitioned-node helpers are
test_partitions' and test_partition_moves'.
"""

import os
import subprocess
import sys
import time
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(ROOT, "tests", "interop"))

import harness as h  # noqa: E402
from harness import check, check_eq  # noqa: E402
from test_cluster import GEARSHIFT, grab, http_get, raw_worker, submit_bg, with_cluster  # noqa: E402
from test_partitions import PARTS, functions_on, owners, partition_of, shared_by, start  # noqa: E402
from test_partition_moves import submit_retrying  # noqa: E402


def pin(cl, *args, wait="20"):
    """`gearshift pin` against the cluster's database; its output."""
    r = subprocess.run([GEARSHIFT, "pin", "--store", cl.url, "--wait", wait] + list(args),
                       capture_output=True, text=True, timeout=40)
    check_eq(r.returncode, 0, "gearshift pin %s: %s%s" % (" ".join(args), r.stdout, r.stderr))
    return r.stdout


def rows_in(cl, f):
    """The stored jobs of `f`, by partition."""
    rows = cl.pg.sql("SELECT partition, count(*) FROM gearshift_jobs "
                     "WHERE convert_from(function, 'UTF8') = '%s' GROUP BY 1" % f)
    return {int(r[0]): int(r[1]) for r in rows if r and r[0]}


def serve_all(cl, node, f, n):
    """A worker on `node` does `f`'s jobs until `n` are done and no more
    come; their handles, sorted, once their ends are stored."""
    w = raw_worker(cl.nodes[node].port, f)
    got = []
    deadline = time.time() + 20
    while len(got) < n and time.time() < deadline:
        job = grab(w, timeout=2)
        if job is not None:
            got.append(job[0])
            w.send_pkt(h.WORK_COMPLETE, job[0], "")
    check(grab(w, timeout=1) is None, "nothing more after %d jobs of %s" % (len(got), f))
    w.close()
    h.wait_for(lambda: rows_in(cl, f) == {}, 10, "their ends stored: %r" % rows_in(cl, f))
    return sorted(got)


def elsewhere(cl, f, prefix, n=2):
    """Where `f` lives, its owner (the node that moves it), a partition
    another node owns, and the handles of `n` jobs of `f` submitted
    there."""
    own = owners(cl)
    src = partition_of(f)
    mover = own[src]
    dst = next(p for p in sorted(own) if own[p] != mover)
    handles = [submit_bg(cl.nodes["a"].port, f, "%s%d" % (prefix, i), "%s%d" % (prefix, i))
               for i in range(n)]
    return src, mover, dst, handles


@with_cluster
def test_a_pinned_function_moves_with_its_jobs(cl):
    """`gearshift pin` places a function in a partition another node owns.
    The owner of the partition it lives in moves it once its running job
    is done (the pin waits for it meanwhile), and that job's end is stored
    there and it does not run again. The queued jobs move with it, a new
    submission lands in the new partition, and a worker on a third node
    gets every one, once. No node's job server starts again: the third
    node, which holds neither partition, takes the pin in place, and a job
    running there meanwhile is not cut off."""
    start(cl, ["a", "b", "c"])
    own = owners(cl)
    f = "pinned_fn"
    src = partition_of(f)
    dst = next(p for p in sorted(own) if own[p] != own[src])
    third = next(n for n in "abc" if n not in (own[src], own[dst]))
    out = pin(cl, f)
    check("partition %d (its name's hash), owned by node %s" % (src, own[src]) in out, out)
    handles = [submit_bg(cl.nodes["a"].port, f, "old%d" % i, "old%d" % i) for i in range(6)]
    check_eq(rows_in(cl, f), {src: 6}, "stored where the name places them")
    g = functions_on(cl, 1, prefix="held")[third][0]
    submit_bg(cl.nodes[third].port, g, "held", "held")
    holder = raw_worker(cl.nodes[third].port, g)
    held = grab(holder, timeout=5)
    check(held is not None, "the held job runs")
    # A job of the pinned function runs when the pin is asked for.
    runner = raw_worker(cl.nodes[third].port, f)
    running = grab(runner, timeout=5)
    check(running is not None, "a job of the function runs")

    def starts(n):
        text = urllib.request.urlopen("http://127.0.0.1:%d/metrics?scope=node"
                                      % cl.http_port(n), timeout=10).read().decode()
        return [line for line in text.splitlines()
                if line.startswith("gearshift_cluster_owner_starts_total ")]
    before = {n: starts(n) for n in "abc"}

    asking = subprocess.Popen([GEARSHIFT, "pin", "--store", cl.url, f, str(dst)],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    time.sleep(2 * cl.timeout_ms / 1000)
    check(asking.poll() is None, "the pin waits for the running job")
    check_eq(rows_in(cl, f), {src: 6}, "nothing moved while the job runs")
    check("asked: partition %d" % dst in pin(cl, f), "the pin listed as asked for")
    h.wait_for(lambda: http_get(cl.http_port(third), "/api/v1/cluster").get("pins_asked") ==
               [{"function": f, "from": src, "partition": dst, "node": own[src]}], 5,
               "the pin asked for in the cluster view")
    runner.send_pkt(h.WORK_COMPLETE, running[0], "done before the move")
    out, err = asking.communicate(timeout=30)
    check(asking.returncode == 0, "gearshift pin: %s%s" % (out, err))
    check("partition %d -> %d, asked of node %s" % (src, dst, own[src]) in out
          and "moved: partition %d, owned by node %s" % (dst, own[dst]) in out, out)
    handles.remove(running[0])
    check_eq(rows_in(cl, f), {dst: 5}, "moved with the pin, the job done there gone")
    runner.close()
    check("pinned_fn\tpartition %d" % dst in pin(cl), "listed")
    shared_by(cl, ["a", "b", "c"])
    for n in "abc":
        h.wait_for(lambda: http_get(cl.http_port(n), "/api/v1/cluster").get("pins") ==
                   [{"function": f, "partition": dst, "node": owners(cl)[dst]}], 10,
                   "the pin in %s's cluster view" % n)
    handles.append(submit_retrying(cl.nodes["b"].port, f, "new", timeout=20))
    check_eq(rows_in(cl, f), {dst: 6}, "a new submission stored in the new partition")
    # A server started again would first drain (up to 10 s for the held
    # job): this submission would wait, and the start come after the end.
    c = h.Conn(cl.nodes["a"].port)
    c.send_pkt(h.SUBMIT_JOB_BG, g, "meanwhile", "meanwhile")
    _, t, body = c.read_pkt(timeout=3)
    c.close()
    check_eq(t, h.JOB_CREATED, "a submission to node %s's function while its job runs: %r"
             % (third, body))
    holder.send_pkt(h.WORK_COMPLETE, held[0], "done")
    got_next = grab(holder, timeout=5)
    check(got_next is not None and got_next[2] == b"meanwhile",
          "the next job, not the held one again: %r" % (got_next,))
    holder.send_pkt(h.WORK_COMPLETE, got_next[0], "done")
    h.wait_for(lambda: rows_in(cl, g) == {}, 10, "their ends stored")
    holder.close()
    time.sleep(1)
    check_eq({n: starts(n) for n in "abc"}, before, "no node's job server started again")

    check_eq(serve_all(cl, "c", f, 6), sorted(handles),
             "every job, old and new, served once (the one done before the move not again)")

    out = pin(cl, f, "--unpin")
    check("partition %d -> %d" % (dst, src) in out and "moved: partition %d" % src in out, out)
    check_eq(pin(cl, f, str(dst), "--at-once").count("stored rows moved: 0"), 1,
             "moved at once, with no rows")
    pin(cl, f, "--unpin")
    # Between two partitions of one node: its workers keep the function.
    shared_by(cl, ["a", "b", "c"])
    own = owners(cl)
    same = next(p for p in sorted(own) if own[p] == own[src] and p != src)
    w = raw_worker(cl.nodes[third].port, f)
    check(grab(w, timeout=2) is None, "nothing queued")
    out = pin(cl, f, str(same))
    check("moved: partition %d, owned by node %s" % (same, own[src]) in out, out)
    moved = submit_retrying(cl.nodes["a"].port, f, "same node", timeout=20)
    got = grab(w, timeout=5)
    check(got is not None and got[0] == moved, "the worker registered before the pin gets "
          "its job: %r" % (got,))
    w.send_pkt(h.WORK_COMPLETE, got[0], "")
    w.close()
    h.wait_for(lambda: rows_in(cl, f) == {}, 10, "its end stored: %r" % rows_in(cl, f))
    pin(cl, f, "--unpin")
    check("no function is pinned" in pin(cl), "unpinned")
    r = subprocess.run([GEARSHIFT, "pin", "--store", cl.url, f, str(PARTS)],
                       capture_output=True, text=True, timeout=30)
    check(r.returncode == 1 and "past the cluster's 64 partitions" in r.stderr,
          "a partition past the count refused: %r" % (r,))


@with_cluster
def test_a_pin_outlives_the_node_that_was_to_move_it(cl):
    """The owner of a pinned function's partition is killed (SIGKILL)
    while the function's job runs there, the pin asked for and waiting for
    it: the node that takes the partition over requeues the cut-off job as
    lost and moves the function; every job is then served once by a worker
    on another node."""
    start(cl, ["a", "b", "c"])
    own = owners(cl)
    f = "orphan_pin"
    src = partition_of(f)
    victim = own[src]
    dst = next(p for p in sorted(own) if own[p] != victim)
    other = next(n for n in "abc" if n != victim)
    handles = [submit_bg(cl.nodes[other].port, f, "q%d" % i, "q%d" % i) for i in range(3)]
    runner = raw_worker(cl.nodes[other].port, f)
    running = grab(runner, timeout=5)
    check(running is not None, "a job of the function runs")
    out = pin(cl, f, str(dst), wait="0")
    check("asked of node %s" % victim in out, out)
    time.sleep(2 * cl.timeout_ms / 1000)
    check_eq(rows_in(cl, f), {src: 3}, "nothing moved while the job runs")
    cl.kill(victim)
    h.wait_for(lambda: cl.pg.sql("SELECT count(*) FROM gearshift_pin_moves")[0][0] == "0",
               cl.timeout_ms / 1000 + 15, "the pin moved by the partition's next owner")
    check_eq(cl.pg.sql("SELECT partition FROM gearshift_pins "
                       "WHERE convert_from(function, 'UTF8') = '%s'" % f), [[str(dst)]],
             "the pin in force")
    check_eq(rows_in(cl, f), {dst: 3}, "the jobs moved with it, the cut-off one too")
    runner.close()
    check_eq(serve_all(cl, other, f, 3), sorted(handles), "every job once, the cut-off one again")



@with_cluster
def test_a_pin_whose_move_fails_is_moved_once_it_can(cl):
    """The database refuses the move's transaction (a trigger, for the
    test): the owner starts its job server again by the pins as stored,
    serves the function where it was meanwhile, and moves it once the
    database lets it; every job is served once."""
    start(cl, ["a", "b"])
    f = "refused_pin"
    src, mover, dst, handles = elsewhere(cl, f, "r")
    cl.pg.sql("CREATE FUNCTION gs_test_refuse() RETURNS trigger LANGUAGE plpgsql AS "
              "'BEGIN RAISE EXCEPTION ''refused for the test''; END'")
    cl.pg.sql("CREATE TRIGGER gs_test_refuse BEFORE DELETE ON gearshift_pin_moves "
              "FOR EACH ROW EXECUTE FUNCTION gs_test_refuse()")
    pin(cl, f, str(dst), wait="0")
    h.wait_for(lambda: "cannot move a pinned function in place" in cl.nodes[mover].log_text(),
               cl.timeout_ms / 1000 + 10, "the move refused on %s" % mover)
    check_eq(rows_in(cl, f), {src: 2}, "nothing moved")
    check("asked: partition %d" % dst in pin(cl, f), "still asked for")
    handles.append(submit_retrying(cl.nodes["b"].port, f, "meanwhile", timeout=20))
    check_eq(rows_in(cl, f), {src: 3}, "served where it was meanwhile")
    cl.pg.sql("DROP TRIGGER gs_test_refuse ON gearshift_pin_moves")
    h.wait_for(lambda: cl.pg.sql("SELECT count(*) FROM gearshift_pin_moves")[0][0] == "0",
               cl.timeout_ms / 1000 + 15, "the pin moved once the database lets it")
    check_eq(rows_in(cl, f), {dst: 3}, "the jobs moved with it")
    check_eq(serve_all(cl, "a", f, 3), sorted(handles), "every job once")


def lose_the_answer(cl, f, to, mover, wait_event):
    """Asks for `f`'s pin to partition `to` and, once its move's session waits on
    `wait_event` at COMMIT, destroys the mover's socket to PostgreSQL
    (`ss -K`): the owner's answer is lost, the transaction still there."""
    said = "cannot move a pinned function in place"
    before = cl.nodes[mover].log_text().count(said)
    pin(cl, f, str(to), wait="0")

    def committing():
        rows = cl.pg.sql("SELECT client_port FROM pg_stat_activity WHERE wait_event = '%s'"
                         % wait_event)
        return [r[0] for r in rows if r and r[0]]
    ports = h.wait_for(committing, cl.timeout_ms / 1000 + 10, "the move of %s committing" % f)
    check_eq(len(ports), 1, "one move committing")
    r = subprocess.run(["ss", "-K", "-tn", "src", "127.0.0.1", "sport", "=", ":%s" % ports[0]],
                       capture_output=True, text=True)
    check(r.returncode == 0 and ports[0] in r.stdout, "the mover's socket destroyed: %r" % (r,))
    h.wait_for(lambda: cl.nodes[mover].log_text().count(said) > before, 10,
               "the move's answer lost on %s" % mover)


@with_cluster
def test_a_move_whose_answer_is_lost(cl):
    """A move's transaction reaches COMMIT but its answer never reaches
    the owner (its socket to PostgreSQL destroyed by `ss -K` while a
    deferred trigger holds the commit). The owner ends that transaction's
    session before it reads where the function lives, so the pins it
    starts its job server again by are final: a move still running
    is rolled back, the function served where it was and moved later; a
    move already committed (held waiting for a synchronous standby that
    never answers) counts as done. Either way every job is served once,
    from the partition the database says."""
    if os.geteuid() != 0 or subprocess.run(["which", "ss"], capture_output=True).returncode:
        raise h.Skip("destroying a socket with ss -K needs root and iproute2")
    # Commits are local; the trigger's 'syncrep' mode makes the move's
    # commit wait for a standby that does not exist.
    cl.pg.sql("ALTER SYSTEM SET synchronous_standby_names = 'nobody'")
    cl.pg.sql("ALTER SYSTEM SET synchronous_commit = 'local'")
    cl.pg.sql("SELECT pg_reload_conf()")
    cl.pg.sql("CREATE TABLE gs_test_mode (mode text)")
    cl.pg.sql("INSERT INTO gs_test_mode VALUES ('sleep')")
    cl.pg.sql("CREATE FUNCTION gs_test_hold() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN "
              "IF (SELECT mode FROM gs_test_mode) = 'sleep' THEN PERFORM pg_sleep(60); END IF; "
              "IF (SELECT mode FROM gs_test_mode) = 'syncrep' THEN "
              "PERFORM set_config('synchronous_commit', 'on', true); END IF; "
              "RETURN NULL; END $$")
    start(cl, ["a", "b"])
    cl.pg.sql("CREATE CONSTRAINT TRIGGER gs_test_hold AFTER DELETE ON gearshift_pin_moves "
              "DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION gs_test_hold()")

    # Rolled back: the move was still running when its answer was lost.
    f = "lost_answer_pin"
    src, mover, dst, handles = elsewhere(cl, f, "l")
    lose_the_answer(cl, f, dst, mover, "PgSleep")
    cl.pg.sql("UPDATE gs_test_mode SET mode = 'none'")
    handles.append(submit_retrying(cl.nodes[mover].port, f, "meanwhile", timeout=20))
    check_eq(rows_in(cl, f), {src: 3}, "served where it was meanwhile")
    check("asked: partition %d" % dst in pin(cl, f), "still asked for")
    h.wait_for(lambda: cl.pg.sql("SELECT count(*) FROM gearshift_pin_moves")[0][0] == "0",
               cl.timeout_ms / 1000 + 15, "the pin moved later")
    check_eq(rows_in(cl, f), {dst: 3}, "the jobs moved with it")
    check_eq(serve_all(cl, mover, f, 3), sorted(handles), "every job once")

    # Committed: the answer lost after the commit.
    g = "lost_answer_pin_2"
    src, mover, dst, handles = elsewhere(cl, g, "m")
    cl.pg.sql("UPDATE gs_test_mode SET mode = 'syncrep'")
    lose_the_answer(cl, g, dst, mover, "SyncRep")
    cl.pg.sql("UPDATE gs_test_mode SET mode = 'none'")
    check_eq(cl.pg.sql("SELECT count(*) FROM gearshift_pin_moves")[0][0], "0", "the move committed")
    check_eq(rows_in(cl, g), {dst: 2}, "the jobs moved with it")
    handles.append(submit_retrying(cl.nodes[mover].port, g, "after", timeout=20))
    check_eq(rows_in(cl, g), {dst: 3}, "a new submission stored where the pin puts it")
    check_eq(serve_all(cl, mover, g, 3), sorted(handles), "every job once")
    out = pin(cl, g)
    check("partition %d (pinned)" % dst in out and "asked" not in out,
          "pinned, and not asked again: %s" % out)


TESTS = [test_a_pinned_function_moves_with_its_jobs, test_a_pin_outlives_the_node_that_was_to_move_it,
         test_a_pin_whose_move_fails_is_moved_once_it_can, test_a_move_whose_answer_is_lost]
