"""The controller's state as plain data: intent, observations and history, nothing else.

* intent: the declared fabric and the running jobs with their routes, keyed by flow (a flow's
  5-tuple: source, destination, protocol, ports), never by list position;
* observations: which switches are connected and which of their ports are up, the measured
  counters (``Telemetry``), and the effective fabric (declared, minus the links seen down);
* history: recent events, counters and timings that the views and the metrics report.

Everything here is pure: ``RouteService`` changes the state, ``reconcile`` makes switches follow
it, ``views`` and ``metrics`` read it. ``to_doc``/``from_doc`` are the persistence format (the
same document goes to sqlite or etcd).
"""
from __future__ import annotations

from dataclasses import dataclass, field

from controller.errors import InputError
from controller.model.clos import Clos, as_clos, load_fabric
from controller.model.intent import JobRecord, MemberPath, flow_key, members_of
from controller.model.jobs import parse_job
from controller.service.restarts import Restarts
from controller.service.telemetry import Telemetry

HISTORY = 1000  # timings kept per series
EVENTS = 50  # events kept


@dataclass
class SwitchSeen:
    connected: bool = False
    ports: dict = field(default_factory=dict)  # port number -> up
    since: float = 0.0  # when it (dis)connected, by the service's monotonic clock
    silent: bool = False  # its echoes were lost (``silence.py``): failed, connected or not
    held_until: float | None = None  # member of a restart round (``restarts.py``) until then

    def fails_at(self, dead_after: float) -> float:
        """When a disconnected switch counts as failed: at the end of its grace time, or of
        its restart round if that is later (``failed_links``, ``next_failure``)."""
        end = self.since + dead_after
        return end if self.held_until is None or self.held_until < end else self.held_until


@dataclass
class ControllerState:
    declared: Clos | None = None
    fabric: Clos | None = None  # effective: declared, plus every link seen down
    jobs: dict = field(default_factory=dict)  # id -> JobRecord, submission order
    switches: dict = field(default_factory=dict)  # dpid -> SwitchSeen
    next_number: int = 1
    telemetry: Telemetry = field(default_factory=Telemetry)
    events: list = field(default_factory=list)  # newest last
    counters: dict = field(default_factory=lambda: {
        "rules_installed": 0, "rules_removed": 0, "installs": 0, "install_failures": 0,
        "failures_handled": 0, "reconnects": 0, "messages_sent": 0})
    planner_ms: list = field(default_factory=list)
    install_s: list = field(default_factory=list)
    recovery_ms: list = field(default_factory=list)
    version: int = 0  # bumped on every change of intent or effective fabric
    measured: dict = field(default_factory=dict)  # job id -> learning.Measured (last steady)
    presumed_down: frozenset = frozenset()  # links down when stored (``effective_fabric``)
    wiring: object = None  # ``wiring.Wiring``: discovery's problems, kept when they change
    restarts: Restarts = field(default_factory=Restarts)  # switches lost together (rounds)

    def load(self, declared: Clos | None, jobs: dict, next_number: int,
             presumed_down: frozenset = frozenset()) -> None:
        """Take a stored intent (at start, or a standby following the master's); a fabric is
        held as a ``Clos`` (``as_clos``), with the links the stored state had seen down."""
        self.declared = self.fabric = as_clos(declared)
        self.presumed_down = presumed_down
        if declared is not None and presumed_down:
            self.fabric = self.declared.with_down(self.declared.down | presumed_down)
        self.set_jobs(jobs)
        self.next_number = next_number
        self.version += 1

    def set_jobs(self, jobs: dict) -> None:
        """The running jobs from now on. A record's measurements go with it: a job deleted, or
        posted again under its id (a new record: another number), shows none of the old
        record's measured flows."""
        self.measured = {j: m for j, m in self.measured.items() if j in jobs and j in self.jobs
                         and jobs[j].number == self.jobs[j].number
                         and jobs[j].created == self.jobs[j].created}
        self.jobs = jobs

    def add_event(self, event: dict) -> None:
        self.events.append(event)
        del self.events[:-EVENTS]

    def record(self, series: str, value: float) -> None:
        values = getattr(self, series)
        values.append(value)
        del values[:-HISTORY]


def effective_fabric(declared: Clos | None, switches: dict, now: float = 0.0,
                     dead_after: float = 0.0, presumed: frozenset = frozenset()) -> Clos | None:
    """The declared fabric with every link seen down added to ``down``, and every link of
    ``presumed`` (down when the state was stored: ``ControllerState.presumed_down``) while an
    end switch of it has not been seen since: after a restart a leaf that reconnects before
    the far end of its failed link keeps its tables for that link down, not a moment of
    tables for it up."""
    if declared is None:
        return None
    down = declared.down | failed_links(declared, switches, now, dead_after)
    down |= {x for x in presumed if not all(declared.dpids.get(s) in switches for s in x[:2])}
    return declared if down == declared.down else declared.with_down(down)


