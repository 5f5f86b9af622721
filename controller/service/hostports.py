"""Host mode's side of a change: the source port of every host-mode flow part, learned by probes
through the switches' own tables (``enforcement/hostmode.py``), so it runs after the tables are
installed and before the change is committed. On fabrics without OpenFlow the hosts learn the
ports and report them (``hostreports.py``): a change keeps a reported port while its part's
path is unchanged, and probes nothing.
"""
from __future__ import annotations

import time
from collections.abc import Callable
from contextlib import AbstractContextManager, nullcontext

from controller.enforcement.hostmode import HostPorts, by_part
from controller.enforcement.modes import mode_of
from controller.enforcement.rules import part_sport
from controller.errors import ConflictError, InputError
from controller.model.clos import Clos
from controller.model.intent import flow_key
from controller.planners.plan import part_fields
from controller.service import hostreports
from controller.service.state import host_ports_of


def host_flows(records: dict) -> tuple[list, list]:
    """Host-mode flows as ((job id, flow key), flow, parts), and the (host, protocol, port)
    that flows of the other modes use, which host-mode flows must not take."""
    flows, taken = [], []
    for r in records.values():
        host = mode_of(r.mode).host_ports
        for flow, parts in r.flows_with_parts():
            if host:
                flows.append(((r.job.id, flow_key(flow)), flow, parts))
            elif parts:
                for i in range(len(parts)):
                    port = part_sport(flow, i, len(parts))
                    if port:
                        taken.append((flow.src, flow.proto, port))
    return flows, taken


def _where(records: dict, jid: str, fk: tuple, part: int):
    parts = records[jid].routes.get(fk) or ()
    return parts[part] if part < len(parts) else None


def change_of(fabric: Clos, records: dict, jid: str, fk: tuple, part: int, old, new,
              where=None) -> dict:
    """A ``port_changes`` entry: the part, its old and new port (None: none now) and where
    it is routed (``part_fields``; ``where``: the part's route if the caller has it)."""
    where = where or _where(records, jid, fk, part)
    return {"job": jid, "src": fk[0], "dst": fk[1], "part": part,
            "old_sport": old, "sport": new,  # bundles: members coded in it
            **(part_fields(fabric, where[0]) if where else {"spine": None})}


class FromHosts:
    """An installer's ``probe`` when its hosts learn host mode's ports (``shell/static.py``:
    routers take no packet-out)."""


FROM_HOSTS = FromHosts()


