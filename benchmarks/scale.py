"""Benchmark of the control plane on three-tier fat-trees at production scale (the real
controller and Open vSwitch bridges, no hosts): JSON in bench/scale.json.

For every ``--fat-tree K`` a k-ary fat-tree as ``python -m topologies.clos --fat-tree K --bw 0``
declares it (``topologies.clos.fattree_fabric``: names, datapath ids, ports, addresses): every
switch of every tier an Open vSwitch netdev bridge with its declared datapath id, every link
(leaf-aggregation, aggregation-core) a pair of patch ports on its declared port numbers
(``reconcile.build_bridges``; k = 16: 320 bridges, 2,048 links, 1,024 hosts declared, none
emulated). The controller runs with ``--mlroute-fabric`` (flow mode, ``auto``,
``--mlroute-dead-after`` 3 s, and LLDP probe rounds every second paced to 1,000 probes a
second, the defaults; ``--lldp-interval 0``: no rounds, as runs before 0.3.0 measured).
Measured, in order:

* static entries per tier: what the controller reports per switch once ready (GET /v1/fabric,
  ``rules`` grouped by the switch's tier), what the switches hold (``ovs-ofctl``: flows and
  groups) and what the rule builders give without a switch (``benchmarks.entries.count``,
  flow mode, and their groups);
* the first start on empty switches until ready (every switch reconciled) and its OpenFlow
  messages; a restart from the state file until ready, its messages (0: hitless) and REST
  latency meanwhile (GET /v1/jobs every 50 ms), once every switch was connected 10 s (Open
  vSwitch's longest back-off, 8 s, and a margin: a shorter connection doubles it, and the
  restart would wait for that) and its ``max_backoff`` of 1 s was made to take
  (``reconcile.backoff_takes``): ``reconcile.start_and_restart``; for both,
  when the first and the last switch connected (``*_connected``, GET /v1/ready polled every
  50 ms: a restarted controller waits for Open vSwitch's reconnect backoff), and the
  switches' side by Open vSwitch's log (``*_switch_connects``, ``benchmarks.ovs_connects``:
  when they connected, tries that failed, the longest back-off announced);
* POST of a ring All-Reduce of 128 hosts (fewer if the fabric has fewer), consecutive ranks in
  different pods, then of an all-to-all of 32 hosts (992 flows): time until answered (the
  answer comes once every switch confirmed its entries), its messages, REST latency meanwhile;
  then until the controller has sent nothing for 3 s (``auto``'s off-path stage);
* a link failure re-planned: the aggregation-core link (leaf-spine on two tiers) that most of
  the ring's routes cross, its patch ports deleted at both ends in one transaction: time until
  GET /v1/jobs/ring routes nothing over it (polled every 20 ms), messages, REST latency; the
  ports added back: time until GET /v1/fabric no longer lists it down; then the hold-down
  (5 s) and until the controller has sent nothing for 3 s (the re-optimisation it brings);
  after each failure's re-plan, too, until nothing was sent for 3 s (``quiet_after``:
  ``auto``'s off-path stage may move more routes then);
* a switch failure re-planned: the aggregation switch (spine) most of the ring's routes cross,
  its controller target moved to an unused port (its tables stay): time until the ring's
  routes leave it (includes the 3 s a disconnected switch counts as still forwarding); pointed
  back: time until it is reconciled and the fabric ready again;
* a switch lost, as one that powers off: the same aggregation switch's links all deleted at
  once (both ends, one transaction: its neighbours report their ports down) and its controller
  target moved away: time until the ring's routes leave it (no grace time: the links are
  down); its links and controller back: time until it is reconciled, no link of it is down
  and the fabric is ready again.

Every phase also records (``meter``) its wall time, the CPU seconds the controller and
ovs-vswitchd used, the load average and the controller's own counters (/metrics: messages,
planner and install seconds, recoveries, moved flows); failures also the routes each job moved
and the controller's last events, and for port failures when the controller received the first
port change (``detected_s``, from the command; Open vSwitch applies a transaction of many
del-ports over up to a second at k = 16) and the seconds from then until the routes left
(``replanned_s_after_detected``).

REST latency is sampled with ``GET /v1/jobs`` every 50 ms, which the controller answers by
default from native threads (``--mlroute-rest-native-reads``); ``--rest green`` starts the
controllers with ``--nomlroute-rest-native-reads`` (every request on the event loop), the
comparison: ``settings.rest_native_reads`` says which.

At the end, ``model`` (``benchmarks.scale_model``): per-switch fits of the fat-trees' start
and restart figures, and what they predict for k = 32 with its static entries counted (this
machine cannot build k = 32's 32,768 patch ports in reasonable time: see that module).

The same is measured first on the paper's two-tier fabric (32 spines x 64 leaves, 16 hosts per
leaf, 96 bridges; ``--quick``: 8 x 16 x 4) in the same run, and each fat-tree's figures are
also given as ratios to it (``ratios_to_baseline``). The JSON is rewritten after every fabric.

    python -m benchmarks.scale [--fat-tree K ...] [--out bench/scale.json] [--quick]
                               [--logs DIR] [--only start [--merge]]

``--only start``: each fabric's first start and restart only (a minute or two at k = 16);
with ``--merge`` they replace only those figures in ``--out`` (an earlier whole run's,
``merge_start``), whose jobs' and failures' figures stay.

Needs root and Open vSwitch (no Mininet). Runs one controller at a time on ports 6653 and 8080,
removes every bridge it made (also on Ctrl-C or SIGTERM); the controller logs, fabric files
and state files go to ``--logs`` (default: a temporary folder, removed).
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
import traceback

from benchmarks import entries, ovs_connects, scale_model
from benchmarks.reconcile import (
    RestPoller,
    _transactions,
    _wait_ready,
    patch_commands,
    point,
    start_and_restart,
    switch_links,
)
from controller.discovery.lldp import LLDP_INTERVAL
from controller.enforcement.clos_rules import clos_static_rules
from controller.model.clos import Clos
from emulation.harness import fabricnet
from emulation.harness.controller_proc import framework, listening
from topologies.clos import fattree_fabric

PAPER = (32, 64, 16)  # spines, leaves, hosts per leaf: reconcile's paper-scale restart
QUICK_PAPER = (8, 16, 4)
KS = (4, 8, 16)
RING = 128  # ranks of the ring (at most the fabric's hosts)
ALL_TO_ALL = 32  # hosts of the all-to-all: 32 x 31 = 992 flows
DEAD_AFTER = 3.0  # the controller's default --mlroute-dead-after
HOLD_DOWN = 5.0  # the controller's default --mlroute-hold-down: auto re-optimises after it
ROUTE_POLL = 0.02  # seconds between GETs while waiting for a re-plan
UNUSED_PORT = 6999  # where a "failed" switch looks for its controller
OF_PORT = 6653  # reconcile._controller's OpenFlow port
WAIT = 600.0  # seconds any one wait may take
MESSAGES = "mlroute_openflow_messages_total"

# the figures compared with the two-tier baseline (paths into a fabric's result)
FIGURES = ("entries", "first_start_ready_s", "first_start_messages",
           "first_start_meter.controller_cpu_s", "first_start_meter.ovs_cpu_s",
           "restart_ready_s", "restart_messages", "restart_meter.controller_cpu_s",
           "restart_meter.ovs_cpu_s", "rest_latency_ms_during_reconcile.median",
           "rest_latency_ms_during_reconcile.max",
           *(f"post.{job}.{x}" for job in ("ring", "all_to_all")
             for x in ("answered_s", "messages", "rest_ms.median", "rest_ms.max")),
           "link_failure.replanned_s", "link_failure.messages", "link_failure.rest_ms.median",
           "link_failure.rest_ms.max", "link_failure.restored.reported_s",
           "switch_failure.replanned_s", "switch_failure.messages",
           "switch_failure.rest_ms.median", "switch_failure.rest_ms.max",
           "switch_failure.restored.ready_s", "switch_loss.replanned_s", "switch_loss.messages",
           "switch_loss.rest_ms.median", "switch_loss.rest_ms.max",
           "switch_loss.restored.ready_s")


# a fabric's first start and restart (``start_and_restart`` and the readings ``measure`` adds
# to them): all that an ``--only start`` run measures, and all it replaces when merged into an
# earlier whole run's JSON (``merge_start``)
START_KEYS = ("bridges", "build_s", "first_start_connected", "first_start_ready_s",
              "first_start_messages", "entries", "first_start_meter", "first_start_sync",
              "entries_by_tier", "connected_before_restart_s", "restart_connected",
              "restart_ready_s", "restart_messages", "rest_latency_ms_during_reconcile",
              "ratio_restart_to_first_start", "restart_meter", "restart_sync",
              "first_start_switch_connects", "restart_switch_connects")


# ---- pure helpers (tests/test_scale_bench.py) ------------------------------------------------
def level(fabric, sw: str) -> int:
    """0 for a leaf, 1 for an aggregation switch or a spine, 2 for a core."""
    return fabric.tier_of[sw]


def interleave(lists: list[list[str]]) -> list[str]:
    """Round robin over ``lists``: the first of each, then the second of each, ...

    >>> interleave([["a", "b", "c"], ["x"], ["p", "q"]])
    ['a', 'x', 'p', 'b', 'q', 'c']
    """
    out, i = [], 0
    while any(i < len(x) for x in lists):
        out += [x[i] for x in lists if i < len(x)]
        i += 1
    return out


def spread(fabric, n: int) -> list[str]:
    """``n`` hosts (at most all), consecutive ones in different pods (leaves on two tiers)
    while there are several, each pod's hosts taken over its leaves in turn."""
    groups = [interleave([fabric.hosts_of_leaf.get(leaf, []) for leaf in pod])
              for pod in fabric.leaves_by_pod()]
    return interleave(groups)[:n]


