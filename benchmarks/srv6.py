"""Benchmark of srv6 mode on Linux routers (no OpenFlow): what the hosts' agents cost and buy.

The measurements, each against a baseline run in the same command:

* ``rings``: the demo's two rings (``emulation/demo_srv6.py``: 4 spines x 8 leaves x 2 hosts,
  5 Mbit/s links): median step under the kernel's ECMP against the plan pushed by the agents;
* ``install``: the agent's install of 1,000 flow parts (one ``ip -batch``: 1,000 routes and
  1,000 rules), then re-steering all of them (1,000 atomic route swaps), in a network
  namespace of its own; the baseline is one ``ip`` process per command;
* ``outage``: a 2 x 2 leaf-spine at 20 Mbit/s, one flow (both ends' agents), its path's
  last link set down under it: the longest gap at the receiver against the longest gap
  before the failure, and when the agent moved the flow to its backup list; three runs, the
  median's figures and every run's gap;
* ``goodput``: one flow at a shaped line rate (20 Mbit/s), plain IPv4 against the same flow
  inside its uSID encapsulation (40 bytes a packet);
* ``fattree``: real collectives on the k = 4 fat-tree of routers, 20 Mbit/s links
  (``emulation/harness/router_jobs.py``): a gloo ring and an Open MPI ring of 8 and a gloo
  all-to-all of 8, each alone under ECMP, declared, and posted by its members and learned
  from the agents' traffic reports; each job's step against the controller's prediction and
  the ideal, ECMP against the plan on the slowest job; the agents probe their paths (their
  probes' class served first by every link: ``topologies.routers.PriorityIntf``) and every
  planned part they moved to a backup is counted (none should: nothing fails);
* ``scale``: the controller's side at k = 16 (320 switches, 1,024 hosts), in process: every
  host's document after a 1,024-rank ring is posted (what the agents' watches ask at once),
  against the POST that planned the ring; and ``mlroute srv6-config``'s computation of every
  switch's configuration.

    python -m benchmarks.srv6 [--steps 5] [--out bench/srv6.json] [--only SECTION]
    python -m benchmarks.srv6 --only fattree --diagnose  # why the all-to-all's step is long

Needs root, Mininet, iproute2 and socat (``--only scale``: none of them); ``--only`` keeps the
other sections from the file.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

from controller.agent import steering

SINK_GAPS = """import socket, sys, time
s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("", int(sys.argv[1]))); s.listen(1); c, _ = s.accept(); n = 0; times = []
while (b := c.recv(65536)):
    n += len(b); times.append(time.time())
