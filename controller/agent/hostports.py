"""Host mode on routers, the agent's side: for each host-mode part of its segments document
(``"ports"``) a source port that the routers' hash sends along the part's path, learned by
``portmap.learn``, reported to the controller (``POST /v1/hosts/{host}/ports``) and written
where the application reads it (``export``: the lines of ``GET /v1/jobs/{id}/ports``).

Why re-check the ports the document already has: a link or router that changed (even off the
part's path: a leaf's next-hop group lost a member) changes what the hash does, and only a
probe shows it. Each document version re-checks every port once (one probe per checked hop;
a port this agent learned or confirmed within ``FRESH_S`` is not probed again: its own report
changes the version); a port that now goes elsewhere is learned again with its map, and
withdrawn (reported with ``sport`` None) when no other is found in time: the controller would
otherwise go on serving a port that takes another path. A port that gets no answer at all is
kept: silence is no evidence of another path.

>>> e = {"job": "p", "flow": {"src": "h0_0", "dst": "h1_0", "proto": 6, "sport": 0,
...      "dport": 5201}, "part": 0, "dst_ip": "10.0.1.1", "proto": 6, "dport": 5201,
...      "path": ["l0", "s1", "l1"], "sport": None}
>>> net = lambda probes: {p: "s%d" % (p[1] % 2) for p in probes}  # a hash: port parity
>>> keeper = PortKeeper(net)
>>> report, ports = keeper.handle([e])
>>> [(r["sport"], r["path"]) for r in report], ports
([(49153, ['l0', 's1', 'l1'])], {('p', ('h0_0', 'h1_0', 6, 0, 5201), 0): 49153})
>>> print(export("h0_0", "10.0.0.1", [e], ports), end="")
# mlroute-agent h0_0 (host mode on routers): source_ip destination_ip protocol source_port destination_port
# job p
10.0.0.1 10.0.1.1 tcp 49153 5201
"""
from __future__ import annotations

import os
import time

from controller.agent import portmap
from controller.agent.portmap import TRIES, Target, checked_hops

FRESH_S = 5.0  # a port learned or confirmed this recently is not probed again
PROTO_NAMES = {6: "tcp", 17: "udp"}


def name_of(entry: dict) -> tuple:
    """(job, flow key, part): what names a part in the document and the report."""
    f = entry["flow"]
    return (entry["job"], (f["src"], f["dst"], f.get("proto", 6), f.get("sport", 0),
                           f.get("dport", 0)), entry["part"])


def target_of(entry: dict) -> Target:
    return Target(entry["dst_ip"], entry["proto"], entry["dport"],
                  checked_hops(entry["path"]))


def confirm(checks: dict, network, tries: int = TRIES) -> dict:
    """{name: hops seen} of ``checks`` ({name: (Target, port)}), each probed once and sent
    again (``tries`` rounds at most) while unanswered; a name left out never answered."""
    seen, left = {}, dict(checks)
    for _ in range(tries):
        if not left:
            break
        answers = network([(t.key, port, i + 2) for t, port in left.values()
                           for i in range(len(t.hops))])
        for name, (t, port) in list(left.items()):
            hops = tuple(answers.get((t.key, port, i + 2)) for i in range(len(t.hops)))
            if None not in hops:
                seen[name] = hops
                del left[name]
    return seen


class PortKeeper:
    """The agent's learned maps (``portmap.PortMap`` per destination, protocol and
    destination port) and the ports it checked lately; ``network``: ``portmap.Network``."""

    def __init__(self, network, clock=time.monotonic):
        self.network, self.clock = network, clock
        self.maps: dict = {}
        self.checked: dict = {}  # name -> (port, hops, when) learned or confirmed here
        self.probes = 0

    def handle(self, entries: list[dict], used: set | None = None) -> tuple[list, dict]:
        """One document's parts: (the entries to report, {name: port} of every part with a
        port that holds: kept, or learned now). ``used``: (proto, port) the host uses
        otherwise. A part whose port could not be found in time has none; one whose port
        the probes show going elsewhere now and for which no other was found is reported
        with ``sport`` None (withdrawn: the controller serves it no more)."""
        now = self.clock()
        targets = {name_of(e): target_of(e) for e in entries}
        by_name = {name_of(e): e for e in entries}
        held = {n: e["sport"] for n, e in by_name.items() if isinstance(e.get("sport"), int)}
        stale = {n: (targets[n], p) for n, p in held.items()
                 if self.checked.get(n, (None, None, -FRESH_S))[:2] != (p, targets[n].hops)
                 or now - self.checked[n][2] > FRESH_S}
        seen = confirm(stale, self._count)
        # A held port left out of ``seen`` never answered (hops unreachable, routers' ICMP
        # limits): no evidence of another path, so it is kept as it was, not withdrawn; the
        # next document version probes it again.
        gone = []  # held ports that go elsewhere now: withdrawn unless replaced
        for n, hops in seen.items():
            t, port = stale[n]
            if hops == t.hops:
                self.maps.setdefault(t.key, portmap.PortMap()).hops_of[port] = hops
                self.checked[n] = (port, hops, now)
            else:  # the routers hash otherwise now: that map is learned again
                self.maps[t.key] = portmap.PortMap({port: hops})
                del held[n]
                self.checked.pop(n, None)
                gone.append(n)
        todo = {n: t for n, t in targets.items() if n not in held}
        taken = set(used or ()) | {(targets[n].proto, p) for n, p in held.items()}
        learned = portmap.learn(todo, self.maps, self._count, taken) if todo else None
        found = {n: p for n, p in (learned.ports if learned else {}).items() if p}
        report = []
        for n, port in [*found.items(), *((n, None) for n in gone if n not in found)]:
            e = by_name[n]
            if port is not None:
                self.checked[n] = (port, targets[n].hops, self.clock())
            report.append({"job": e["job"], "flow": e["flow"], "part": e["part"],
                           "path": e["path"], "sport": port})
        self.checked = {n: c for n, c in self.checked.items() if n in targets}
        return report, {**held, **found}

    def _count(self, probes: list) -> dict:
        self.probes += len(probes)
        return self.network(probes)


def export(host: str, src_ip: str, entries: list[dict], ports: dict) -> str:
    """The host's ports for its applications, in ``GET /v1/jobs/{id}/ports``'s form, a
    comment line per job: source IP, destination IP, protocol, source port, destination
    port per connection (a part of a split flow is a connection)."""
    out = [f"# mlroute-agent {host} (host mode on routers): source_ip destination_ip "
           "protocol source_port destination_port\n"]
    job = None
    for e in entries:
        port = ports.get(name_of(e))
        if port is None:
            continue
        if e["job"] != job:
            job = e["job"]
            out.append(f"# job {job}\n")
        out.append(f"{src_ip} {e['dst_ip']} {PROTO_NAMES.get(e['proto'], e['proto'])} "
                   f"{port} {e['dport']}\n")
    return "".join(out)


def write(path: str, text: str) -> bool:
    """``text`` into ``path`` at once (a reader never sees half a file); False if unchanged."""
    try:
        with open(path) as fh:
            if fh.read() == text:
                return False
    except OSError:
        pass
    tmp = f"{path}.tmp"
    with open(tmp, "w") as fh:
        fh.write(text)
    os.replace(tmp, path)
    return True
