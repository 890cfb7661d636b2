"""`gearshift import` against the real gearmand 1.1 libsqlite3, Postgres and
MySQL queues.

Each test fills a queue through a real gearmand (`-q libsqlite3`, or
`-q Postgres` on a throwaway PostgreSQL cluster the test starts on
127.0.0.1), stops it with SIGTERM, imports the queue with `gearshift import`, starts
`gearshift serve` on the imported data directory and checks, with raw
packets, that a worker gets every job gearmand stored: function, unique,
data, priority order, and an epoch job only once it is due. It also checks
what gearmand actually left in the database (its key collisions), that a
second import of the same file is refused without --force, and that an
import into a directory a running server holds is refused. One test
imports into a PostgreSQL store (`--store postgres://...`) instead, and
serves it with `gearshift serve --store`. The MySQL queue lives on a
throwaway MariaDB server (tests/import/mysql_queue.py).

Python 3 stdlib only; reuses tests/interop/harness.py. Every wait is
bounded. Ends with `N passed, N failed, N skipped`.

usage: python3 tests/import/test_import.py [name-substring ...]
  GEARSHIFT  the gearshift binary (default: target/debug/gearshift)
  GEARMAND   the gearmand binary (default: /usr/sbin/gearmand)
  PG_BIN     PostgreSQL's server programs (default: the newest
             /usr/lib/postgresql/*/bin, Debian's postgresql package)
  MARIADBD   MariaDB's server (default: /usr/sbin/mariadbd, Debian's
             mariadb-server package)
"""

import glob
import hashlib
import os
import shutil
import sqlite3
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(ROOT, "tests", "interop"))

import harness as h  # noqa: E402
import mysql_queue  # noqa: E402
from harness import check, check_eq  # noqa: E402

GEARSHIFT = os.environ.get("GEARSHIFT") or os.path.join(ROOT, "target", "debug", "gearshift")
GEARMAND = os.environ.get("GEARMAND") or "/usr/sbin/gearmand"
PREFIX = "H:imp"


def pg_bin():
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin"),
                   key=lambda p: int(p.split("/")[-2]) if p.split("/")[-2].isdigit() else 0)
    return os.environ.get("PG_BIN") or (found[-1] if found else "")


class Postgres:
    """A throwaway PostgreSQL cluster in `tmp`: trust authentication,
    listening on 127.0.0.1 only, on a free port. As root, the server runs as
    the `postgres` user (PostgreSQL refuses root)."""

    def __init__(self, tmp):
        self.bin = pg_bin()
        check(os.access(os.path.join(self.bin, "initdb"), os.X_OK),
              "no PostgreSQL server programs (install Debian's postgresql, or set PG_BIN)")
        self.dir = os.path.join(tmp, "pg")
        self.data = os.path.join(self.dir, "data")
        self.as_user = ["runuser", "-u", "postgres", "--"] if os.geteuid() == 0 else []
        self.port = None

    def _run(self, cmd, timeout=60):
        r = subprocess.run(self.as_user + cmd, capture_output=True, text=True, timeout=timeout)
        check(r.returncode == 0, "%s failed: %s%s" % (cmd[0], r.stdout, r.stderr))
        return r

    def start(self, durable=False):
        """`durable`: PostgreSQL's own fsync (tests turn it off for speed)."""
        os.makedirs(self.dir)
        if self.as_user:
            os.chmod(os.path.dirname(self.dir), 0o755)
            shutil.chown(self.dir, "postgres", "postgres")
        self._run([os.path.join(self.bin, "initdb"), "-D", self.data, "-A", "trust",
                   "-U", "gearshift", "-E", "UTF8"] + ([] if durable else ["--no-sync"]))
        self.port = h.free_port()
        self._run([os.path.join(self.bin, "pg_ctl"), "-D", self.data, "-l",
                   os.path.join(self.dir, "log"), "-w", "-t", "60", "-o",
                   "-p %d -k %s -c listen_addresses=127.0.0.1%s"
                   % (self.port, self.dir, ("" if durable else " -c fsync=off")
                      + (" " + os.environ["PG_OPTS"] if os.environ.get("PG_OPTS") else "")),
                   "start"],
                  timeout=90)
        return self

    def stop(self):
        if self.port is not None:
            subprocess.run(self.as_user + [os.path.join(self.bin, "pg_ctl"), "-D", self.data,
                                           "-m", "immediate", "-w", "stop"],
                           capture_output=True, timeout=60)
            self.port = None

    @property
    def conninfo(self):
        return "host=127.0.0.1 port=%d dbname=postgres user=gearshift" % self.port

    @property
    def url(self):
        """How `gearshift import` names the queue table `queue`."""
        return "postgres://gearshift@127.0.0.1:%d/postgres?table=queue" % self.port

    def store_url(self, db):
        """A `--store` URL for database `db` of this cluster."""
        return "postgres://gearshift@127.0.0.1:%d/%s" % (self.port, db)

    def sql(self, statement, db="postgres"):
        """Rows of `statement`, each a list of column strings."""
        r = subprocess.run([os.path.join(self.bin, "psql"), "-X", "-h", "127.0.0.1", "-p",
                            str(self.port), "-U", "gearshift", "-d", db, "-At",
                            "-F", "|", "-c", statement],
                           capture_output=True, text=True, timeout=30)
        check(r.returncode == 0, "psql failed: %s" % r.stderr)
        return [line.split("|") for line in r.stdout.splitlines()]


