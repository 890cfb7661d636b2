#!/usr/bin/env python3
"""Why the log store writes zeros ahead with fsync durability: the time of
one commit (a 40 KB write plus fdatasync) when the write grows the file,
against when it lands inside a file already that long. Run it in the data
directory's file system; figures in docs/benchmarks.md."""
import os, time
def run(prealloc, n=2000, size=40000):
    p=os.environ.get('FILE', '/tmp/fs-test.bin')
    if os.path.exists(p): os.unlink(p)
    fd=os.open(p, os.O_RDWR|os.O_CREAT)
    if prealloc:
        z=b'\0'*(1<<20)
        for i in range((n*size>>20)+2): os.write(fd,z)
        os.fsync(fd)
    buf=b'x'*size
    t=time.perf_counter(); off=0
    for i in range(n):
        os.pwrite(fd,buf,off); off+=size
        os.fdatasync(fd)
    dt=time.perf_counter()-t
    os.close(fd)
    return dt/n*1e6
for k in range(2):
    print('append us/commit', round(run(False))); print('prealloc us/commit', round(run(True)))
