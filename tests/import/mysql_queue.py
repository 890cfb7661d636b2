"""The import suite's MySQL part: gearmand 1.1's `MySQL` queue on a throwaway
MariaDB server (Debian's mariadb-server: mariadb-install-db, mariadbd and the
mariadb client), imported with `gearshift import --gearmand-mysql`.

The server listens on 127.0.0.1 on a free port and on a socket in the
test's directory; the test's database and user are made through the socket
as root. Run through tests/import/test_import.py.
"""

import os
import shutil
import subprocess
import time

import harness as h
from harness import check, check_eq

MARIADBD = os.environ.get("MARIADBD") or "/usr/sbin/mariadbd"


class MariaDB:
    """A throwaway MariaDB server in `tmp`, with database `gearman` and user
    `gearman` (password `pw`). As root, the server runs as root (it refuses
    to without being told)."""

    def __init__(self, tmp):
        check(os.access(MARIADBD, os.X_OK) and shutil.which("mariadb-install-db"),
              "no MariaDB server programs (install Debian's mariadb-server)")
        self.dir = os.path.join(tmp, "mariadb")
        self.data = os.path.join(self.dir, "data")
        self.socket = os.path.join(self.dir, "sock")
        self.as_root = ["--user=root"] if os.geteuid() == 0 else []
        self.proc = None
        self.port = None

    def start(self):
        os.makedirs(self.dir)
        r = subprocess.run(["mariadb-install-db", "--no-defaults", "--datadir=" + self.data,
                            "--auth-root-authentication-method=normal", "--skip-test-db"]
                           + self.as_root, capture_output=True, text=True, timeout=120)
        check(r.returncode == 0, "mariadb-install-db failed: %s%s" % (r.stdout, r.stderr[-2000:]))
        self.port = h.free_port()
        self.proc = subprocess.Popen(
            [MARIADBD, "--no-defaults", "--datadir=" + self.data, "--socket=" + self.socket,
             "--port=%d" % self.port, "--bind-address=127.0.0.1", "--skip-log-bin",
             "--innodb-flush-log-at-trx-commit=0", "--innodb-buffer-pool-size=16M",
             "--log-error=" + os.path.join(self.dir, "error.log"),
             "--pid-file=" + os.path.join(self.dir, "pid")] + self.as_root,
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 60
        while True:
            r = subprocess.run(self._client() + ["-e", "SELECT 1"], capture_output=True,
                               text=True, timeout=30)
            if r.returncode == 0:
                break
            check(self.proc.poll() is None, "mariadbd exited: %s" % self.log_tail())
            check(time.monotonic() < deadline, "mariadbd not up in 60 s: %s" % r.stderr)
            time.sleep(0.2)
        self.sql("CREATE DATABASE gearman; CREATE USER 'gearman'@'%' IDENTIFIED BY 'pw'; "
                 "GRANT ALL ON gearman.* TO 'gearman'@'%'")
        return self

    def log_tail(self):
        try:
            with open(os.path.join(self.dir, "error.log")) as f:
                return f.read()[-2000:]
        except OSError:
            return "(no error log)"

    def stop(self):
        if self.proc is not None:
            self.proc.kill()
            self.proc.wait(timeout=30)
            self.proc = None

    def _client(self):
        return ["mariadb", "--no-defaults", "-S", self.socket, "-u", "root"]

    def sql(self, statement, db=None):
        """Rows of `statement` as root, each a list of column strings."""
        r = subprocess.run(self._client() + ["-N", "-B"] + ([db] if db else [])
                           + ["-e", statement], capture_output=True, text=True, timeout=30)
        check(r.returncode == 0, "mariadb failed: %s" % r.stderr)
        return [line.split("\t") for line in r.stdout.splitlines()]

    def url(self, password="pw"):
        auth = "gearman:%s" % password if password else "gearman"
        return "mysql://%s@127.0.0.1:%d/gearman" % (auth, self.port)

    @property
    def name(self):
        """How `gearshift import` names the queue table."""
        return "mysql://gearman@127.0.0.1:%d/gearman?table=gearman_queue" % self.port


def queue_error(conn, ptype, unique, data, what):
    """Submits a job of `f` that gearmand's queue cannot store: ERROR
    QUEUE_ERROR, no handle."""
    conn.send_pkt(ptype, "f", unique, data)
    _, t, body = conn.read_pkt()
    check_eq((t, body.split(b"\0")[0]), (h.ERROR, b"QUEUE_ERROR"), "gearmand's answer to " + what)


def test_mysql_migration(tmp, gearmand_bin, gearshift_bin, submit, check_served, prefix):
    """gearmand's MySQL queue, imported with --gearmand-mysql."""
    data_dir = os.path.join(tmp, "data")
    binary = b"\x00bin\x00ary\xff\x00"
    accented = "u-\u00e9t\u00e9".encode()
    when = int(time.time()) + 3600
    db = MariaDB(tmp)
    try:
        # Inside the try: a server that started but never answered is stopped too.
        db.start()
        gm = h.Server("%s -L 127.0.0.1 -p {port} -t 0 -q MySQL --mysql-host 127.0.0.1 "
                      "--mysql-port %d --mysql-user gearman --mysql-password pw "
                      "--mysql-db gearman --log-file=none" % (gearmand_bin, db.port),
                      "gearmand").start()
        try:
            c = h.Conn(gm.port)
            submit(c, h.SUBMIT_JOB_LOW_BG, "f", "u-low", b"low")
            norm1 = submit(c, h.SUBMIT_JOB_BG, "f", "u-norm1", b"normal-1")
            submit(c, h.SUBMIT_JOB_HIGH_BG, "f", "", b"empty-unique-high")
            # The table's unique key (unique, function): gearmand refuses a
            # second empty-unique job of the same function.
            queue_error(c, h.SUBMIT_JOB_LOW_BG, "", b"empty-unique-low", "a second empty unique")
            submit(c, h.SUBMIT_JOB_BG, "f", "u-norm2", binary)
            # A named duplicate coalesces in memory: no second row.
            check_eq(submit(c, h.SUBMIT_JOB_BG, "f", "u-norm1", b"dup"), norm1, "coalesced")
            submit(c, h.SUBMIT_JOB_EPOCH, "f", "u-epoch", b"epoch", when=when)
            submit(c, h.SUBMIT_JOB_BG, "f", accented, b"accented")
            # A letter latin1 lacks: the strict server refuses the row, and
            # gearmand the job.
            queue_error(c, h.SUBMIT_JOB_BG, "u-\u0436".encode(), b"cyrillic",
                        "a unique latin1 cannot hold")
            submit(c, h.SUBMIT_JOB_HIGH_BG, "g", "u-g", b"g-data")
            c.close()
        finally:
            gm.stop()
        # gearmand's connection sent UTF-8; the latin1 column holds the
        # letters, and the server hands them back in the reader's charset.
        check_eq(db.sql("SELECT HEX(unique_key), function_name, priority, HEX(data), "
                        "when_to_run FROM gearman_queue", db="gearman"), [
            [b"u-low".hex().upper(), "f", "2", b"low".hex().upper(), "0"],
            [b"u-norm1".hex().upper(), "f", "1", b"normal-1".hex().upper(), "0"],
            ["", "f", "0", b"empty-unique-high".hex().upper(), "0"],
            [b"u-norm2".hex().upper(), "f", "1", binary.hex().upper(), "0"],
            [b"u-epoch".hex().upper(), "f", "1", b"epoch".hex().upper(), str(when)],
            [accented.decode().encode("latin1").hex().upper(), "f", "1",
             b"accented".hex().upper(), "0"],
            [b"u-g".hex().upper(), "g", "0", b"g-data".hex().upper(), "0"],
        ], "rows gearmand left in its MySQL queue (latin1 columns)")

        def imp(*extra, url=None, env=None):
            return h.run([gearshift_bin, "import", "--gearmand-mysql", url or db.url(),
                          "--data-dir", data_dir, "--job-handle-prefix", prefix] + list(extra),
                         timeout=60, env=env)

        # Refusals write nothing, not even the data directory.
        r = imp("--table", "nope")
        check(r.returncode != 0 and "tables found: gearman_queue" in r.stderr,
              "missing-table message: %r" % r.stderr)
        r = imp(url=db.url("wr0ng-pw"))
        check(r.returncode != 0 and "Access denied" in r.stderr,
              "wrong password message: %r" % r.stderr)
        check("wr0ng-pw" not in r.stderr, "the password must not be printed: %r" % r.stderr)
        r = imp(url=db.url() + "?require_ssl=true")
        check(r.returncode != 0 and "without TLS" in r.stderr, "TLS message: %r" % r.stderr)
        check(not os.path.exists(data_dir), "a refused import must not create the data dir")

        r = imp()
        check_eq(r.returncode, 0, "import exit status (stderr %r)" % r.stderr)
        check_eq(r.stdout.strip(), "imported 7 jobs from %s into %s (functions: f 6, g 1)"
                 % (db.name, data_dir), "summary line")
        check_eq(len(db.sql("SELECT 1 FROM gearman_queue", db="gearman")), 7,
                 "rows left in place (read-only)")

        check_served(data_dir, [
            (b"", b"empty-unique-high"),
            (b"u-norm1", b"normal-1"),
            (b"u-norm2", binary),
            (accented, b"accented"),
            (b"u-low", b"low"),
        ])

        r = imp()
        check(r.returncode != 0 and "already imported" in r.stderr and "--force" in r.stderr,
              "second import message: %r" % r.stderr)
        # The password from MYSQL_PWD reaches the same queue, still imported.
        r = imp(url=db.url(password=None), env=dict(os.environ, MYSQL_PWD="pw"))
        check(r.returncode != 0 and "already imported" in r.stderr,
              "the same queue with MYSQL_PWD: %r" % r.stderr)
        # A changed queue imports (its old jobs twice, which it says).
        db.sql("INSERT INTO gearman_queue VALUES ('u-new', 'f', 1, 'new', 0)", db="gearman")
        r = imp()
        check_eq(r.returncode, 0, "import of the changed queue (stderr %r)" % r.stderr)
        check("has changed since" in r.stderr, "changed-queue warning: %r" % r.stderr)
        check("imported 8 jobs" in r.stdout, "changed-queue summary: %r" % r.stdout)
        # A row no Gearman job can come from stops the import, named.
        db.sql("INSERT INTO gearman_queue VALUES ('u-bad', '', 1, 'x', 0)", db="gearman")
        sizes = {n: os.path.getsize(os.path.join(data_dir, n)) for n in os.listdir(data_dir)}
        r = imp("--force")
        check(r.returncode != 0 and "row 9 of gearman_queue" in r.stderr
              and "function_name is empty" in r.stderr, "unreadable row message: %r" % r.stderr)
        check_eq({n: os.path.getsize(os.path.join(data_dir, n)) for n in os.listdir(data_dir)},
                 sizes, "the data dir after the refused import")
    finally:
        db.stop()