def ring_job(fabric, n: int = RING) -> dict:
    return {"id": "ring", "collective": "ring_allreduce", "ranks": spread(fabric, n),
            "bytes": 1e8}


def all_to_all_job(fabric, n: int = ALL_TO_ALL) -> dict:
    hosts = spread(fabric, n)
    return {"id": "a2a", "flows": [{"src": a, "dst": b, "bytes": 1e6, "proto": "udp",
                                    "sport": 50000, "dport": 4791}  # apart from the ring's
                                   for a in hosts for b in hosts if a != b]}


def hops(fabric, route: dict) -> list[tuple[str, str]]:
    """The switch links (lower, upper) a route of the routes format crosses, every part of a
    split flow: a Clos route names its path, a leaf-spine route its spine."""
    out = []
    for part in route.get("split") or [route]:
        if part.get("path"):
            p = part["path"]
            out += [(a, b) if level(fabric, a) < level(fabric, b) else (b, a)
                    for a, b in zip(p, p[1:])]
        elif part.get("spine"):
            out += [(fabric.hosts[route["src"]], part["spine"]),
                    (fabric.hosts[route["dst"]], part["spine"])]
    return out


def busiest_link(fabric, routes: list[dict]) -> tuple[str, str] | None:
    """The link of the top tier (aggregation-core, leaf-spine) the most routes cross (ties:
    the first by name); None if no route crosses one."""
    top = max(level(fabric, sw) for sw in fabric.switches())
    count: dict[tuple[str, str], int] = {}
    for r in routes:
        for link in set(hops(fabric, r)):
            if level(fabric, link[1]) == top:
                count[link] = count.get(link, 0) + 1
    return min(count, key=lambda x: (-count[x], x)) if count else None