def gearmand(db, table=None):
    cmd = ("%s -L 127.0.0.1 -p {port} -t 0 -q libsqlite3 --libsqlite3-db %s --log-file=none"
           % (GEARMAND, db))
    if table:
        cmd += " --libsqlite3-table %s" % table
    return h.Server(cmd, "gearmand").start()


def gearshift_serve(data_dir):
    return h.Server("%s serve -L 127.0.0.1 -p {port} --data-dir %s --job-handle-prefix %s"
                    % (GEARSHIFT, data_dir, PREFIX), "gearshift").start()


def gearshift_import(db, data_dir, *extra):
    return h.run([GEARSHIFT, "import", "--gearmand-sqlite", db, "--data-dir", data_dir,
                  "--job-handle-prefix", PREFIX] + list(extra), timeout=60)


def submit(conn, ptype, func, unique, data, when=None):
    """Submit a background job; return its handle."""
    if when is None:
        conn.send_pkt(ptype, func, unique, data)
    else:
        conn.send_pkt(ptype, func, unique, str(when), data)
    return conn.expect_pkt(h.JOB_CREATED)


def rows(db, table="gearman_queue"):
    con = sqlite3.connect("file:%s?mode=ro" % db, uri=True)
    try:
        return con.execute(
            "SELECT unique_key, function_name, priority, data, typeof(data), when_to_run "
            "FROM %s ORDER BY rowid" % table).fetchall()
    finally:
        con.close()


def digest(path):
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


def file_sizes(d):
    return {n: os.path.getsize(os.path.join(d, n)) for n in sorted(os.listdir(d))}


class Worker:
    """A raw worker: CAN_DO each function, then GRAB_JOB_UNIQ."""

    def __init__(self, port, *funcs):
        self.conn = h.Conn(port)
        for f in funcs:
            self.conn.send_pkt(h.CAN_DO, f)
        self.conn.echo_sync()

    def grab(self):
        """(handle, func, unique, data) or None for NO_JOB."""
        self.conn.send_pkt(h.GRAB_JOB_UNIQ)
        while True:
            _, t, body = self.conn.read_pkt()
            if t == h.NOOP:
                continue
            if t == h.NO_JOB:
                return None
            check(t == h.JOB_ASSIGN_UNIQ, "expected JOB_ASSIGN_UNIQ, got %s %r"
                  % (h.PACKET_NAMES.get(t, t), body))
            handle, func, unique, data = body.split(b"\0", 3)
            return handle, func, unique, data

    def complete(self, handle):
        self.conn.send_pkt(h.WORK_COMPLETE, handle, b"")

    def drain(self):
        """Grab and complete until NO_JOB; return the jobs in order."""
        out = []
        while True:
            job = self.grab()
            if job is None:
                return out
            self.complete(job[0])
            out.append(job)

    def wait_noop(self, timeout):
        self.conn.send_pkt(h.PRE_SLEEP)
        self.conn.expect_pkt(h.NOOP, timeout=timeout)

    def close(self):
        self.conn.close()


