"""The controller's own CPU time per operation (pure core, fake switches, no root): JSON in
bench/controlplane.json.

On a k-ary fat-tree as ``topologies/clos.py --fat-tree K --bw 0`` declares it (k = 16: 320
switches, 1,024 hosts) and on the paper's two-tier leaf-spine (32 spines x 64 leaves x 16
hosts, ``Clos.generate`` as ``benchmarks/reconcile.py`` builds it), both in the same run, a
``RouteService`` on ``emulation/harness/fake_switch.FakeSwitches`` (an OpenFlow table
interpreter that confirms every batch at once) with a manual clock and a sqlite state file,
timed with ``time.perf_counter``:

* ``first_start``: the service built on the declared fabric and every switch connected
  (ports up) and reconciled against empty tables: static entries computed and sent;
* ``lldp_round``: one LLDP round of discovery, every probe out of every switch port
  delivered back to the controller as a packet-in (in the shell's batches of
  ``core.PACKET_BATCH``), the declared fabric checked;
* ``restart``: a new service on the same state file and the same switches, every switch
  connected again: tables read, diffed and nothing sent (``messages`` must be 0);
* ``post_ring``: ``POST /v1/jobs`` of a 128-host ring All-Reduce across every leaf, on a
  fat-tree each rank's neighbour in another pod
  through the REST dispatcher (``api.handle``: parse, plan, desired tables, make before
  break, persistence, the answer's view);
* ``post_all_to_all``: ``POST /v1/jobs`` of an all-to-all among 32 hosts (992 explicit flows)
  with the ring running;
* ``views``: GET of /v1/jobs, /v1/jobs/<ring>, /v1/links, /v1/fabric, /v1/routes (each with
  its JSON encoding) and the /metrics exposition, each timed too;
* ``link_down``: a core link (two tiers: a leaf-spine link) carrying ring flows reported down
  by its switch: the effective fabric, the re-plan, the new tables installed;
* ``link_up``: the link back up (nothing is re-planned before the hold-down);
* ``switch_lost``: the aggregation switch (two tiers: the spine) most ring routes cross lost
  as one that powers off (``benchmarks/scale.py``'s switch loss): its control connection
  drops, then its neighbours' reports of their ports to it, down, come in one batch (the
  shell gathers a lost switch's reports: ``decide.switch_going``); the re-plan and the new
  tables installed. Then (not timed) its links come back up and it reconnects;
* ``delete``: both jobs deleted.

The service is built as the shell builds it and the heap frozen after (``gc.freeze``, as both
adapters do), so that full collections do not scan it. Each figure is the wall time of the
controller's Python (``seconds``; ``cpu_s``: the process's CPU time, less sensitive to other
processes on a shared machine; ``--repeat N``: the fastest of N runs); the fake switches' own
work, applying messages to dicts, is included and small. ``ratio`` is the fat-tree's figure
over the two-tier one. ``--profile DIR`` also writes a cProfile of every phase there and
prints its top entries by cumulative and own time.

Every phase also gives the longest stretch of the controller's work between two yields
(``emulation/harness/stretches.py``): under eventlet (Ryu) a REST request waits for the one
running when it arrives. Yield points are the service's ``on_progress`` (the shell's
``hub.sleep(0)``: the service lock's ``released``, the desired tables, the predictions ...),
every install and table read of the switches (waits for their replies; the fake switches'
own work is not counted), and where the shell yields between its units of work: between
switches connecting, batches of packet-ins, REST requests (the answer's JSON encoding
included, as the REST server encodes it; not in ``seconds``). For the first start and the
restart they count from the service built (REST serves from then on).
``longest_stretch_cpu_ms`` is the longest by CPU time, ``longest_stretch_ms`` its wall time,
``longest_stretch_at`` the yield points before and after it (the service's named by the code
that called ``on_progress``), ``yields`` the yield points passed; with ``--repeat`` the run
whose longest stretch was shortest, every run's in ``stretch_runs_ms``.

``--per-host`` stripes the hosts' addresses across the leaves (``benchmarks.entries.striped``):
no leaf or pod has a prefix of its own, so aggregation switches, spines and cores hold an
entry per host (about 1,100 each at k = 16), as every fabric did before prefixes.

    python -m benchmarks.controlplane --fat-tree 16 [--per-host] [--out bench/controlplane.json]
"""
from __future__ import annotations