def busiest_middle(fabric, routes: list[dict]) -> str | None:
    """The aggregation switch (spine) the most routes cross (ties: the first by name)."""
    count: dict[str, int] = {}
    for r in routes:
        for sw in {s for link in hops(fabric, r) for s in link if level(fabric, s) == 1}:
            count[sw] = count.get(sw, 0) + 1
    return min(count, key=lambda x: (-count[x], x)) if count else None


def routes_over(fabric, routes: list[dict], link=None, switch=None) -> int:
    """Routes crossing ``link`` (lower, upper), or passing through ``switch``."""
    return sum(1 for r in routes
               if any(x == link or switch in x for x in hops(fabric, r)))


def _key(route: dict) -> tuple:
    return tuple(route.get(k) for k in ("job", "src", "dst", "proto", "sport", "dport"))


def _where(route: dict):
    parts = route.get("split") or [route]
    return tuple((tuple(p.get("path") or ()), p.get("spine"), p.get("share")) for p in parts)


def moved(before: list[dict], after: list[dict]) -> dict[str, int]:
    """Per job, its routes (GET /v1/routes) that take another way in ``after``.

    >>> a = [{"job": "j", "src": "h0", "dst": "h1", "spine": "s0"},
    ...      {"job": "j", "src": "h1", "dst": "h0", "spine": "s1"}]
    >>> moved(a, [a[0], dict(a[1], spine="s2")])
    {'j': 1}
    """
    was = {_key(r): _where(r) for r in before}
    out: dict[str, int] = {}
    for r in after:
        if _key(r) in was and was[_key(r)] != _where(r):
            out[r["job"]] = out.get(r["job"], 0) + 1
    return out


def by_tier(fabric, values: dict[str, int | None]) -> dict:
    """Per tier (leaf, agg, core; leaf, spine): switches, per switch min and max, total, of
    ``values`` (switch -> count; None counted as 0), in ``benchmarks.entries``' shape."""
    per: dict[str, list[int]] = {}
    for sw in fabric.switches():
        per.setdefault(entries._tier(fabric, sw), []).append(values.get(sw) or 0)
    return {t: {"switches": len(v), "per_switch_min": min(v), "per_switch_max": max(v),
                "total": sum(v)} for t, v in per.items()}


def sync_by_tier(fabric, seen: dict) -> dict:
    """Per tier, what the last read-and-repair of each switch cost (GET /v1/fabric's
    ``last_sync``): switches, messages sent, the sum and the max of its seconds."""
    per: dict[str, list[dict]] = {}
    for sw in fabric.switches():
        sync = (seen.get(sw) or {}).get("last_sync") or {}
        per.setdefault(entries._tier(fabric, sw), []).append(sync)
    return {t: {"switches": sum(1 for x in v if x), "messages": sum(x.get("messages", 0)
                                                                    for x in v),
                "seconds_sum": round(sum(x.get("seconds") or 0 for x in v), 3),
                "seconds_max": round(max((x.get("seconds") or 0 for x in v), default=0), 3)}
            for t, v in per.items()}


def lookup(doc: dict, path: str):
    """``doc``'s value at a dotted ``path``, None where it stops."""
    for key in path.split("."):
        if not isinstance(doc, dict) or key not in doc:
            return None
        doc = doc[key]
    return doc


def ratios(result: dict, base: dict, paths=FIGURES) -> dict:
    """Per figure path, ``result``'s value over ``base``'s (3 digits); None where either is
    missing or the base is 0.

    >>> ratios({"a": {"b": 3.0}, "c": 0}, {"a": {"b": 2.0}, "c": 0}, ("a.b", "c", "d"))
    {'a.b': 1.5, 'c': None, 'd': None}
    """
    out = {}
    for p in paths:
        x, y = lookup(result, p), lookup(base, p)
        ok = all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in (x, y))
        out[p] = round(x / y, 3) if ok and y else None
    return out


