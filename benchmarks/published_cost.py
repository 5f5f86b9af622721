"""What publishing the views for native REST reads costs the writer (``published.py``): on a
k-ary fat-tree with fake switches, the service publishes each time a writer lets go of the
state lock; timed while every switch connects, a ring and an all-to-all are posted and a core
link goes down. Prints the number of publications, their mean and longest time.

    nice -n 15 .venv/bin/python -m benchmarks.published_cost --fat-tree 16
"""
from __future__ import annotations

import argparse
import json
import time

from benchmarks.controlplane import a2a_hosts, fat_tree, ring_hosts
from controller.service import api
from controller.service.published import Published
from controller.service.route_service import RouteService
from emulation.harness.fake_switch import FakeSwitches


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--fat-tree", type=int, default=16)
    a = p.parse_args(argv)
    f = fat_tree(a.fat_tree)
    svc = RouteService(FakeSwitches(f.dpids.values()), f)
    pub = Published.attach(svc)
    times: dict[str, list[float]] = {}
    phase = ["connect"]
    publish = svc.lock.publish

    def timed(end):
        t0 = time.perf_counter()
        publish(end)
        times.setdefault(phase[0], []).append((time.perf_counter() - t0) * 1e3)
    svc.lock.publish = timed
    for name in f.switches():
        svc.switch_connected(f.dpids[name], {q: True for q in f.ports[name].values()})
    phase[0] = "post_ring"
    ring = {"id": "ring", "collective": "ring_allreduce", "ranks": ring_hosts(f), "bytes": 1e8}
    assert api.handle(svc, "POST", "/v1/jobs", json.dumps(ring).encode())[0] == 201
    phase[0] = "post_all_to_all"
    hosts = a2a_hosts(f)
    a2a = {"id": "a2a", "flows": [{"src": s, "dst": d, "bytes": 1e6}
                                  for s in hosts for d in hosts if s != d]}
    status, doc = api.handle(svc, "POST", "/v1/jobs", json.dumps(a2a).encode())
    assert status == 201, doc
    phase[0] = "link_down"
    agg = next(s for s in f.switches() if s.startswith("a"))
    core = next(x for x in f.ports[agg] if x.startswith("c"))
    svc.ports_changed([(f.dpids[agg], f.ports[agg][core], False, None)])
    out = {k: {"n": len(v), "mean_ms": round(sum(v) / len(v), 3), "max_ms": round(max(v), 3)}
           for k, v in times.items()}
    out["total"] = {"n": pub.count, "seconds": round(pub.seconds, 3),
                    "jobs_body_bytes": len(pub.answer("/v1/jobs")[1]),
                    "ready_body_bytes": len(pub.answer("/v1/ready")[1])}
    print(json.dumps(out, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