import argparse
import cProfile
import gc
import io
import json
import os
import pstats
import sys
import tempfile
import time

from benchmarks.entries import striped
from benchmarks.scale import busiest_middle
from controller.model.clos import Clos, load_fabric
from controller.service import api
from controller.service.metrics import exposition
from controller.service.route_service import RouteService
from controller.service.store import StateStore
from controller.shell.core import PACKET_BATCH
from emulation.harness.busy_service import ManualClock
from emulation.harness.stretches import Stretches, YieldingSwitches

PAPER = (32, 64, 16)  # spines, leaves, hosts per leaf: the paper-scale restart's fabric
RING_HOSTS = 128
A2A_HOSTS = 32


def fat_tree(k: int) -> Clos:
    """The fabric file ``python -m topologies.clos --fat-tree K --bw 0`` writes, loaded."""
    from topologies.clos import fattree_fabric
    return load_fabric(json.loads(json.dumps(fattree_fabric(k, None, 0).to_dict())))


def leaf_spine() -> Clos:
    return load_fabric(json.loads(json.dumps(
        Clos.generate(*PAPER, 100.0, wiring=True).to_dict())))


def _leaves(fabric) -> list[str]:
    """The leaves, pods interleaved (on a fat-tree the first leaf of every pod, then the
    second ...), so that neighbours in this order sit in different pods (one pod on two tiers:
    the leaves in order)."""
    pods = fabric.leaves_by_pod()
    return [pod[i] for i in range(max(map(len, pods))) for pod in pods if i < len(pod)]


def _hosts_on(fabric, leaf) -> list[str]:
    return fabric.hosts_of_leaf[leaf]


def ring_hosts(fabric, n: int = RING_HOSTS) -> list[str]:
    """``n`` hosts, consecutive ranks on different leaves and, on a fat-tree, in different
    pods (every ring flow crosses the core): the m-th host of every leaf, m = 0, 1, ..."""
    leaves = _leaves(fabric)
    n = min(n, sum(len(_hosts_on(fabric, l)) - 1 for l in leaves))  # the last: all-to-all's
    out = []
    m = 0
    while len(out) < n:
        out += [_hosts_on(fabric, l)[m] for l in leaves][:n - len(out)]
        m += 1
    return out