class HostPortService:
    """Chooses, keeps and refreshes host mode's ports; ``probe`` sends probes through the
    switches (the installer's), None when the switch connection cannot, ``FROM_HOSTS`` when
    the hosts report the ports (``hostreports.reported``)."""

    def __init__(self, probe=None, doc: dict | None = None, sleep=time.sleep):
        self.sleep = sleep  # the shell's: a pause before probing a contradicting answer again
        self.ports = HostPorts()
        self.from_hosts = probe is FROM_HOSTS
        self.probe = None if self.from_hosts else probe
        self.planes: dict = {}  # (job id, flow key) -> the plane of each committed part
        self.paths: dict = {}  # from hosts: (job id, flow key) -> each part's reported path
        self.restore(doc)  # the stored intent's ports (``doc``), if any

    def restore(self, doc: dict | None) -> None:
        """Take the ports of a stored intent (``state.host_ports_of``) as committed, so that
        the probes after a restart or a takeover keep every port that still leads where its
        part goes (``choose_ports``'s ``previous``): the hosts keep their connections. Hosts
        that learn the ports report them again instead."""
        if not self.from_hosts:
            self.ports.ports = host_ports_of(doc)

    def place(self, fabric: Clos, records: dict,
              waiting: Callable[[], AbstractContextManager] = nullcontext) -> dict:
        """Ports of every host-mode flow of ``records``; probes the leaves whose map is
        unknown or stale (their tables must be installed). Each round of probes is sent and
        waited for inside ``waiting()`` (the service lets views in: what the maps and
        counters learn is kept before and after, never during it)."""
        flows, taken = host_flows(records)
        if not flows:
            return {}
        if self.from_hosts:
            hostreports.check_dports(flows)
            return hostreports.kept(fabric, flows, self.ports.ports, self.paths)
        if self.probe is None:
            raise ConflictError("host mode: the switch connection cannot send probes")
        probe = self.probe

        def waited(probes):
            with waiting():
                return probe(probes)

        def paused(seconds: float) -> None:
            with waiting():
                self.sleep(seconds)
        return self.ports.place(fabric, flows, waited, taken, pause=paused)

    def commit(self, fabric: Clos, records: dict, ports: dict) -> list[dict]:
        """Keep the ports of committed ``records``; returns the flows whose port changed
        (the host opens the new connection before closing the old; with bundles a change of
        member alone changes the port, and the change names the ``members``), and those whose plane
        changed on the same port (the connection goes to the new plane's addresses all the
        same): with several planes each names its ``plane`` and ``old_plane``."""
        planes = {name: tuple(fabric.part_plane(where) for where, _ in parts)
                  for name, _flow, parts in host_flows(records)[0] if parts}
        moved = {(name, i) for name, qs in planes.items()
                 for i, (was, q) in enumerate(zip(self.planes.get(name, ()), qs)) if was != q}
        names = [p.name for p in fabric.planes] if fabric is not None else []
        changes = []
        for (jid, fk), part, old, new in self.ports.changes(ports, moved):
            where = _where(records, jid, fk, part)
            changes.append(change_of(fabric, records, jid, fk, part, old, new, where))
            if len(names) > 1 and where:
                was = self.planes.get((jid, fk), ())
                changes[-1].update(old_plane=names[was[part]] if part < len(was) else None,
                                   plane=names[fabric.part_plane(where[0])])
        self.ports.commit(ports)
        self.planes = planes
        if self.from_hosts:
            self.paths = hostreports.prune(self.paths, ports)
        if not any(mode_of(r.mode).host_ports for r in records.values()):
            self.ports.maps.clear()  # the pipeline goes with the last host job: learn again
        return changes

    def reported(self, fabric: Clos, records: dict, ports: dict, paths: dict) -> list[dict]:
        """Keep the ports and paths a host reported (``hostreports.merge``'s, in its
        ``{job id: {flow key: ports}}`` form); returns the parts whose kept port the report
        changed, ``commit``'s way: replaced by another, or withdrawn (``sport`` None). A
        part that had no port is no change."""
        changed = self.ports.changes(by_part(ports), set())
        self.ports.ports, self.paths = ports, paths
        return [change_of(fabric, records, jid, fk, part, old, new)
                for (jid, fk), part, old, new in changed]

    def needs_refresh(self, fabric: Clos, records: dict) -> bool:
        """Whether some host-mode flow has no port yet or one no longer reaches its hops (its
        key changed: a failure changed what its leaf's pipeline does for it)."""
        flows, _ = host_flows(records)
        if not flows:
            self.ports.maps.clear()
            self.ports.ports = {}
            self.planes = {}
            self.paths = {}
            return False
        if self.from_hosts:  # a port whose part moved is dropped; missing ones are awaited
            now = hostreports.kept(fabric, flows, self.ports.ports, self.paths)
            return any(p != self.ports.ports.get(jid, {}).get(fk, p)
                       for (jid, fk), p in now.items())
        complete = all(fk in self.ports.ports.get(jid, {}) and None not in
                       self.ports.ports[jid][fk] for (jid, fk), _f, _p in flows)
        return not complete or self.ports.broken(fabric, flows)

    def refresh(self, fabric: Clos, records: dict,
                waiting: Callable[[], AbstractContextManager] = nullcontext) -> dict:
        """New ports where the buckets changed (also for jobs loaded from the state file).
        Returns the event's fields: ``port_changes`` or ``host_error``."""
        try:
            ports = self.place(fabric, records, waiting)
        except (ConflictError, InputError) as e:
            return {"host_error": str(e)}
        return {"port_changes": self.commit(fabric, records, ports)}

    def view(self) -> dict:
        """What host mode learned and what it cost: probes sent since start, maps held."""
        h = self.ports
        return {"learned_by": "hosts" if self.from_hosts else "probes",
                "probes_sent": h.probes_sent, "probe_rounds": h.probe_rounds,
                "probes_repeated": h.probes_repeated,
                "maps": len(h.maps), "ports_probed": sum(m.window for m in h.maps.values()),
                "flows_with_ports": sum(len(v) for v in h.ports.values())}
