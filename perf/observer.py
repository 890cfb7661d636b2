#!/usr/bin/env python3
"""What watches a server in production, as one light process: a Prometheus
scraper reading /metrics every 100 ms and an open dashboard (the event
stream it subscribes to, and the overview, functions and workers read every
2 s), each over one kept-alive HTTP connection. Ends when the server does.

    observer.py HTTP_PORT [--only scrape,stream,page] [--query QUERY]
"""
import argparse
import http.client
import os
import threading
import time

DASHBOARD_KINDS = "kinds=failed,retrying,dead,cancelled,revived,worker_joined,worker_left,stats"


def get_loop(port, paths, every, alive):
    conn = None
    while alive():
        for path in paths:
            try:
                if conn is None:
                    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
                conn.request("GET", path)
                conn.getresponse().read()
            except (OSError, http.client.HTTPException):
                conn = None
                time.sleep(0.2)
        time.sleep(every)


def stream_loop(port, query, alive):
    while alive():
        try:
            conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
            conn.request("GET", "/api/v1/events?" + query)
            r = conn.getresponse()
            while alive() and r.read1(65536):
                pass
        except (OSError, http.client.HTTPException):
            time.sleep(0.2)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("port", type=int)
    ap.add_argument("--server-pid", type=int, default=os.getppid())
    ap.add_argument("--only", default="scrape,stream,page")
    ap.add_argument("--query", default=DASHBOARD_KINDS)
    a = ap.parse_args()

    def alive():
        try:
            os.kill(a.server_pid, 0)
            return True
        except OSError:
            return False

    time.sleep(0.5)
    jobs = {
        "scrape": lambda: get_loop(a.port, ["/metrics"], 0.1, alive),
        "page": lambda: get_loop(
            a.port, ["/api/v1/overview", "/api/v1/functions", "/api/v1/workers"], 2.0, alive
        ),
        "stream": lambda: stream_loop(a.port, a.query, alive),
    }
    threads = [threading.Thread(target=jobs[j], daemon=True) for j in a.only.split(",")]
    for t in threads:
        t.start()
    while alive():
        time.sleep(0.5)


if __name__ == "__main__":
    main()