def check_served(data_dir, f_jobs):
    """Serves `data_dir`: a worker gets g's one job (`u-g`), then f's jobs
    `f_jobs` ((unique, data) each) in that order, while f's epoch job waits."""
    srv = gearshift_serve(data_dir)
    try:
        g = Worker(srv.port, "g")
        check_eq([(j[1], j[2], j[3]) for j in g.drain()], [(b"g", b"u-g", b"g-data")],
                 "g jobs")
        g.close()
        w = Worker(srv.port, "f")
        check_eq([(j[2], j[3]) for j in w.drain() if j[1] == b"f"], f_jobs,
                 "jobs in priority order, then table order; the epoch job is not due")
        check_eq(h.status(srv.port).get("f", (0,))[0], 1, "the scheduled epoch job waits")
        w.close()
    finally:
        srv.stop()


def handle_number(handle):
    check(handle.startswith(PREFIX.encode() + b":"), "handle %r lacks prefix %s" % (handle, PREFIX))
    return int(handle[len(PREFIX) + 1:])


# --------------------------------------------------------------------------


def test_migration_keeps_every_stored_job(tmp):
    db = os.path.join(tmp, "gearmand.sqlite")
    data_dir = os.path.join(tmp, "data")
    binary = b"\x00bin\x00ary\xff\x00"
    # Far enough ahead that importing and draining the other jobs finishes
    # first, near enough to wait for.
    when = int(time.time()) + 8

    gm = gearmand(db)
    try:
        c = h.Conn(gm.port)
        submit(c, h.SUBMIT_JOB_HIGH_BG, "f", "u-high", b"high")
        norm1 = submit(c, h.SUBMIT_JOB_BG, "f", "u-norm1", b"normal-1")
        submit(c, h.SUBMIT_JOB_LOW_BG, "f", "u-low", b"low")
        submit(c, h.SUBMIT_JOB_BG, "f", "u-norm2", binary)
        first_empty = submit(c, h.SUBMIT_JOB_HIGH_BG, "f", "", b"empty-unique-high")
        second_empty = submit(c, h.SUBMIT_JOB_LOW_BG, "f", "", b"empty-unique-low")
        submit(c, h.SUBMIT_JOB_EPOCH, "f", "u-epoch", b"epoch", when=when)
        submit(c, h.SUBMIT_JOB_BG, "g", "u-g", b"g-data")
        # A named duplicate coalesces: same handle, no new row.
        check_eq(submit(c, h.SUBMIT_JOB_BG, "f", "u-norm1", b"dup"), norm1, "coalesced handle")
        submit(c, h.SUBMIT_JOB_HIGH_BG, "f", "u-high2", b"high-2")
        check(first_empty != second_empty, "empty uniques are not coalesced")
        # gearmand holds both empty-unique jobs in memory ...
        check_eq(h.status(gm.port).get("f", (0,))[0], 8, "gearmand's queued jobs of f")
        c.close()
    finally:
        gm.stop()

    # ... but its table keyed on (unique, function) kept only the second
    # (INSERT OR REPLACE, with a new rowid), and stored no handle.
    check_eq(rows(db), [
        ("u-high", "f", 0, b"high", "blob", 0),
        ("u-norm1", "f", 1, b"normal-1", "blob", 0),
        ("u-low", "f", 2, b"low", "blob", 0),
        ("u-norm2", "f", 1, binary, "blob", 0),
        ("", "f", 2, b"empty-unique-low", "blob", 0),
        ("u-epoch", "f", 1, b"epoch", "blob", when),
        ("u-g", "g", 1, b"g-data", "blob", 0),
        ("u-high2", "f", 0, b"high-2", "blob", 0),
    ], "rows gearmand left in its sqlite queue")

    before = digest(db)
    r = gearshift_import(db, data_dir)
    check_eq(r.returncode, 0, "import exit status (stderr %r)" % r.stderr)
    check_eq(r.stdout.strip(), "imported 8 jobs from %s into %s (functions: f 7, g 1)"
             % (db, data_dir), "summary line")
    check_eq(digest(db), before, "the gearmand database after import (opened read-only)")
    check(os.path.exists(os.path.join(data_dir, "imported-gearmand.txt")), "import marker")

    srv = gearshift_serve(data_dir)
    try:
        ps = h.parse_priority_status(h.admin(srv.port, "prioritystatus"))
        # A scheduled epoch job counts as normal, as in gearmand.
        check_eq(ps.get("f", (0, 0, 0))[:3], (2, 3, 2), "f in prioritystatus")
        check_eq(ps.get("g", (0, 0, 0))[:3], (0, 1, 0), "g in prioritystatus")

        # A running server holds the directory: an import is refused, and
        # writes nothing (a fresh file, so the marker check does not apply).
        other = os.path.join(tmp, "other.sqlite")
        shutil.copyfile(db, other)
        sizes = file_sizes(data_dir)
        r = gearshift_import(other, data_dir)
        check(r.returncode != 0, "import into a locked directory must fail")
        check("in use by a running Gearshift server" in r.stderr, "locked message: %r" % r.stderr)
        check_eq(file_sizes(data_dir), sizes, "data dir after the refused import")

        w = Worker(srv.port, "f")
        jobs = w.drain()
        due_yet = time.time() >= when
        check(not due_yet, "test too slow: the epoch job fell due before the check")
        got = [(j[1], j[2], j[3]) for j in jobs]
        check_eq(got, [
            (b"f", b"u-high", b"high"),
            (b"f", b"u-high2", b"high-2"),
            (b"f", b"u-norm1", b"normal-1"),
            (b"f", b"u-norm2", binary),
            (b"f", b"u-low", b"low"),
            (b"f", b"", b"empty-unique-low"),
        ], "jobs of f before the epoch job is due (priority order, then rowid order)")
        numbers = [handle_number(j[0]) for j in jobs]
        check_eq(sorted(numbers), [1, 2, 3, 4, 5, 8], "new handle numbers (rowid order)")

        # The epoch job arrives only once due (Gearshift NOOPs at that time).
        w.wait_noop(timeout=when - time.time() + 10)
        job = w.grab()
        check(job is not None, "epoch job after its due time")
        check(time.time() >= when - 0.01, "epoch job handed out %.2fs early"
              % (when - time.time()))
        check_eq((job[1], job[2], job[3]), (b"f", b"u-epoch", b"epoch"), "epoch job")
        w.complete(job[0])
        w.close()

        g = Worker(srv.port, "g")
        check_eq([(j[1], j[2], j[3]) for j in g.drain()], [(b"g", b"u-g", b"g-data")], "g jobs")
        g.close()
        last_handle = max(numbers)
    finally:
        srv.stop()

    # The same file again: refused, nothing written.
    sizes = file_sizes(data_dir)
    r = gearshift_import(db, data_dir)
    check(r.returncode != 0, "a second import must be refused")
    check("already imported" in r.stderr and "--force" in r.stderr,
          "second import message: %r" % r.stderr)
    check_eq(file_sizes(data_dir), sizes, "data dir after the refused second import")

    # --force imports again, after the handles the server reserved.
    r = gearshift_import(db, data_dir, "--force")
    check_eq(r.returncode, 0, "forced import exit status (stderr %r)" % r.stderr)
    check("imported 8 jobs" in r.stdout, "forced import summary: %r" % r.stdout)
    srv = gearshift_serve(data_dir)
    try:
        st = h.status(srv.port)
        check_eq((st.get("f", (0,))[0], st.get("g", (0,))[0]), (7, 1), "jobs after --force")
        w = Worker(srv.port, "f")
        job = w.grab()
        check(job is not None and job[2] == b"u-high", "first job after --force: %r" % (job,))
        check(handle_number(job[0]) > last_handle,
              "re-imported handle %r must not reuse an earlier number" % job[0])
        w.close()
    finally:
        srv.stop()