# ---- measurements on a running controller ----------------------------------------------------
def merge_start(old: dict, new: dict) -> dict:
    """``old`` (a whole run's JSON) with the start figures (``START_KEYS``) of every fabric
    that ``new`` (an ``--only start`` run) measured without error, each fabric's other
    figures kept: so that a rerun of the starts does not drop the jobs' and failures' figures
    of the last whole run. ``start_rerun`` says what was rerun (command, date, machine) and,
    per fabric, its load and wall time then (or its error: that fabric kept its old
    figures); the ratios to the baseline and the model are computed again. A fabric ``old``
    lacks is added as ``new`` has it."""
    out = json.loads(json.dumps(old))  # a deep copy: ``old`` stays as it was
    rerun = {"command": new["command"], "date": new["machine"]["date"],
             "machine": new["machine"], "complete": new.get("complete", False),
             "fabrics": {}}
    rows = {r["fabric"]: r for r in [out.get("baseline") or {}] + out["fabrics"] if r}
    for r in [new.get("baseline") or {}] + new["fabrics"]:
        if not r:
            continue
        name = r["fabric"]
        rerun["fabrics"][name] = {k: r[k] for k in ("loadavg_before", "loadavg_after",
                                                    "wall_s", "error") if k in r}
        if "error" in r:
            continue
        if name not in rows:
            rows[name] = {k: v for k, v in r.items() if k != "ratios_to_baseline"}
            out["fabrics"].append(rows[name])
        rows[name].update({k: r[k] for k in START_KEYS if k in r})
    base = out.get("baseline")
    for r in out["fabrics"]:
        if base and "error" not in base:
            r["ratios_to_baseline"] = ratios(r, base)
    out["start_rerun"] = rerun
    out["model"] = scale_model.predict(out)
    return out


