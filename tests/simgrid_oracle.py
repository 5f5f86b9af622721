"""SimGrid oracle for the fluid model: exact max-min completion times of flows on fixed paths.

Runs under Debian's ``/usr/bin/python3`` with ``python3-simgrid`` (not the venv). Reads one
instance as JSON on stdin and writes the times as JSON on stdout:

    in:  {"links": [capacity in bytes/s, ...],
          "flows": [{"path": [link ids], "bytes": integer, "after": [flow ids]}, ...]}
    out: {"start": [s per flow], "finish": [s per flow]}

A flow starts when every flow it comes ``after`` has finished (ring steps are written this
way), or at 0. Each flow gets its own pair of hosts with one route, its path, so SimGrid shares
exactly the listed links. The CM02 model without cross traffic and with zero latency is plain
max-min fairness (docs: environment.md section 9).

    echo '{"links": [1e6], "flows": [{"path": [0], "bytes": 1000000, "after": []}]}' \\
        | /usr/bin/python3 tests/simgrid_oracle.py
"""
import json
import sys

CONFIG = ["--cfg=network/model:CM02", "--cfg=network/crosstraffic:0",
          "--log=root.thres:critical"]


def solve(doc: dict) -> dict:
    import simgrid as sg

    e = sg.Engine(["oracle"] + CONFIG)
    zone = sg.NetZone.create_full_zone("fabric")
    links = [zone.create_link(f"l{i}", float(c)).seal() for i, c in enumerate(doc["links"])]
    flows = doc["flows"]
    ends = []
    for i, f in enumerate(flows):
        a, b = zone.create_host(f"a{i}", 1.0).seal(), zone.create_host(f"b{i}", 1.0).seal()
        zone.add_route(a.netpoint, b.netpoint, None, None,
                       [sg.LinkInRoute(links[k]) for k in f["path"]], False)
        ends.append((a, b))
    driver = zone.create_host("driver", 1.0).seal()
    zone.seal()
    start, finish = [None] * len(flows), [None] * len(flows)
    waiting = [len(set(f["after"])) for f in flows]
    then = [[] for _ in flows]
    for i, f in enumerate(flows):
        for k in set(f["after"]):
            then[k].append(i)

    def run():
        comms, ids = [], []

        def launch(i):
            start[i] = e.clock
            comms.append(sg.Comm.sendto_async(ends[i][0], ends[i][1], int(flows[i]["bytes"])))
            ids.append(i)

        for i in range(len(flows)):
            if not waiting[i]:
                launch(i)
        while comms:
            k = sg.Comm.wait_any(comms)
            comms.pop(k)
            i = ids.pop(k)
            finish[i] = e.clock
            for j in then[i]:
                waiting[j] -= 1
                if not waiting[j]:
                    launch(j)

    sg.Actor.create("driver", driver, run)
    e.run()
    if any(t is None for t in finish):
        raise SystemExit("oracle: a flow never ran (a dependency cycle?)")
    return {"start": start, "finish": finish}


if __name__ == "__main__":
    json.dump(solve(json.load(sys.stdin)), sys.stdout)
