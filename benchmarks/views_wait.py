"""GET latency while a re-plan waits on its switches (fake switches, no root): prototype of
issue 38's "the REST loop stays within 100 ms during failures".

A k-ary fat-tree (``benchmarks.controlplane``'s service, ring and all-to-all jobs) on fake
switches whose every install waits ``--barrier-ms`` before it is confirmed (a barrier reply
that is late, as Open vSwitch's at k = 16). A core link carrying ring flows goes down in one
thread (the re-plan); another thread GETs /v1/fabric (or ``--path``) back to back until the
re-plan returned; each GET's wall time is recorded. Run on both branches to compare:

    python -m benchmarks.views_wait --fat-tree 16 --barrier-ms 100  (from the repo root)

Measured on an idle machine (k = 16, ring and all-to-all running, a core link down: 3 flows
moved, 213 entries added on 17 switches, two installs waited on):

    barrier   main (before)                    views-during-install (after)
    100 ms    1 GET, 272 ms (re-plan 267 ms)   18-20 GETs, median 9-10 ms, max 61 ms (272 ms)
    300 ms    1 GET, 675 ms (re-plan 669 ms)   53 GETs, median 9.9 ms, max 60 ms (678 ms)

The slowest GET is the one that came during the re-plan's own CPU (planning, desired
tables, diffs, commit, drain, save: about 60-70 ms), which still holds the view lock.
"""
from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import threading
import time

from benchmarks.controlplane import Bench, a2a_hosts, fat_tree, ring_hosts
from controller.service import api


def main(argv=None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--fat-tree", type=int, default=16)
    ap.add_argument("--barrier-ms", type=float, default=100.0)
    ap.add_argument("--path", default="/v1/fabric")
    args = ap.parse_args(argv)
    f = fat_tree(args.fat_tree)
    with tempfile.TemporaryDirectory() as d:
        b = Bench(f"fat-tree k={args.fat_tree}", f, f"{d}/state.db", None)
        b.first_start()
        b.post({"id": "ring", "collective": "ring_allreduce", "ranks": ring_hosts(f),
                "bytes": 1e8})
        hosts = a2a_hosts(f)
        b.post({"id": "a2a", "flows": [{"src": s, "dst": t, "bytes": 1e6}
                                       for s in hosts for t in hosts if s != t]})
        link = b.core_link()
        sw = b.switches
        install, waits = sw.install, []

        def slow_install(batches):
            t0 = time.perf_counter()
            time.sleep(args.barrier_ms / 1e3)  # the barrier reply comes late
            install(batches)
            waits.append(time.perf_counter() - t0)
        sw.install = slow_install
        t_get = []
        done = threading.Event()
        result = {}

        def replan():
            t0 = time.perf_counter()
            result["event"] = b.port(link, False)
            result["seconds"] = time.perf_counter() - t0
            done.set()
        writer = threading.Thread(target=replan)
        writer.start()
        while not done.is_set():
            t0 = time.perf_counter()
            code, doc = api.handle(b.svc, "GET", args.path)
            json.dumps(doc)
            t_get.append((time.perf_counter() - t0) * 1e3)
            assert code == 200
            time.sleep(0.002)
        writer.join()
        out = {"fabric": b.name, "barrier_ms": args.barrier_ms, "path": args.path,
               "replan_s": round(result["seconds"], 3), "installs_waited": len(waits),
               "gets": len(t_get), "get_ms_max": round(max(t_get), 1),
               "get_ms_median": round(statistics.median(t_get), 1),
               "get_ms_over_100": sum(t > 100 for t in t_get), "event": result["event"]}
        print(json.dumps(out, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
