#!/usr/bin/env python3
"""How many small durable writes this disk completes per second when one,
two or four threads each write 256 bytes into a preallocated file and call
fdatasync, side by side. It bounds fsync A_submit: libgearman's 4 clients
each wait for such a flush, and overlapping the flushes (tried, see
perf/limits.md) only helps as far as these figures rise with threads.
Run it on the data directory's file system (FILE=...)."""
import os
import threading
import time

N = 2000  # writes per thread


def run(threads):
    path = os.environ.get('FILE', '/tmp/fdatasync-threads.bin')
    if os.path.exists(path):
        os.unlink(path)
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    zeros = b'\0' * (1 << 20)
    for _ in range((threads * N * 256 >> 20) + 2):
        os.write(fd, zeros)
    os.fsync(fd)
    buf = b'x' * 256

    def writer(k):
        for i in range(N):
            os.pwrite(fd, buf, (k * N + i) * 256)
            os.fdatasync(fd)  # releases the GIL: the syncs overlap

    ts = [threading.Thread(target=writer, args=(k,)) for k in range(threads)]
    t0 = time.perf_counter()
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    dt = time.perf_counter() - t0
    os.close(fd)
    os.unlink(path)
    return threads * N / dt


for rep in range(2):
    print(' '.join('%d thread(s): %d/s' % (t, run(t)) for t in (1, 2, 4)))