def a2a_hosts(fabric, n: int = A2A_HOSTS) -> list[str]:
    """``n`` hosts on ``n`` leaves spread over the fabric (every pod of a k = 16 fat-tree),
    the last host of each (not the ring's)."""
    leaves = list(fabric.leaves)  # in declaration order: on a fat-tree, pod by pod
    n = min(n, len(leaves))
    step = max(1, len(leaves) // n)
    return [_hosts_on(fabric, leaves[i * step])[-1] for i in range(n)]


class Bench:
    def __init__(self, name: str, fabric, state_path: str, profile: str | None):
        self.name, self.fabric, self.state_path, self.profile = name, fabric, state_path, profile
        self.stretches = Stretches()  # the longest stretch between yields, per phase
        self.switches = YieldingSwitches(fabric.dpids.values(), fabric=fabric,
                                         stretches=self.stretches)
        self.clock = ManualClock(1000.0)
        self.out: dict = {"fabric": name, "switches": len(fabric.dpids),
                          "hosts": len(fabric.hosts), "phases": {}}
        self.svc: RouteService | None = None

    def timed(self, phase: str, fn, **extra):
        prof = cProfile.Profile() if self.profile else None
        sent = len(self.switches.sent)
        self.tail = None
        self.stretches.start()
        t0, c0 = time.perf_counter(), time.process_time()
        if prof:
            prof.enable()
        result = fn()
        if prof:
            prof.disable()
        seconds, cpu = time.perf_counter() - t0, time.process_time() - c0
        if self.tail is not None:  # the shell's part before it yields, not in ``seconds``
            self.tail()
        stretch = self.stretches.stop()
        doc = {"seconds": round(seconds, 4), "cpu_s": round(cpu, 4),
               "messages": len(self.switches.sent) - sent,
               "longest_stretch_ms": stretch["wall_ms"],
               "longest_stretch_cpu_ms": stretch["cpu_ms"],
               "longest_stretch_at": stretch["at"], "yields": stretch["yields"], **extra}
        if isinstance(result, dict):
            doc.update(result)
        self.out["phases"][phase] = doc
        print(f"{self.name}: {phase}: {seconds * 1e3:,.1f} ms ({doc['cpu_s'] * 1e3:,.1f} ms "
              f"CPU), {doc['messages']:,} messages; longest stretch "
              f"{stretch['cpu_ms']:,.1f} ms CPU ({stretch['at']})", file=sys.stderr, flush=True)
        if prof:
            tag = self.name.split()[0] + ("-per-host" if "per host" in self.name else "")
            path = os.path.join(self.profile, f"{tag}-{phase}.prof")
            prof.dump_stats(path)
            doc["profile"] = path
        return result

    def service(self) -> RouteService:
        st = self.stretches

        def sleep(s: float) -> None:  # the shell's hub.sleep: a yield
            st.mark("sleep")
            self.clock.sleep(s)
        svc = RouteService(self.switches, self.fabric, store=StateStore(self.state_path),
                           clock=self.clock, sleep=sleep, on_progress=st.pause)
        gc.freeze()  # as both adapters do once the shell is built (controller/shell/core.py)
        st.start("service built")  # REST serves from here on (the shell starts it after)
        return svc

    def connect_all(self) -> dict:
        f, svc = self.fabric, self.svc
        for name in f.switches():
            svc.switch_connected(f.dpids[name], {p: True for p in f.ports[name].values()})
            self.stretches.mark("switch connected")  # the shell yields between switches
        ready = not svc.reconciler.pending and len(svc.installed) == len(f.dpids)
        return {"ready": ready, "entries": sum(len(s.rules) for s in svc.installed.values())}

    def first_start(self) -> dict:
        self.svc = self.service()
        return self.connect_all()

    def lldp_round(self) -> dict:
        f, svc, sw = self.fabric, self.svc, self.switches
        sw.packets_out.clear()
        self.clock.sleep(1.0)
        svc.tick()
        self.stretches.mark("tick")
        frames = [(f.dpids[f.peer(f.switch_of_dpid[d], port)],
                   f.port(f.peer(f.switch_of_dpid[d], port), f.switch_of_dpid[d]), frame)
                  for d, port, frame in sw.packets_out
                  if f.peer(f.switch_of_dpid[d], port) in f.dpids]
        for k in range(0, len(frames), PACKET_BATCH):
            svc.packets_in(frames[k:k + PACKET_BATCH])
            self.stretches.mark("packet batch")  # the shell yields between batches
        sent = len(sw.packets_out)
        sw.packets_out.clear()
        return {"probes": sent, "delivered": len(frames)}

    def restart(self) -> dict:
        self.svc.tx.store.close() if hasattr(self.svc.tx.store, "close") else None
        self.svc = self.service()
        return self.connect_all()

    def post(self, doc: dict) -> dict:
        code, view = api.handle(self.svc, "POST", "/v1/jobs", json.dumps(doc).encode())
        if code != 201:
            raise RuntimeError(f"{self.name}: POST {doc['id']}: {code} {view}")
        self.tail = lambda: json.dumps(view)  # the REST server encodes the answer
        return {"flows": len(view["routes"]), "rules": view["rules"],
                "install_ms": view["install_ms"]}

    def views(self) -> dict:
        out = {}
        for path in ("/v1/jobs", "/v1/jobs/ring", "/v1/links", "/v1/fabric", "/v1/routes"):
            t0 = time.perf_counter()
            code, doc = api.handle(self.svc, "GET", path)
            json.dumps(doc)
            out[path] = round((time.perf_counter() - t0) * 1e3, 2)
            self.stretches.mark(f"GET {path}")  # one request each
            if code != 200:
                raise RuntimeError(f"{self.name}: GET {path}: {code}")
        t0 = time.perf_counter()
        exposition(self.svc)
        out["/metrics"] = round((time.perf_counter() - t0) * 1e3, 2)
        return {"ms": out}

    def core_link(self) -> tuple[str, str]:
        """(lower, upper) of the top link of the first ring flow that crosses the core (two
        tiers: the uplink of the first routed flow)."""
        view = api.handle(self.svc, "GET", "/v1/jobs/ring")[1]
        paths = [r.get("path") for r in view["routes"]]
        for path in paths:
            if path and len(path) == 5:
                return path[1], path[2]
        for r in view["routes"]:
            if r.get("spine") is not None:  # a leaf-spine route names its spine
                return self.fabric.hosts[r["src"]], r["spine"]
        raise RuntimeError("no routed ring flow")

    def port(self, link: tuple[str, str], up: bool) -> dict:
        lower, upper = link
        self.svc.port_changed(self.fabric.dpids[lower], self.fabric.port(lower, upper), up)
        ev = self.svc.state.events[-1]
        return {"link": f"{lower}-{upper}", "moved_flows": ev.get("moved_flows"),
                "rules": ev.get("rules"), "error": ev.get("error")}

    def lose(self, sw: str) -> dict:
        """``sw`` lost, as one that powers off: its control connection drops, then its
        neighbours' reports of their ports to it, down, reach the service in one batch (the
        shell's ``_report_ports`` gathers a lost switch's reports, ``decide.switch_going``)."""
        f, svc = self.fabric, self.svc
        ports = [(f.dpids[n], f.port(n, sw), False, None) for n in f.neighbours(sw)
                 if n in f.dpids]
        svc.switch_disconnected(f.dpids[sw])
        self.stretches.mark("switch disconnected")  # a change of its own, then the ports
        svc.ports_changed(ports, self.clock())
        ev = svc.state.events[-1]
        return {"switch": sw, "links": len(ports), "moved_flows": ev.get("moved_flows"),
                "rules": ev.get("rules"), "error": ev.get("error")}

    def come_back(self, sw: str) -> None:
        """``sw``'s links up again and the switch reconnected (not timed)."""
        f, svc = self.fabric, self.svc
        svc.ports_changed([(f.dpids[n], f.port(n, sw), True, None) for n in f.neighbours(sw)
                           if n in f.dpids], self.clock())
        svc.switch_connected(f.dpids[sw], {p: True for p in f.ports[sw].values()})

    def delete(self) -> dict:
        for jid in ("a2a", "ring"):
            code, doc = api.handle(self.svc, "DELETE", f"/v1/jobs/{jid}")
            if code != 200:
                raise RuntimeError(f"{self.name}: DELETE {jid}: {code} {doc}")
        return {}

    def run(self) -> dict:
        f = self.fabric
        self.timed("first_start", self.first_start)
        self.timed("lldp_round", self.lldp_round)
        self.timed("restart", self.restart)
        ring = ring_hosts(f)
        self.timed("post_ring", lambda: self.post({"id": "ring", "collective": "ring_allreduce",
                                                    "ranks": ring, "bytes": 1e8}))
        hosts = a2a_hosts(f)
        flows = [{"src": s, "dst": d, "bytes": 1e6} for s in hosts for d in hosts if s != d]
        self.timed("post_all_to_all", lambda: self.post({"id": "a2a", "flows": flows}))
        self.timed("views", self.views)
        link = self.core_link()
        self.timed("link_down", lambda: self.port(link, False))
        self.clock.sleep(1.0)
        self.timed("link_up", lambda: self.port(link, True))
        lost = busiest_middle(f, api.handle(self.svc, "GET", "/v1/jobs/ring")[1]["routes"])
        self.clock.sleep(1.0)
        self.timed("switch_lost", lambda: self.lose(lost))
        self.come_back(lost)
        self.timed("delete", self.delete)
        return self.out


STRETCH = ("longest_stretch_ms", "longest_stretch_cpu_ms", "longest_stretch_at")


def fastest(runs: list[dict]) -> dict:
    """One fabric's runs as one: per phase the fastest run, with every run's seconds; the
    longest stretch is the run's whose longest stretch was shortest (by CPU), with every
    run's (``stretch_runs_ms``, CPU)."""
    out = dict(runs[0], phases={})
    for phase in runs[0]["phases"]:
        docs = [r["phases"][phase] for r in runs]
        calm = min(docs, key=lambda d: d["longest_stretch_cpu_ms"])
        out["phases"][phase] = dict(min(docs, key=lambda d: d["seconds"]),
                                    runs_s=[d["seconds"] for d in docs],
                                    **{k: calm[k] for k in STRETCH},
                                    stretch_runs_ms=[d["longest_stretch_cpu_ms"] for d in docs])
    return out


def top(path: str, n: int = 25) -> str:
    out = io.StringIO()
    st = pstats.Stats(path, stream=out)
    st.sort_stats("cumulative").print_stats(n)
    st.sort_stats("tottime").print_stats(n)
    return out.getvalue()


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m benchmarks.controlplane",
                                 description=__doc__.split("\n")[0])
    ap.add_argument("--fat-tree", type=int, default=16, metavar="K", help="even k (16)")
    ap.add_argument("--out", default=None, help="JSON results (bench/controlplane.json)")
    ap.add_argument("--profile", default=None, metavar="DIR",
                    help="write a cProfile of every phase to DIR and print its top entries")
    ap.add_argument("--per-host", action="store_true",
                    help="stripe the hosts' addresses across the leaves (benchmarks/entries.py's "
                         "per_host): no leaf or pod has a prefix of its own, every switch "
                         "above the leaves holds an entry per host, as before prefixes")
    ap.add_argument("--repeat", type=int, default=1, metavar="N",
                    help="run every fabric N times and keep each phase's fastest run (a "
                         "shared machine's noise only ever adds time)")
    ap.add_argument("--only", choices=("fat-tree", "leaf-spine"), default=None,
                    help="run one fabric only (no ratios)")
    args = ap.parse_args(argv)
    if args.profile:
        os.makedirs(args.profile, exist_ok=True)
    fabrics = []
    if args.only != "leaf-spine":
        fabrics.append((f"fat-tree k={args.fat_tree}", lambda: fat_tree(args.fat_tree)))
    if args.only != "fat-tree":
        fabrics.append(("leaf-spine {} x {} x {}".format(*PAPER), leaf_spine))
    if args.per_host:
        fabrics = [(f"{name}, per host", lambda build=build: striped(build()))
                   for name, build in fabrics]
    command = " ".join(["python -m benchmarks.controlplane", f"--fat-tree {args.fat_tree}"]
                       + (["--per-host"] if args.per_host else [])
                       + ([f"--repeat {args.repeat}"] if args.repeat > 1 else [])
                       + ([f"--only {args.only}"] if args.only else []))
    result = {"command": command, "python": sys.version.split()[0], "repeat": args.repeat,
              "per_host": args.per_host, "fabrics": []}
    with tempfile.TemporaryDirectory() as tmp:
        for k, (name, build) in enumerate(fabrics):
            runs = []
            for r in range(args.repeat):
                b = Bench(name, build(), os.path.join(tmp, f"state{k}-{r}.db"), args.profile)
                runs.append(b.run())
            result["fabrics"].append(fastest(runs))
    gc.unfreeze()  # the heaps frozen by each service built (a caller's process goes on)
    if len(result["fabrics"]) == 2:
        a, b = (x["phases"] for x in result["fabrics"])
        result["ratio"] = {p: round(a[p]["seconds"] / b[p]["seconds"], 2)
                           for p in a if b[p]["seconds"]}
    if args.profile:
        for fab in result["fabrics"]:
            for phase, doc in fab["phases"].items():
                print(f"==== {fab['fabric']}: {phase}\n{top(doc['profile'])}")
    text = json.dumps(result, indent=2)
    if args.out:
        os.makedirs(os.path.dirname(args.out) or ".", exist_ok=True)
        with open(args.out, "w") as fh:
            fh.write(text + "\n")
        print(f"benchmarks.controlplane: wrote {args.out}", file=sys.stderr)
    else:
        print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