print(n, " ".join(f"{t:.4f}" for t in times))"""


def _median(xs):
    return round(statistics.median(xs), 4)


def rings(steps: int) -> dict:
    from emulation import demo_srv6
    doc = demo_srv6.run(steps=steps)
    return {k: doc[k] for k in ("fabric", "bytes", "steps", "ideal_s", "ecmp_s", "plan_s",
                                "ecmp_median_s", "plan_median_s", "ecmp_over_plan")}


def _doc(n: int, spine: int) -> dict:
    return {"version": f"bench:{spine}", "flows": [
        {"dst_ip": f"10.{1 + i // 65536}.{i // 256 % 256}.{i % 256}", "proto": 6, "sport": 0,
         "dport": 0, "form": "usid", "sids": [f"fcbb:bbbb:{spine:x}:2:f001::"]}
        for i in range(n)]}


def install(n: int = 1000, repeats: int = 5) -> dict:
    """The agent's batches against one ``ip`` process per command, in a namespace made and
    removed here."""
    ns = f"mlroute-bench-{os.getpid()}"
    run = ["ip", "netns", "exec", ns]
    subprocess.run(["ip", "netns", "add", ns], check=True)
    try:
        for cmd in (["ip", "link", "add", "b0", "type", "veth", "peer", "name", "b1"],
                    ["ip", "link", "set", "b0", "up"], ["ip", "link", "set", "b1", "up"],
                    ["ip", "-6", "addr", "add", "fd00::1/64", "dev", "b0", "nodad"],
                    ["ip", "-6", "route", "add", "fcbb:bbbb::/32", "via", "fd00::2",
                     "dev", "b0"]):
            subprocess.run(run + cmd, check=True)

        def batch(lines):
            t = time.perf_counter()
            subprocess.run(run + ["ip", "-batch", "-"], input="\n".join(lines) + "\n",
                           text=True, check=True)
            return time.perf_counter() - t
        first, moved, removed = [], [], []
        for _ in range(repeats):
            a = steering.wanted(steering.parse(_doc(n, 3)), {}, "b0")
            first.append(batch(steering.batch({}, a)))
            b = steering.wanted(steering.parse(_doc(n, 4)), a, "b0")
            moved.append(batch(steering.batch(a, b)))
            removed.append(batch(steering.batch(b, {})))
        lines = steering.batch({}, steering.wanted(steering.parse(_doc(100, 3)), {}, "b0"))
        t = time.perf_counter()
        for line in lines:  # the baseline: a process per command
            subprocess.run(run + ["ip", *line.split()], check=True)
        per_process = (time.perf_counter() - t) / len(lines)
        batch(steering.batch(steering.wanted(steering.parse(_doc(100, 3)), {}, "b0"), {}))
        return {"flow_parts": n, "repeats": repeats, "install_ms": _median([x * 1e3 for x in first]),
                "resteer_ms": _median([x * 1e3 for x in moved]),
                "remove_ms": _median([x * 1e3 for x in removed]),
                "per_process_ms_per_command": round(per_process * 1e3, 3),
                "per_process_install_ms_estimate": round(per_process * 2 * n * 1e3, 1),
                "batch_over_per_process": round(statistics.median(first) / (per_process * 2 * n),
                                                3)}
    finally:
        subprocess.run(["ip", "netns", "del", ns], check=False)


def _flow(s, src, dst, size, port, folder):
    sink = s.net[dst].popen([sys.executable, "-c", SINK_GAPS, str(port)],
                            stdout=subprocess.PIPE, text=True)
    s.procs.append(sink)
    time.sleep(0.3)
    client = s.net[src].popen([sys.executable, "-c",
                               "import socket,sys; c=socket.create_connection((sys.argv[1], "
                               "int(sys.argv[2])), timeout=30); c.sendall(bytes(int(sys.argv[3])))",
                               s.fabric.host_ip[dst], str(port), str(size)])
    s.procs.append(client)
    return sink, client


def outage(folder: str, repeats: int = 3) -> dict:
    """``outage_once`` ``repeats`` times: the figures of the median run (by its longest gap),
    and every run's gap and move (the machine is shared: the spread is part of the figure)."""
    runs = sorted((outage_once(os.path.join(folder, f"run{i}")) for i in range(repeats)),
                  key=lambda r: r["outage_s"])
    doc = dict(runs[len(runs) // 2])
    doc.update(runs=repeats, outage_each_s=[r["outage_s"] for r in runs],
               moved_each_s=[r["moved_to_backup_s"] for r in runs],
               delivered=all(r["delivered"] for r in runs),
               outage_at_most_200ms=sum(r["outage_s"] <= 0.2 for r in runs))
    return doc


def outage_once(folder: str) -> dict:
    """Both ends' agents run (the destination moves the part back: the acknowledgements)."""
    from emulation.harness.fabricnet import wait_until
    from emulation.harness.routers import RouterSession
    from topologies.routers import leaf_spine
    os.makedirs(folder, exist_ok=True)
    size = 10_000_000  # 4 s at 20 Mbit/s
    with RouterSession(leaf_spine(2, 2, 1), folder, agents=["h0_0", "h1_0"], bw=20) as s:
        path = s.ctl.client.add_job({"id": "one", "flows": [
            {"src": "h0_0", "dst": "h1_0", "bytes": size}]})["routes"][0]["path"]
        wait_until(lambda: s.steered("h0_0"), 10, interval=0.1, what="the agent's rule")
        primary = s.net["h0_0"].cmd("ip route show table all | grep seg6")
        time.sleep(1.5)  # probes learn the paths
        sink, client = _flow(s, "h0_0", "h1_0", size, 5601, folder)
        time.sleep(1.5)
        down_at = time.time()
        s.net.configLinkStatus(path[-2], path[-1], "down")
        t0 = time.monotonic()
        wait_until(lambda: s.net["h0_0"].cmd("ip route show table all | grep seg6") != primary,
                   5, interval=0.01, what="the move")
        moved = time.monotonic() - t0
        n, _, stamps = sink.communicate(timeout=60)[0].partition(" ")
        times = [float(x) for x in stamps.split()]
        before = [b - a for a, b in zip(times, times[1:]) if b < down_at]
        after = [b - a for a, b in zip(times, times[1:]) if b >= down_at]
        return {"fabric": "2 x 2 leaf-spine, 20 Mbit/s", "bytes": size,
                "delivered": int(n) == size, "moved_to_backup_s": round(moved, 3),
                "outage_s": round(max(after), 3), "normal_max_gap_s": round(max(before), 3),
                "outage_over_normal_gap": round(max(after) / max(before), 1)}


def goodput(folder: str, repeats: int = 3) -> dict:
    from emulation.harness.fabricnet import wait_until
    from emulation.harness.routers import RouterSession
    from emulation.harness.transfers import send
    from topologies.routers import leaf_spine
    f, size = leaf_spine(2, 2, 1), 5_000_000
    route = [{"src": "h0_0", "dst": "h1_0"}]
    with RouterSession(f, folder, agents=["h0_0"], bw=20, probes=False) as s:
        plain = [send(s.net, f, route, size, port=5701 + k) for k in range(repeats)]
        s.ctl.client.add_job({"id": "one", "flows": [{"src": "h0_0", "dst": "h1_0",
                                                      "bytes": size}]})
        wait_until(lambda: s.steered("h0_0"), 10, interval=0.1, what="the agent's rule")
        encap = [send(s.net, f, route, size, port=5801 + k) for k in range(repeats)]
    line = size * 8 / 20e6
    p, e = statistics.median(plain), statistics.median(encap)
    return {"link_mbps": 20, "bytes": size, "repeats": repeats,
            "plain_s": [round(x, 3) for x in plain], "usid_s": [round(x, 3) for x in encap],
            "plain_goodput_share": round(line / p, 3), "usid_goodput_share": round(line / e, 3),
            "usid_overhead": round(e / p - 1, 4)}


def scale(k: int = 16) -> dict:
    """Serving every host's segments document against planning the job they carry."""
    from controller.enforcement.srv6 import SidPlan
    from controller.enforcement.srv6_config import configs
    from controller.model.clos import Clos
    from controller.service import api
    from controller.service.route_service import RouteService
    from controller.shell.static import StaticSwitches
    from emulation.harness.collectives import rank_hosts
    fabric = Clos.fat_tree(k).wire()
    switches = StaticSwitches(fabric)
    svc = RouteService(switches, fabric, mode="srv6", algorithm="auto")
    svc.note_switches(switches.connected_now())
    svc.sync_queued()
    hosts = rank_hosts(fabric)
    job = json.dumps({"id": "ring", "collective": "ring_allreduce", "ranks": hosts,
                      "bytes": 1e8}).encode()
    t = time.perf_counter()
    status, _ = api.handle(svc, "POST", "/v1/jobs", job)
    post = time.perf_counter() - t
    assert status == 201
    t = time.perf_counter()
    size = sum(len(json.dumps(api.handle(svc, "GET", f"/v1/hosts/{h}/segments")[1]))
               for h in hosts)
    docs = time.perf_counter() - t
    t = time.perf_counter()
    routes = sum(len(c.routes) for c in configs(SidPlan.of(fabric)).values())
    config = time.perf_counter() - t
    return {"fabric": f"k = {k} fat-tree", "switches": len(fabric.tier_of),
            "hosts": len(hosts), "post_ms": round(post * 1e3, 1),
            "all_documents_ms": round(docs * 1e3, 1),
            "document_ms": round(docs * 1e3 / len(hosts), 3),
            "documents_over_post": round(docs / post, 2),
            "document_bytes": round(size / len(hosts)),
            "config_s": round(config, 2), "config_routes": routes}


def fattree(folder: str, steps: int) -> dict:
    from emulation.harness import router_jobs
    return router_jobs.run(folder, steps=steps, probe_period=router_jobs.PROBE_PERIOD_S,
                           progress=lambda msg: print(msg, file=sys.stderr, flush=True))


# case: Mbit/s, the all-to-all's schedule, the agents' probes, a class per peer on host
# ports, the agents' probe period (s)
DIAGNOSE = {"gloo_20": (20.0, "all", True, True, 0.01),
            "gloo_10": (10.0, "all", True, True, 0.01),
            "pairwise_20": (20.0, "pairwise", True, True, 0.01),
            "noprobes_20": (20.0, "all", False, True, 0.01),
            "fifo_20": (20.0, "all", True, False, 0.01),
            "recvfirst_20": (20.0, "recvfirst", True, True, 0.01),
            "recvfirst_30ms_20": (20.0, "recvfirst", True, True, 0.03),
            "recvfirst_noprobes_20": (20.0, "recvfirst", False, True, 0.01)}


def fattree_diagnose(folder: str, steps: int, out: dict, save, names=()) -> dict:
    """Why the all-to-all's step exceeds its prediction: its declared plan alone, sampled
    (``router_jobs.diagnose_job``), at 20 Mbit/s, at 10 (half the packets a second for the
    same bytes), at 20 in pairwise rounds (one flow each way per port at a time) instead of
    gloo's seven sends at once, at 20 with the agents' probes off, with one FIFO per host
    port instead of a class per peer, and with every receive posted before the sends (with
    the probes on and off, and every 30 ms); a fat-tree each (or those ``names``),
    ``save()`` after each."""
    from emulation.harness import router_jobs
    out["command"] = "python -m benchmarks.srv6 --only fattree --diagnose"
    for name in names or DIAGNOSE:
        bw, schedule, probes, fair, period = DIAGNOSE[name]
        os.makedirs(os.path.join(folder, name))
        doc = router_jobs.run(os.path.join(folder, name), steps=steps, bw=bw,
                              only=["all-to-all"], diagnose=True, schedule=schedule,
                              probes=probes, fair=fair, probe_period=period)
        doc["jobs"]["all-to-all"].update(probes=probes, probe_period_s=period,
                                         host_rmem_bytes=doc["host_rmem_bytes"],
                                         probe_class_mbps=doc["probe_class_mbps"])
        out[name] = doc["jobs"]["all-to-all"]
        print(name, {k: v for k, v in out[name].items() if k != "steps"}, file=sys.stderr,
              flush=True)
        save()
    return out


def main(argv=None) -> int:
    from emulation.demo_srv6 import STEPS
    ap = argparse.ArgumentParser(prog="python -m benchmarks.srv6",
                                 description=__doc__.split("\n\n")[0])
    ap.add_argument("--steps", type=int, default=STEPS, help="ring steps of each routing")
    ap.add_argument("--out", default=os.path.join("bench", "srv6.json"))
    ap.add_argument("--only", choices=SECTIONS, help="only this section; the others are kept "
                                                     "from --out (scale needs no root)")
    ap.add_argument("--diagnose", nargs="*", choices=DIAGNOSE, metavar="CASE",
                    help="with --only fattree: the all-to-all's plan sampled (CPU, host links, "
                         f"ranks' finishes) in these cases ({', '.join(DIAGNOSE)}; none: "
                         "all), into the key fattree_diagnose")
    args = ap.parse_args(argv)
    if args.diagnose is not None and args.only != "fattree":
        ap.error("--diagnose goes with --only fattree")
    if args.only != "scale" and os.geteuid() != 0:
        print("benchmarks.srv6: needs root (Mininet, network namespaces)", file=sys.stderr)
        return 2
    doc = {"command": "python -m benchmarks.srv6"}
    if args.only:
        with open(args.out) as fh:
            doc = json.load(fh)
    folder = tempfile.mkdtemp(prefix="mlroute-bench-srv6-")
    if args.diagnose is not None:
        out = doc.setdefault("fattree_diagnose", {})
        fattree_diagnose(folder, args.steps, out, lambda: _write(doc, args.out), args.diagnose)
        return 0
    for name in [args.only] if args.only else SECTIONS:
        os.makedirs(os.path.join(folder, name))
        doc[name] = SECTIONS[name](os.path.join(folder, name), args)
        print(name, doc[name], flush=True)
    return _write(doc, args.out)


SECTIONS = {"install": lambda folder, args: install(),
            "goodput": lambda folder, args: goodput(folder),
            "outage": lambda folder, args: outage(folder),
            "rings": lambda folder, args: rings(args.steps),
            "fattree": lambda folder, args: fattree(folder, args.steps),
            "scale": lambda folder, args: scale()}


def _write(doc: dict, out: str) -> int:
    with open(out, "w") as fh:
        json.dump(doc, fh, indent=1)
        fh.write("\n")
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