def test_gearmand_quirks_custom_table(tmp):
    """A custom table, `-` uniques and an empty workload: gearmand keeps the
    last `-` job only, stores an empty workload as NULL and then cannot
    replay its own queue; the import brings both stored jobs back."""
    db = os.path.join(tmp, "gearmand.sqlite")
    data_dir = os.path.join(tmp, "data")
    gm = gearmand(db, table="my_queue")
    try:
        c = h.Conn(gm.port)
        d1 = submit(c, h.SUBMIT_JOB_BG, "f", "-", b"dash-1")
        d2 = submit(c, h.SUBMIT_JOB_BG, "f", "-", b"dash-2")
        check(d1 != d2, "`-` jobs with different data are separate jobs in gearmand")
        submit(c, h.SUBMIT_JOB_LOW_BG, "f", "u-empty", b"")
        c.close()
    finally:
        gm.stop()
    check_eq(rows(db, "my_queue"), [
        ("-", "f", 1, b"dash-2", "blob", 0),
        ("u-empty", "f", 2, None, "null", 0),
    ], "rows gearmand left in its sqlite queue")

    # gearmand cannot restart on it: its replay wants a BLOB in `data`.
    copy = os.path.join(tmp, "copy.sqlite")
    shutil.copyfile(db, copy)
    proc = subprocess.Popen(
        [GEARMAND, "-L", "127.0.0.1", "-p", str(h.free_port()), "-t", "0", "-q", "libsqlite3",
         "--libsqlite3-db", copy, "--libsqlite3-table", "my_queue", "--log-file=stderr"],
        stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        _, err = proc.communicate(timeout=10)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.communicate()
        raise h.TestFailure("gearmand replayed a NULL workload (expected it to refuse)")
    check(b"failed to reload queue" in err, "gearmand's replay error: %r" % err[-300:])

    r = gearshift_import(db, data_dir)
    check(r.returncode != 0, "the default table does not exist here")
    check("tables found: my_queue" in r.stderr, "missing-table message: %r" % r.stderr)
    check(not os.path.exists(data_dir), "a refused import must not create the data dir")

    r = gearshift_import(db, data_dir, "--table", "my_queue")
    check_eq(r.returncode, 0, "import exit status (stderr %r)" % r.stderr)
    check_eq(r.stdout.strip(), "imported 2 jobs from %s into %s (functions: f 2)"
             % (db, data_dir), "summary line")
    srv = gearshift_serve(data_dir)
    try:
        w = Worker(srv.port, "f")
        check_eq([(j[2], j[3]) for j in w.drain()],
                 [(b"-", b"dash-2"), (b"u-empty", b"")], "imported jobs")
        w.close()
    finally:
        srv.stop()


def test_postgres_migration(tmp):
    """gearmand's Postgres (libpq) queue, imported with --gearmand-postgres."""
    data_dir = os.path.join(tmp, "data")
    binary = b"\x00bin\x00ary\xff\x00"
    when = int(time.time()) + 3600
    pg = Postgres(tmp)
    try:
        pg.start()
        gm = h.Server("%s -L 127.0.0.1 -p {port} -t 0 -q Postgres --libpq-conninfo '%s' "
                      "--log-file=none" % (GEARMAND, pg.conninfo), "gearmand").start()
        try:
            c = h.Conn(gm.port)
            submit(c, h.SUBMIT_JOB_LOW_BG, "f", "u-low", b"low")
            submit(c, h.SUBMIT_JOB_BG, "f", "u-norm1", b"normal-1")
            submit(c, h.SUBMIT_JOB_HIGH_BG, "f", "", b"empty-unique-high")
            # Plain INSERT on (unique, function): gearmand refuses a second
            # empty-unique job of the same function outright.
            c.send_pkt(h.SUBMIT_JOB_LOW_BG, "f", "", b"empty-unique-low")
            _, t, body = c.read_pkt()
            check_eq((t, body.split(b"\0")[0]), (h.ERROR, b"QUEUE_ERROR"),
                     "gearmand's answer to a second empty unique")
            submit(c, h.SUBMIT_JOB_BG, "f", "u-norm2", binary)
            submit(c, h.SUBMIT_JOB_EPOCH, "f", "u-epoch", b"epoch", when=when)
            submit(c, h.SUBMIT_JOB_HIGH_BG, "g", "u-g", b"g-data")
            c.close()
        finally:
            gm.stop()
        check_eq(pg.sql("SELECT unique_key, function_name, priority, encode(data, 'hex'), "
                        "when_to_run FROM queue ORDER BY ctid"), [
            ["u-low", "f", "2", b"low".hex(), "0"],
            ["u-norm1", "f", "1", b"normal-1".hex(), "0"],
            ["", "f", "0", b"empty-unique-high".hex(), "0"],
            ["u-norm2", "f", "1", binary.hex(), "0"],
            ["u-epoch", "f", "1", b"epoch".hex(), str(when)],
            ["u-g", "g", "0", b"g-data".hex(), "0"],
        ], "rows gearmand left in its Postgres queue")

        def pg_import(*extra):
            return h.run([GEARSHIFT, "import", "--gearmand-postgres", pg.conninfo, "--data-dir",
                          data_dir, "--job-handle-prefix", PREFIX] + list(extra), timeout=60)

        # Refusals write nothing, not even the data directory.
        r = pg_import("--table", "nope")
        check(r.returncode != 0, "import of a missing table must fail")
        check("tables found: queue" in r.stderr, "missing-table message: %r" % r.stderr)
        r = h.run([GEARSHIFT, "import", "--gearmand-postgres",
                   "host=127.0.0.1 port=%d dbname=postgres user=gearshift password=s3cret"
                   % h.free_port(), "--data-dir", data_dir], timeout=60)
        check(r.returncode != 0 and "cannot connect to PostgreSQL" in r.stderr,
              "unreachable server message: %r" % r.stderr)
        check("s3cret" not in r.stderr, "the password must not be printed: %r" % r.stderr)
        check(not os.path.exists(data_dir), "a refused import must not create the data dir")

        r = pg_import()
        check_eq(r.returncode, 0, "import exit status (stderr %r)" % r.stderr)
        check_eq(r.stdout.strip(), "imported 6 jobs from %s into %s (functions: f 5, g 1)"
                 % (pg.url, data_dir), "summary line")
        check_eq(len(pg.sql("SELECT 1 FROM queue")), 6, "rows left in place (read-only)")

        check_served(data_dir, [
            (b"", b"empty-unique-high"),
            (b"u-norm1", b"normal-1"),
            (b"u-norm2", binary),
            (b"u-low", b"low"),
        ])

        r = pg_import()
        check(r.returncode != 0 and "already imported" in r.stderr and "--force" in r.stderr,
              "second import message: %r" % r.stderr)
        # A changed queue imports (its old jobs twice, which it says).
        pg.sql("INSERT INTO queue VALUES ('u-new', 'f', 1, '\\x6e6577', 0)")
        r = pg_import()
        check_eq(r.returncode, 0, "import of the changed queue (stderr %r)" % r.stderr)
        check("has changed since" in r.stderr, "changed-queue warning: %r" % r.stderr)
        check("imported 7 jobs" in r.stdout, "changed-queue summary: %r" % r.stdout)
        # What the string leaves out comes from libpq's environment variables,
        # and the queue reached that way is the same queue.
        env = dict(os.environ, PGHOST="127.0.0.1", PGPORT=str(pg.port))
        r = h.run([GEARSHIFT, "import", "--gearmand-postgres", "dbname=postgres user=gearshift",
                   "--data-dir", data_dir], timeout=60, env=env)
        check(r.returncode != 0 and "already imported" in r.stderr,
              "the same queue through PGHOST/PGPORT: %r" % r.stderr)
    finally:
        pg.stop()


def test_import_into_postgres_store(tmp):
    """A gearmand sqlite queue imported into a PostgreSQL store (a second
    database of the throwaway cluster), then served by a cluster node; a
    second import is refused without --force, and so is an import while a
    node serves the database."""
    db = os.path.join(tmp, "gearmand.sqlite")
    binary = b"\x00bin\x00ary\xff\x00"
    gm = gearmand(db)
    try:
        c = h.Conn(gm.port)
        submit(c, h.SUBMIT_JOB_LOW_BG, "f", "u-low", b"low")
        submit(c, h.SUBMIT_JOB_BG, "f", "u-norm", binary)
        submit(c, h.SUBMIT_JOB_HIGH_BG, "f", "u-high", b"high")
        submit(c, h.SUBMIT_JOB_BG, "g", "u-g", b"g-data")
        c.close()
    finally:
        gm.stop()

    pg = Postgres(tmp)
    try:
        pg.start()
        pg.sql("CREATE DATABASE gs")
        store = pg.store_url("gs")

        def pg_import(*extra):
            return h.run([GEARSHIFT, "import", "--gearmand-sqlite", db, "--store", store,
                          "--job-handle-prefix", PREFIX] + list(extra), timeout=60)

        def jobs_in_store():
            return pg.sql("SELECT count(*) FROM gearshift_jobs", db="gs")[0][0]

        r = pg_import()
        check_eq(r.returncode, 0, "import exit status (stderr %r)" % r.stderr)
        check_eq(r.stdout.strip(), "imported 4 jobs from %s into %s (functions: f 3, g 1)"
                 % (db, store), "summary line")
        check_eq(jobs_in_store(), "4", "jobs in gearshift_jobs")
        check_eq(pg.sql("SELECT source, jobs FROM gearshift_imports", db="gs"),
                 [[os.path.realpath(db), "4"]], "the import's record")
        check_eq(pg.sql("SELECT count(*) FROM gearshift_nodes", db="gs"), [["0"]],
                 "the import's node row is gone")
        check_eq(pg.sql("SELECT node, expires_at = '-infinity' FROM gearshift_leader",
                        db="gs")[0][1], "t", "the import released the lease")

        # The same file again: refused, nothing written.
        r = pg_import()
        check(r.returncode != 0, "a second import must be refused")
        check("already imported" in r.stderr and "--force" in r.stderr,
              "second import message: %r" % r.stderr)
        check_eq(jobs_in_store(), "4", "jobs after the refused second import")

        srv = h.Server("%s serve -L 127.0.0.1 -p {port} --store %s --job-handle-prefix %s"
                       % (GEARSHIFT, store, PREFIX), "gearshift").start()
        try:
            w = Worker(srv.port, "f", "g")
            deadline = time.monotonic() + 20
            jobs = w.drain()
            # A node serves jobs once it has taken the lease.
            while not jobs and time.monotonic() < deadline:
                time.sleep(0.2)
                jobs = w.drain()
            check_eq(sorted((j[1], j[2], j[3]) for j in jobs), sorted([
                (b"f", b"u-high", b"high"),
                (b"f", b"u-norm", binary),
                (b"f", b"u-low", b"low"),
                (b"g", b"u-g", b"g-data"),
            ]), "every imported job, handed to the worker")
            check_eq(sorted(handle_number(j[0]) for j in jobs), [1, 2, 3, 4],
                     "new handle numbers")
            w.close()

            # A node leads the cluster: refused, nothing written.
            r = pg_import("--force")
            check(r.returncode != 0, "an import while a node serves must fail")
            check("leads the cluster" in r.stderr and "stop every node" in r.stderr,
                  "node-leads message: %r" % r.stderr)
            check_eq(pg.sql("SELECT jobs FROM gearshift_imports", db="gs"), [["4"]],
                     "the import record after the refused import")
            check_eq(pg.sql("SELECT count(*) FROM gearshift_nodes WHERE name LIKE 'import-%'",
                            db="gs"), [["0"]], "no import node row left")
        finally:
            srv.stop()
        check_eq(jobs_in_store(), "0", "every job done")

        # --force imports again, after the handles the node reserved.
        r = pg_import("--force")
        check_eq(r.returncode, 0, "forced import exit status (stderr %r)" % r.stderr)
        check("imported 4 jobs" in r.stdout and "--force imported" in r.stderr,
              "forced import: %r %r" % (r.stdout, r.stderr))
        ids = [int(row[0]) for row in pg.sql("SELECT id FROM gearshift_jobs", db="gs")]
        check(len(ids) == 4 and min(ids) > 4, "re-imported ids after the first ones: %r" % ids)
    finally:
        pg.stop()


def test_mysql_migration(tmp):
    """gearmand's MySQL queue on a throwaway MariaDB, imported with
    --gearmand-mysql (tests/import/mysql_queue.py)."""
    mysql_queue.test_mysql_migration(tmp, GEARMAND, GEARSHIFT, submit, check_served, PREFIX)


TESTS = [test_migration_keeps_every_stored_job, test_gearmand_quirks_custom_table,
         test_postgres_migration, test_import_into_postgres_store, test_mysql_migration]


def main():
    wanted = [a for a in sys.argv[1:] if not a.startswith("-")]
    tests = [t for t in TESTS if not wanted or any(w in t.__name__ for w in wanted)]
    for path in (GEARSHIFT, GEARMAND):
        if not os.access(path, os.X_OK):
            print("!! %s is not an executable (build gearshift / install gearman-job-server)"
                  % path)
            print(h.summary(0, len(tests)))
            return 1
    return h.run_tmp_suite("import suite", tests, "gs-import-",
                           "GEARSHIFT=%s GEARMAND=%s" % (GEARSHIFT, GEARMAND))


if __name__ == "__main__":
    sys.exit(main())