def _say(msg: str) -> None:
    print(f"[scale {time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


def _until(predicate, t0: float, timeout: float = WAIT, interval: float = ROUTE_POLL,
           what: str = "condition") -> float:
    """Seconds from ``t0`` until ``predicate()`` held (polled every ``interval`` s)."""
    fabricnet.wait_until(predicate, timeout, interval=interval, what=what)
    return round(time.monotonic() - t0, 3)


def _routes(ctl, job: str) -> list[dict]:
    code, doc = ctl.rest("GET", f"/v1/jobs/{job}", timeout=60)
    assert code == 200, doc
    return doc["routes"]


def _fabric(ctl) -> dict:
    return ctl.rest("GET", "/v1/fabric", timeout=60)[1]


def _all_routes(ctl) -> list[dict]:
    return ctl.rest("GET", "/v1/routes", timeout=60)[1]["routes"]


OVS_PID = "/var/run/openvswitch/ovs-vswitchd.pid"


def cpu_s(pid: int | None) -> float | None:
    """CPU seconds (user + system) process ``pid`` has used, None if it is gone."""
    try:
        with open(f"/proc/{pid}/stat") as fh:
            fields = fh.read().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def waited_s(pid: int | None) -> float | None:
    """Seconds the threads of process ``pid`` waited for a CPU while runnable (the run
    queue delay of ``/proc/<pid>/task/*/schedstat``), None if it is gone: on two cores a
    controller that waits while Open vSwitch works answers REST late for that reason."""
    try:
        tasks = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return None
    total = 0
    for t in tasks:
        try:
            with open(f"/proc/{pid}/task/{t}/schedstat") as fh:
                total += int(fh.read().split()[1])
        except FileNotFoundError:  # a thread that ended since the listing (its wait is gone)
            continue
        except (OSError, IndexError, ValueError):
            return None
    return total / 1e9


def ovs_pid() -> int | None:
    try:
        with open(OVS_PID) as fh:
            return int(fh.read().strip())
    except (OSError, ValueError):
        return None


# the controller's own account of a phase: /metrics counters and histograms (sum, count)
COUNTERS = {"messages": MESSAGES, "planner_s": "mlroute_planner_seconds_sum",
            "planner_runs": "mlroute_planner_seconds_count",
            "install_s": "mlroute_install_seconds_sum",
            "installs": "mlroute_install_seconds_count",
            "recovery_s": "mlroute_recovery_seconds_sum",
            "recoveries": "mlroute_recovery_seconds_count",
            "moved_flows": "mlroute_moved_flows_total",
            "switch_syncs": "mlroute_switch_syncs_total"}


def scrape(ctl) -> dict[str, float]:
    """The controller's unlabelled metrics (GET /metrics)."""
    out = {}
    for line in ctl.client.metrics(timeout=60).splitlines():
        if line.startswith("mlroute_") and "{" not in line:
            name, value = line.split()[:2]
            out[name] = float(value)
    return out


def _less(now: float | None, then: float | None) -> float | None:
    return round(now - then, 2) if None not in (now, then) else None


class Meter:
    """What a phase cost since the meter was made: wall time, the CPU the controller and
    ovs-vswitchd used (two cores: where the time went, and whether something else took the
    machine), how long the controller waited for a CPU, the 1-minute load average, and the
    controller's own counters (``COUNTERS``: messages, planner and install seconds,
    recoveries, moved flows)."""

    def __init__(self, ctl=None):
        self.pid = ctl.proc.pid if ctl is not None else None
        self.wall, self.ctl0, self.ovs0 = time.monotonic(), cpu_s(self.pid), cpu_s(ovs_pid())
        self.waited0 = waited_s(self.pid)
        self.metrics0 = scrape(ctl) if ctl is not None else {}

    def since(self, ctl, from_process_start: bool = False) -> dict:
        """``from_process_start``: the controller's CPU and counters since its start."""
        c, o = cpu_s(ctl.proc.pid), cpu_s(ovs_pid())
        c0 = 0.0 if from_process_start else self.ctl0
        now = scrape(ctl)
        out = {"wall_s": round(time.monotonic() - self.wall, 2),
               "controller_cpu_s": _less(c, c0),
               "controller_waited_s": _less(waited_s(ctl.proc.pid),
                                            0.0 if from_process_start else self.waited0),
               "ovs_cpu_s": _less(o, self.ovs0),
               "loadavg_1min": round(os.getloadavg()[0], 2)}
        for key, name in COUNTERS.items():
            x = now.get(name, 0.0) - self.metrics0.get(name, 0.0)
            out[key] = round(x, 3) if key.endswith("_s") else int(x)
        return out


def quiesce(ctl, wait: float = 0.0, quiet: float = 3.0, ready: bool = True) -> dict:
    """After ``wait`` s, until the controller sent no OpenFlow message for ``quiet`` s (an
    auto group's off-path stage after a POST or a re-plan; the re-optimisation a returned
    link brings after the hold-down, 5 s), and (``ready``) every switch is reconciled: what
    it cost meanwhile."""
    meter = Meter(ctl)
    time.sleep(wait)
    last, since = scrape(ctl).get(MESSAGES), time.monotonic()
    deadline = since + WAIT
    while time.monotonic() - since < quiet:
        if time.monotonic() > deadline:
            raise TimeoutError(f"the controller still sends messages after {WAIT:g} s")
        time.sleep(1.0)  # a scrape is not free: about 0.1 s of the controller at k = 16
        now = scrape(ctl).get(MESSAGES)
        if now != last:
            last, since = now, time.monotonic()
    if ready:
        _wait_ready(ctl, WAIT)
    return meter.since(ctl)


def _quiet_after(ctl, routes: list[dict], ready: bool = True) -> dict:
    """``quiesce``, and the routes of each job that moved meanwhile (from ``routes``)."""
    spent = quiesce(ctl, ready=ready)
    spent["moved_routes"] = moved(routes, _all_routes(ctl))
    return spent


def on_switches(fabric) -> dict:
    """Flow entries and groups each bridge holds (``ovs-ofctl``), per tier."""
    flows, groups = {}, {}
    for sw in fabric.switches():
        out = subprocess.run(["ovs-ofctl", "-O", "OpenFlow13", "dump-aggregate", sw],
                             capture_output=True, text=True, timeout=60, check=True).stdout
        flows[sw] = int(out.split("flow_count=")[1].split()[0])
        out = subprocess.run(["ovs-ofctl", "-O", "OpenFlow13", "dump-groups", sw],
                             capture_output=True, text=True, timeout=60, check=True).stdout
        groups[sw] = sum(1 for line in out.splitlines() if "group_id=" in line)
    return {"flows": by_tier(fabric, flows), "groups": by_tier(fabric, groups)}


def builders(fabric) -> dict:
    """Static entries per tier from the rule builders, no switch (flow mode), and groups."""
    return {"flows": entries.count(fabric)["flow"]["tiers"],
            "groups": by_tier(fabric, {sw: len(clos_static_rules(fabric, sw)[1])
                                       for sw in fabric.switches()})}


def post(ctl, job: dict) -> dict:
    """POST ``job``: seconds until answered, messages, REST latency meanwhile."""
    meter = Meter(ctl)
    with RestPoller(ctl) as poller:
        t0 = time.monotonic()
        code, doc = ctl.rest("POST", "/v1/jobs", job, timeout=WAIT)
        answered = time.monotonic() - t0
    assert code == 201, doc
    spent = meter.since(ctl)
    return {"id": job["id"], "hosts": len(job.get("ranks") or {f["src"] for f in job["flows"]}),
            "flows": len(doc["routes"]), "answered_s": round(answered, 3),
            "messages": spent["messages"], "meter": spent,
            "answer": {k: v for k, v in doc.items()
                       if isinstance(v, (int, float, str)) and k not in ("id", "created")},
            "rest_ms": poller.summary(raw=True)}


def _events(ctl, n: int = 6) -> list[dict]:
    return _fabric(ctl)["events"][-n:]


def _phase(ctl, act, done, what: str) -> tuple[dict, float, dict]:
    """``act()`` (its own figures, a dict), then the seconds from just before it until
    ``done()`` held; with the controller's counters and the REST latency meanwhile:
    (figures of the act, seconds, {"messages", "meter", "rest_ms"})."""
    meter = Meter(ctl)
    with RestPoller(ctl) as poller:
        t0 = time.monotonic()
        acted = act() or {}
        seconds = _until(done, t0, what=what)
    spent = meter.since(ctl)
    return acted, seconds, {"messages": spent["messages"], "meter": spent,
                            "rest_ms": poller.summary(raw=True)}


def _failed(ctl, out: dict, key: str, act, done, what: str, was: list[dict],
            ready: bool = True, seen=None) -> None:
    """A failure's figures into ``out``: ``key`` (seconds until ``done``), counters, routes
    moved (against ``was``), REST latency, what ``seen()`` reads right then, the quiet period
    after and the last events."""
    wall0 = time.time()
    acted, out[key], spent = _phase(ctl, act, done, what)
    out.update(acted)
    detected = [e["detected"] for e in _events(ctl, 12) if e.get("detected", 0) >= wall0]
    if detected:  # the emulation's own delay, then the controller's part
        out["detected_s"] = round(min(detected) - wall0, 3)
        out[f"{key}_after_detected"] = round(out[key] - out["detected_s"], 3)
    out["meter"], out["messages"] = spent["meter"], spent["messages"]
    out["moved_routes"] = moved(was, now := _all_routes(ctl))
    out["rest_ms"] = spent["rest_ms"]
    if detected:  # the samples sent while the controller handled it: first report to done
        since = min(detected) - out["rest_ms"]["started_at"]
        until = since + out[f"{key}_after_detected"]
        handling = [ms for at, ms in zip(out["rest_ms"]["raw_at"], out["rest_ms"]["raw"])
                    if since <= at <= until]
        out["rest_ms_handling"] = {"samples": len(handling),
                                   "max": max(handling) if handling else None}
    out.update(seen() if seen else {})
    out["quiet_after"] = _quiet_after(ctl, now, ready=ready)
    out["events"] = _events(ctl)


def link_failure(ctl, fabric, job: str = "ring") -> dict:
    """The top-tier link most of ``job``'s routes cross fails (both patch ports deleted) and
    comes back (added again)."""
    routes = _routes(ctl, job)
    link = busiest_link(fabric, routes)
    assert link is not None, f"no route of {job} crosses a top-tier link"
    members = [x for x in switch_links(fabric) if x[:2] == link]
    name = "-".join(link)
    out = {"link": name, "routes_over_it": routes_over(fabric, routes, link=link)}

    def down() -> bool:
        return any(d.startswith(name) for d in _fabric(ctl)["links_down"])

    def delete() -> dict:
        t0 = time.monotonic()
        _transactions([c for x in members for c in (["del-port", x[0], x[4]],
                                                    ["del-port", x[1], x[5]])], 64)
        return {"del_port_s": round(time.monotonic() - t0, 3)}
    _failed(ctl, out, "replanned_s", delete,
            lambda: routes_over(fabric, _routes(ctl, job), link=link) == 0,
            f"{job}'s routes off {name}", _all_routes(ctl),
            seen=lambda: {"reported_down": down()})
    _, back, spent = _phase(
        ctl, lambda: _transactions([c for x in members for c in patch_commands(x)], 64),
        lambda: not down(), f"{name} reported back")
    out["restored"] = {"reported_s": back, **spent}
    return out


def switch_failure(ctl, fabric, job: str = "ring") -> dict:
    """The aggregation switch (spine) most of ``job``'s routes cross loses its controller
    (pointed at a port nobody listens on; its tables stay) and gets it back."""
    if listening(UNUSED_PORT):
        raise RuntimeError(f"port {UNUSED_PORT} is in use: it must stay unanswered")
    routes = _routes(ctl, job)
    sw = busiest_middle(fabric, routes)
    assert sw is not None, f"no route of {job} crosses an aggregation switch"
    out = {"switch": sw, "routes_through_it": routes_over(fabric, routes, switch=sw),
           "dead_after_s": DEAD_AFTER}
    _failed(ctl, out, "replanned_s", lambda: point(fabric, [sw], UNUSED_PORT),
            lambda: routes_over(fabric, _routes(ctl, job), switch=sw) == 0,
            f"{job}'s routes off {sw}", _all_routes(ctl), ready=False)  # the switch is away

    def back() -> bool:
        view = _fabric(ctl)
        return view["ready"] and sw not in view["missing_switches"]
    _, ready, spent = _phase(ctl, lambda: point(fabric, [sw], OF_PORT), back,
                             f"{sw} reconciled again")
    out["restored"] = {"ready_s": ready, **spent}
    return out


def switch_loss(ctl, fabric, job: str = "ring") -> dict:
    """The aggregation switch (spine) most of ``job``'s routes cross is lost, as one that
    powers off: every link of it goes down at once (its patch ports deleted at both ends in one
    transaction: its neighbours report their ports down) and its controller connection with
    them; then it comes back (links added again, controller pointed back)."""
    if listening(UNUSED_PORT):
        raise RuntimeError(f"port {UNUSED_PORT} is in use: it must stay unanswered")
    routes = _routes(ctl, job)
    sw = busiest_middle(fabric, routes)
    assert sw is not None, f"no route of {job} crosses an aggregation switch"
    members = [x for x in switch_links(fabric) if sw in x[:2]]
    out = {"switch": sw, "links": len(members),
           "routes_through_it": routes_over(fabric, routes, switch=sw)}

    def lose() -> dict:
        t0 = time.monotonic()
        _transactions([c for x in members for c in (["del-port", x[0], x[4]],
                                                    ["del-port", x[1], x[5]])]
                      + [["set-controller", sw, f"tcp:127.0.0.1:{UNUSED_PORT}"]], 1024)
        return {"del_port_s": round(time.monotonic() - t0, 3)}
    _failed(ctl, out, "replanned_s", lose,
            lambda: routes_over(fabric, _routes(ctl, job), switch=sw) == 0,
            f"{job}'s routes off {sw}", _all_routes(ctl), ready=False)

    def back() -> bool:
        view = _fabric(ctl)
        return (view["ready"] and sw not in view["missing_switches"]
                and not any(sw in d.split("-") for d in view["links_down"]))

    def restore() -> None:
        _transactions([c for x in members for c in patch_commands(x)], 1024)
        point(fabric, [sw], OF_PORT)
    _, ready, spent = _phase(ctl, restore, back, f"{sw} and its links back")
    out["restored"] = {"ready_s": ready, **spent}
    return out


def measure(fabric, name: str, workdir: str, lldp_interval: float = LLDP_INTERVAL,
            controller_args: tuple[str, ...] = (), only: str | None = None) -> dict:
    """Every figure of one fabric (the module's docstring), in one controller's life;
    ``only="start"``: the first start and the restart only."""
    result = {"fabric": name, "loadavg_before": [round(x, 2) for x in os.getloadavg()],
              "switches": len(fabric.switches()),
              "links": len(switch_links(fabric)),
              "hosts": len(fabric.host_leaves),
              "pods": len(fabric.leaves_by_pod())}

    meter: dict[str, Meter] = {}
    began: dict[str, tuple] = {}  # where Open vSwitch's log was when each start began

    def on_start(which: str) -> None:
        meter[which] = Meter()
        began[which] = (ovs_connects.log_end(), time.time())

    def after_first(ctl, out: dict) -> None:
        out["first_start_meter"] = meter["first"].since(ctl, from_process_start=True)
        out["first_start_switch_connects"] = ovs_connects.since_start(began["first"],
                                                                      fabric.switches())
        _say(f"{name}: ready after the first start ({out['first_start_ready_s']} s)")
        seen = _fabric(ctl)["seen"]
        out["first_start_sync"] = sync_by_tier(fabric, seen)
        out["entries_by_tier"] = {
            "controller": by_tier(fabric, {sw: s["rules"] for sw, s in seen.items()}),
            "switches": on_switches(fabric), "builders": builders(fabric)}

    def then(ctl, out: dict) -> None:
        out["restart_meter"] = meter["restart"].since(ctl, from_process_start=True)
        out["restart_switch_connects"] = ovs_connects.since_start(began["restart"],
                                                                  fabric.switches())
        _say(f"{name}: ready after the restart ({out['restart_ready_s']} s)")
        out["restart_sync"] = sync_by_tier(fabric, _fabric(ctl)["seen"])
        if only == "start":
            return
        steps = [("post.ring", lambda: post(ctl, ring_job(fabric))),
                 ("post.all_to_all", lambda: post(ctl, all_to_all_job(fabric))),
                 ("quiet.after_posts", lambda: quiesce(ctl)),
                 ("job_entries_by_tier", lambda: by_tier(
                     fabric, {sw: s["job_rules"] for sw, s in _fabric(ctl)["seen"].items()})),
                 ("link_failure", lambda: link_failure(ctl, fabric)),
                 ("quiet.after_link", lambda: quiesce(ctl, wait=HOLD_DOWN + 1)),
                 ("switch_failure", lambda: switch_failure(ctl, fabric)),
                 ("quiet.after_switch", lambda: quiesce(ctl, wait=HOLD_DOWN + 1)),
                 ("switch_loss", lambda: switch_loss(ctl, fabric))]
        for key, step in steps:
            _say(f"{name}: {key}")
            try:
                value = step()
            except Exception as e:  # noqa: BLE001 - recorded; the teardown still runs
                out["error"] = f"{key}: {type(e).__name__}: {e}"
                _say(f"{name}: {out['error']}\n{traceback.format_exc()}")
                return
            where, _, leaf = key.rpartition(".")
            (out.setdefault(where, {}) if where else out)[leaf] = value

    result.update(start_and_restart(workdir, fabric, name.replace(" ", "_").replace("=", ""),
                                    dead_after=DEAD_AFTER, then=then, raw=True,
                                    after_first=after_first, on_start=on_start,
                                    lldp_interval=lldp_interval,
                                    controller_args=controller_args))
    return result


def _machine() -> dict:
    ovs = subprocess.run(["ovs-vsctl", "--version"], capture_output=True, text=True,
                         timeout=30).stdout.splitlines()
    return {"cpus": os.cpu_count(), "python": platform.python_version(),
            "framework": framework(), "ovs": ovs[0] if ovs else None,
            "date": time.strftime("%Y-%m-%d")}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m benchmarks.scale",
                                 description=__doc__.split("\n")[0])
    ap.add_argument("--fat-tree", type=int, action="append", metavar="K",
                    help="a k-ary fat-tree to measure (repeat; default: 4, 8 and 16)")
    ap.add_argument("--quick", action="store_true",
                    help="k = 4 only, against a two-tier 8 x 16 x 4 instead of 32 x 64 x 16")
    ap.add_argument("--out", default=os.path.join("bench", "scale.json"))
    ap.add_argument("--logs", metavar="DIR",
                    help="keep the controller logs, fabric and state files here")
    ap.add_argument("--lldp-interval", type=float, default=LLDP_INTERVAL, metavar="S",
                    help="the controller's --mlroute-lldp-interval (default: the controller's "
                         f"{LLDP_INTERVAL:g} s; 0: no probe rounds)")
    ap.add_argument("--rest", choices=("native", "green"), default="native",
                    help="native: the controller's default (GET /v1/ready and /v1/jobs from "
                         "native threads); green: --nomlroute-rest-native-reads, every request "
                         "in a green thread of the event loop")
    ap.add_argument("--only", choices=("start",),
                    help="start: each fabric's first start and restart only (no jobs, no "
                         "failures)")
    ap.add_argument("--merge", action="store_true",
                    help="with --only start: keep --out's other figures (an earlier whole "
                         "run's), replace only each fabric's start figures (merge_start)")
    args = ap.parse_args(argv)
    if args.merge and args.only != "start":
        ap.error("--merge goes with --only start")
    earlier = None
    if args.merge:
        try:
            with open(args.out) as fh:
                earlier = json.load(fh)
        except (OSError, ValueError) as e:
            ap.error(f"--merge: {args.out} cannot be read as an earlier run's JSON: {e}")
    more = ("--nomlroute-rest-native-reads",) if args.rest == "green" else ()
    ks = [4] if args.quick else (args.fat_tree or list(KS))
    if any(k < 2 or k % 2 for k in ks):
        ap.error("--fat-tree takes even k >= 2")
    if os.geteuid() != 0:
        ap.error("needs root and Open vSwitch")
    from emulation.harness.session import install_interrupt_handler
    install_interrupt_handler()  # Ctrl-C or SIGTERM unwinds through every cleanup
    fabricnet.ensure_ovs()
    shape = QUICK_PAPER if args.quick else PAPER
    started = time.monotonic()
    result = {"command": "python -m benchmarks.scale " + " ".join(argv or sys.argv[1:]),
              "machine": _machine(),
              "settings": {"fat_trees": ks, "baseline": list(shape), "algorithm": "auto",
                           "mode": "flow", "dead_after_s": DEAD_AFTER, "ring_hosts": RING,
                           "all_to_all_hosts": ALL_TO_ALL, "rest_poll_s": 0.05,
                           "route_poll_s": ROUTE_POLL, "lldp_interval_s": args.lldp_interval,
                           "rest_native_reads": args.rest == "native", "only": args.only},
              "baseline": None, "fabrics": [], "complete": False}

    def write() -> None:
        os.makedirs(os.path.dirname(args.out) or ".", exist_ok=True)
        doc = result if earlier is None else merge_start(earlier, result)
        with open(args.out, "w") as fh:
            json.dump(doc, fh, indent=1)

    fabrics = [("leaf-spine {} x {} x {}".format(*shape),
                Clos.generate(*shape, 100.0, wiring=True))]
    fabrics += [(f"fat-tree k={k}", fattree_fabric(k)) for k in ks]
    with tempfile.TemporaryDirectory(prefix="mlroute-scale-") as tmp:
        workdir = args.logs or tmp
        os.makedirs(workdir, exist_ok=True)
        for i, (name, fabric) in enumerate(fabrics):
            _say(f"{name}: {len(fabric.switches())} bridges")
            t0 = time.monotonic()
            try:
                r = measure(fabric, name, workdir, args.lldp_interval, more, args.only)
            except Exception as e:  # noqa: BLE001 - recorded; the next fabric still runs
                r = {"fabric": name, "error": f"{type(e).__name__}: {e}"}
                _say(f"{name}: {r['error']}\n{traceback.format_exc()}")
            r["wall_s"] = round(time.monotonic() - t0, 1)
            r["loadavg_after"] = [round(x, 2) for x in os.getloadavg()]
            if i == 0:
                result["baseline"] = r
            else:
                r["ratios_to_baseline"] = ratios(r, result["baseline"])
                result["fabrics"].append(r)
            write()
    result["complete"] = True
    result["wall_s"] = round(time.monotonic() - started, 1)
    result["model"] = scale_model.predict(result)  # k = 32: the fits' prediction
    write()
    print(json.dumps(summary(result), indent=1))
    print(f"written to {args.out}")
    return 0


def summary(result: dict) -> dict:
    """The headline figures of every fabric, for the terminal."""
    keys = ("first_start_ready_s", "first_start_messages", "restart_ready_s",
            "restart_messages", "rest_latency_ms_during_reconcile.median",
            "rest_latency_ms_during_reconcile.max", "entries", "post.ring.answered_s",
            "post.all_to_all.answered_s", "link_failure.replanned_s",
            "link_failure.restored.reported_s", "switch_failure.replanned_s",
            "switch_failure.restored.ready_s", "switch_loss.replanned_s",
            "switch_loss.restored.ready_s", "error")
    rows = [result["baseline"] or {}] + result["fabrics"]
    return {r.get("fabric", "?"): {k: lookup(r, k) for k in keys if lookup(r, k) is not None}
            for r in rows}


if __name__ == "__main__":
    sys.exit(main())