def failed_links(declared: Clos, switches: dict, now: float = 0.0,
                 dead_after: float = 0.0) -> set[tuple]:
    """Switch links (lower, upper) that are down (members of a bundle (lower, upper, m)
    while some other member is up): an end port reported down, or an end switch that was
    seen and has been disconnected for ``dead_after`` seconds or more (or, a member of a
    restart round, until the round's end if later: ``SwitchSeen.fails_at``), or whose echoes
    were lost (``silent``: its data plane stopped, its ports still up). A lost control
    connection alone is not a failure of the data plane (the switch keeps forwarding with its
    tables): within the grace time its links count as they were. ``now`` and ``since`` are
    the service's monotonic clock (a step of the wall clock moves no grace time). Unknown
    state (never seen, never reported) counts as up. O(switches seen + link ends of the
    switches with a port down or dead): called on every switch and port event."""
    ends, members = declared.derived("link_ends", _link_ends)
    failed: dict[tuple, set] = {}  # link -> members down (0 for a single link)
    for dpid, s in switches.items():
        at = ends.get(dpid)
        if not at:
            continue
        dead = s.silent or (not s.connected and now >= s.fails_at(dead_after))  # next_failure
        if not dead and False not in s.ports.values():
            continue
        for link, m, port in at:
            if dead or s.ports.get(port) is False:
                failed.setdefault(link, set()).add(m)
    out = set()
    for link, down in failed.items():
        if len(down) == members[link]:
            out.add(link)
        else:  # some members of a bundle: (lower, upper, member), the link stays up
            out |= {link + (m,) for m in down}
    return out


def next_failure(declared: Clos, switches: dict, now: float,
                 dead_after: float) -> float | None:
    """When ``failed_links`` next changes with the clock alone: the earliest end of a grace
    time (``SwitchSeen.fails_at``: ``since + dead_after``, or a restart round's end, the very
    value ``failed_links`` compares ``now`` with, so the switch counts as failed at exactly
    that time) among the switches with links in
    ``declared`` that are disconnected and not yet past it at ``now``; None when none runs.
    The service acts on a lost switch then, not at its next periodic tick; a switch that
    reconnected drops out (a re-check at its old deadline finds nothing to do)."""
    ends, _ = declared.derived("link_ends", _link_ends)
    return min((t for dpid, s in switches.items() if not s.connected and ends.get(dpid)
                and now < (t := s.fails_at(dead_after))), default=None)


def _link_ends(declared: Clos) -> tuple[dict, dict]:
    """(dpid -> [((lower, upper), member, port) of every link end at that switch],
    (lower, upper) -> its members), for ``failed_links``."""
    ends: dict[int | None, list] = {}
    members = {}
    for lower, upper in declared.links():
        members[(lower, upper)] = len(declared.ports_to(lower, upper))
        for sw, peer in ((lower, upper), (upper, lower)):
            ends.setdefault(declared.dpids.get(sw), []).extend(
                ((lower, upper), m, port) for m, port in enumerate(declared.ports_to(sw, peer)))
    return ends, members


def unroutable_pairs(state: ControllerState) -> list[dict]:
    """Leaf pairs that carry planned flows and have no alive spine in common."""
    f = state.fabric
    pairs: dict[tuple[str, str], dict] = {}
    for r in state.jobs.values():
        for flow in r.unroutable():
            a, b = f.hosts[flow.src], f.hosts[flow.dst]
            p = pairs.setdefault((a, b), {"src_leaf": a, "dst_leaf": b, "flows": 0, "jobs": []})
            p["flows"] += 1
            if r.job.id not in p["jobs"]:
                p["jobs"].append(r.job.id)
    return [pairs[k] for k in sorted(pairs)]


# ---- persistence ---------------------------------------------------------------------------
DOC_VERSION = 2


def to_doc(state: ControllerState, host_ports: dict | None = None) -> dict:
    """The intent as a JSON document: fabric, jobs and their routes by flow, the links seen
    down beyond the declared ones (``links_down``, when some are), and the source ports host
    mode gave the parts (``host_ports``: {job id: {flow key: ports}}), which hosts keep
    connections on: a restarted or new master keeps every port that still leads where its
    part goes (``host_ports_of``)."""
    seen = state.fabric.down - state.declared.down if state.declared and state.fabric else ()
    host_ports = host_ports or {}
    return {"version": DOC_VERSION, "next_number": state.next_number,
            **({"links_down": sorted(map(list, seen), key=str)} if seen else {}),
            "fabric": state.declared.to_dict() if state.declared else None,
            "jobs": [{"job": r.job.to_dict(), "number": r.number, "algorithm": r.algorithm,
                      "mode": r.mode, "created": r.created, "matrix": r.matrix,
                      "learn": r.learn, "members": list(r.members),
                      "routes": [[list(k), None if p is None else [_part_doc(x) for x in p]]
                                 for k, p in r.routes.items()],
                      **({"host_ports": [[list(k), list(p)] for k, p in
                                         host_ports[r.job.id].items()]}
                         if host_ports.get(r.job.id) else {})}
                     for r in state.jobs.values()]}


def host_ports_of(doc: dict | None) -> dict:
    """The host-mode ports a stored document holds: {job id: {flow key: ports}}.

    >>> host_ports_of({"jobs": [{"job": {"id": "a"}, "host_ports": [[["h0", "h1", 6, 0, 0],
    ...                                                                [49154, None]]]}]})
    {'a': {('h0', 'h1', 6, 0, 0): (49154, None)}}
    """
    return {item["job"]["id"]: {tuple(k): tuple(p) for k, p in item["host_ports"]}
            for item in (doc or {}).get("jobs", []) if item.get("host_ports")}


def from_doc(doc: dict | None, declared: Clos | None
             ) -> tuple[Clos | None, dict, int, frozenset]:
    """(fabric, jobs, next_number, links seen down) of a stored document; the fabric must be
    the one declared now, if one is. Version 1 documents (routes by list position) are read
    too; a link down that the fabric does not have is left out."""
    declared = as_clos(declared)  # the controller serves every fabric as a Clos
    if not doc:
        return declared, {}, 1, frozenset()
    stored = load_fabric(doc["fabric"]) if doc.get("fabric") else None
    if declared is None:
        declared = stored
    elif stored is not None and stored.to_dict() != declared.to_dict():
        raise InputError("the state file was written for another fabric: start with that "
                         "fabric, or move the state file away to start afresh")
    jobs: dict[str, JobRecord] = {}
    if declared is None:
        return None, jobs, 1, frozenset()
    for item in doc.get("jobs", []):
        try:
            job = parse_job(item["job"], declared)
        except InputError as e:
            raise InputError(f"state file: {e}") from None
        flows = job.flows()
        if doc.get("version", 1) == 1:
            if len(item["routes"]) != len(flows):
                raise InputError(f"state file: job {job.id} has {len(item['routes'])} routes "
                                 f"for {len(flows)} flows")
            pairs = zip((flow_key(f) for f in flows), item["routes"])
        else:
            pairs = ((tuple(k), p) for k, p in item["routes"])
        spines = declared.planes[0].aggs[0]  # an old record's spine index names one of them
        routes = {k: None if p is None else tuple(
            (_route_part(k, spines, declared.hosts, *x[:1], *x[2:]), float(x[1])) for x in p)
                  for k, p in pairs}
        missing = {flow_key(f) for f in flows} - set(routes)
        if missing:
            raise InputError(f"state file: job {job.id} has no route for flow "
                             f"{sorted(missing)[0]}")
        jobs[job.id] = JobRecord(job, item["number"], item["algorithm"], item["mode"],
                                 item["created"], routes, item.get("matrix", "declared"),
                                 item.get("learn", True),
                                 tuple(item.get("members") or sorted(job.hosts())))
    number = max([doc.get("next_number", 1)] + [r.number + 1 for r in jobs.values()])
    links = set(declared.links())
    down = frozenset(tuple(x) for x in doc.get("links_down", [])
                     if isinstance(x, list) and tuple(x[:2]) in links and (
                         len(x) == 2 or len(x) == 3 and x[2] in declared.alive_members(*x[:2])))
    return declared, jobs, number, down


def _part_doc(part) -> list:
    """A route part as stored: [path, share], and the path's members third when it names
    them (bundles)."""
    where, share = part
    doc = [list(where), share]
    members = members_of(where)
    return doc + [list(members)] if members is not None else doc


def _route_part(key, spines, leaf_of, where, members=None):
    """A stored part's route, a Clos path of switch names (with the member of every hop on a
    fabric with bundles); a record written before (a spine index of a two-tier fabric) is
    read as the path source leaf, that spine, destination leaf (flow ``key``)."""
    if not isinstance(where, list):
        return (leaf_of[key[0]], spines[int(where)], leaf_of[key[1]])
    names = tuple(str(x) for x in where)
    return names if members is None else MemberPath(names, members)
