"""What the fabric should look like, computed from the state alone (pure functions).

``desired_tables``: every switch's flow and group entries (static entries plus the ingress rules
of every planned flow); ``DesiredTables``: the same, kept between changes and recomputed only
where something changed. ``installed_plan``: the running jobs and their routes as one ``Plan``,
for link loads and predictions; flows of a leaf pair with no alive path are left out of it.
Every fabric is a ``model.clos.Clos`` here (a leaf-spine is one plane of one pod): its rule
builders are ``clos_rules``, ``clos_labels`` and ``clos_hostmode``.
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

from controller.enforcement.clos_hostmode import clos_host_static_rules
from controller.enforcement.clos_rules import (
    clos_all_static,
    clos_flow_rules,
    clos_static_update,
    flow_rules_read_links,
)
from controller.enforcement.echo import echo_entry, with_echo
from controller.enforcement.modes import mode_of
from controller.enforcement.pacing import Pacer
from controller.enforcement.rules import part_sport
from controller.errors import ConflictError
from controller.model.clos import Clos
from controller.model.clos_wiring import WIRING
from controller.planners.clos_routes import installed_clos_plan

Tables = dict  # dpid -> (list[FlowRule], list[GroupEntry])


def desired_tables(fabric: Clos, records, host: bool | None = None,
                   ecmp: str = "per-tier", labels: bool | None = None) -> Tables:
    """Static entries plus every job's flow rules, per switch. Two flows with the same match
    are a conflict naming both jobs. The host-mode pipeline is static too, present while a
    job runs in host mode (``host`` None) or when asked; so are sr's label entries
    (``labels``; None: while a job runs in sr mode). ``ecmp``: the aggregation switches'
    hashing (``modes.ECMP_HASHES``). O(static entries + planned parts). Computed from
    scratch: ``DesiredTables`` gives the same, kept between changes."""
    records = list(records)
    if host is None:
        host = any(mode_of(r.mode).host_ports for r in records)
    if labels is None:
        labels = any(mode_of(r.mode).labels for r in records)
    static = static_tables(fabric, host, ecmp, labels)
    want = {dpid: (list(rules), list(groups)) for dpid, (rules, groups) in static.items()}
    owner: dict[tuple, str] = {}
    for r in records:
        for flow, parts in r.flows_with_parts():
            for x in job_flow_rules(fabric, flow, parts, r.mode, r.number):
                what = f"{_named(flow, parts, x)} of job {r.job.id}"
                if x.key in owner:
                    raise _conflict(what, owner[x.key])
                owner[x.key] = what
                want[x.dpid][0].append(x)
    return want


def static_tables(fabric: Clos, host: bool, ecmp: str = "per-tier",
                  labels: bool = True) -> Tables:
    """Every switch's static entries and groups (with host mode's pipeline if ``host``, with
    sr's label entries if ``labels``), its data-plane echo first (``echo.py``: the same on
    every tier and mode, so added here rather than by the rule builders)."""
    static = clos_all_static(fabric, ecmp, labels)
    if host:
        for sw in fabric.switches():
            static[fabric.dpids[sw]][0].extend(clos_host_static_rules(fabric, sw))
    return with_echo(static)


def _conflict(what: str, other: str) -> ConflictError:
    split = " (a flow split into n parts takes source ports p .. p + n - 1)" \
        if "split" in what + other else ""
    return ConflictError(f"{what} has the same match as {other}: give the flows distinct "
                         f"ports{split}")


class Entries(list):
    """A switch's wanted flow entries: its static entries followed by its jobs'. ``static``
    and ``jobs`` name the two parts (None: not told, a job entry has a static key), so the
    reconciler diffs only the jobs' part against a shadow of the same static list."""
    static: list | None = None
    jobs: list | tuple = ()


PAUSE_FLOWS = 256  # flows between two yields of ``DesiredTables.tables``


class DesiredTables:
    """``desired_tables`` kept between changes (one per controller, the transaction's): the
    same entries in the same order, computed from what changed since the last call.

    * Static entries once per fabric object and host pipeline (the last two are kept: a
      change and the state it replaces). In another link state of the same wiring only
      the switches whose link-state inputs changed are recomputed
      (``clos_rules.clos_static_update``: a core link down
      recomputes 17 of a k = 16 fat-tree's 320 switches); a switch whose recomputed
      entries are equal keeps the previous lists.
    * A flow's entries once per (job number, mode, flow, parts), and again on another link
      state only where they read it (sr's labels, pinned bundle members).
    * A switch's (rules, groups) is the previous tuple itself when neither its static
      entries nor its job entries changed, so the reconciler skips its diff
      (``Reconciler.converge``); one whose job entries changed gets an ``Entries`` naming
      its static list, so the reconciler diffs the job entries alone.

    O(planned flows + switches) per call while the fabric stays, instead of O(static entries
    + planned flows): a POST on a k = 16 fat-tree rebuilt 19,000 static entries. The lists
    returned are shared between calls: read them, never change them. One caller at a time
    (the service's writer, which holds its change lock; views never call it), so it may
    run with the state lock let go; its caches are each replaced in one assignment.
    ``pause()``, if given, is called every few hundred flows, every few dozen switches
    recomputed and every few thousand entries built, compared or joined (the shell's yield:
    under eventlet REST answers only where the writer yields)."""

    def __init__(self, ecmp: str = "per-tier", labels: bool = False,
                 pause: Callable[[], None] | None = None):
        self.ecmp = ecmp
        self.labels = labels  # sr's label entries even while no job runs in sr mode
        self._static: list[tuple] = []  # (fabric, host, labels, tables, inputs), newest last
        self._fabric = None  # the fabric object ``_flows`` holds entries for
        self._flows: dict[tuple, list] = {}  # (number, mode, flow, parts) -> its entries
        self._last: dict[int, tuple] = {}  # dpid -> (static entry, job entries, output)
        self._keys: dict[int, tuple] = {}  # dpid -> (static rules, their keys)
        self.pause = pause

    def tables(self, fabric: Clos, records, host: bool | None = None) -> Tables:
        records = list(records)
        if host is None:
            host = any(mode_of(r.mode).host_ports for r in records)
        labels = self.labels or any(mode_of(r.mode).labels for r in records)
        static = self._static_of(fabric, host, labels)
        kept = self._flows
        if self._fabric is not fabric:  # on a link change, entries of the wiring alone stay
            same = self._fabric is not None and same_wiring(self._fabric, fabric)
            kept = {k: v for k, v in kept.items()
                    if same and not flow_rules_read_links(k[1], k[3])}
        used: dict[tuple, list] = {}
        owner: dict[tuple, tuple] = {}
        jobs: dict[int, list] = {}
        n = 0
        for r in records:
            for flow, parts in r.flows_with_parts():
                n += 1
                if self.pause is not None and n % PAUSE_FLOWS == 0:
                    self.pause()
                key = (r.number, r.mode, flow, parts)
                entries = used.get(key)
                if entries is None:
                    entries = kept.get(key)
                if entries is None:
                    entries = job_flow_rules(fabric, flow, parts, r.mode, r.number)
                used[key] = entries
                for x in entries:
                    if x.key in owner:
                        o = owner[x.key]
                        raise _conflict(f"{_named(flow, parts, x)} of job {r.job.id}",
                                        f"{_named(o[1], o[2], o[3])} of job {o[0].job.id}")
                    owner[x.key] = (r, flow, parts, x)
                    if x.dpid not in static:
                        raise KeyError(x.dpid)
                    jobs.setdefault(x.dpid, []).append(x)
        out, last = {}, {}
        pacer = Pacer(self.pause)  # every few thousand entries looked at
        for dpid, entry in static.items():
            extra = jobs.get(dpid, ())
            before = self._last.get(dpid)
            work = 1 + len(extra)
            if before is not None and before[0] is entry and len(before[1]) == len(extra) \
                    and all(a is b for a, b in zip(before[1], extra)):
                last[dpid] = before
            else:
                last[dpid] = (entry, extra, (self._joined(dpid, entry[0], extra), entry[1])
                              if extra else entry)
                work += len(entry[0]) if extra else 0
            out[dpid] = last[dpid][2]
            pacer.add(work)
        # kept at once, once computed (a conflict raised above leaves the caches as they were)
        self._fabric, self._flows, self._last = fabric, used, last
        return out

    def _joined(self, dpid: int, static: list, jobs: list) -> list:
        """A switch's static entries followed by its jobs': an ``Entries`` that names both
        parts when no job entry has a static entry's key."""
        keys = self._keys.get(dpid)
        if keys is None or keys[0] is not static:
            keys = self._keys[dpid] = (static, {r.key for r in static})
        out = Entries(static)
        out.extend(jobs)
        if not any(x.key in keys[1] for x in jobs):
            out.static, out.jobs = static, jobs
        return out

    def _static_of(self, fabric: Clos, host: bool, labels: bool) -> Tables:
        for f, h, lab, tables, _ in self._static:
            if f is fabric and h == host and lab == labels:
                return tables
        inputs = None
        if not host:  # a switch whose link-state inputs stay keeps its lists
            before = next(((t, i) for f, h, lab, t, i in reversed(self._static)
                           if i is not None and lab == labels and same_wiring(f, fabric)),
                          None)
            tables, inputs = clos_static_update(fabric, self.ecmp, before, labels, self.pause)
        else:
            tables = static_tables(fabric, host, self.ecmp, labels)
        kept = [t for _, _, _, t, _ in reversed(self._static)]
        pacer = Pacer(self.pause)  # every few thousand entries compared
        for dpid, entry in tables.items():
            if any(t.get(dpid) is entry for t in kept):
                continue
            pacer.add(len(entry[0]) * len(kept))
            rules = entry[0] if host else [echo_entry(dpid), *entry[0]]  # as static_tables
            tables[dpid] = entry = (rules, entry[1])
            for before in kept:  # recomputed, yet equal: the previous lists
                old = before.get(dpid)
                if old is not None and old == entry:
                    tables[dpid] = old
                    break
        self._static = (self._static + [(fabric, host, labels, tables, inputs)])[-2:]
        return tables


def same_wiring(a: Clos, b: Clos) -> bool:
    """Two fabric objects of one declared fabric (``with_down`` copies): the same switches,
    ports, hosts, addresses and bundles, shared by identity; only the link state differs."""
    return (a.planes is b.planes and a.host_leaves is b.host_leaves
            and a.bundles is b.bundles and a.bundle_default is b.bundle_default
            and all(a.wiring.get(k) is b.wiring.get(k) for k in WIRING))


def _named(flow, parts, entry) -> str:
    """A flow as a conflict names it: a part of a split flow with its source port."""
    out = f"flow {flow.src} -> {flow.dst}"
    if parts and len(parts) > 1:
        match = dict(entry.match)
        out += f" (split, its part from source port {match.get('tcp_src', match.get('udp_src'))})"
    return out


def job_flow_rules(fabric: Clos, flow, parts, mode: str, number: int) -> list:
    """The entries of one planned flow (``parts`` as the intent keeps them: paths). A split
    flow's part i is the sub-connection of source port ``part_sport(flow, i, parts)``: its
    entries match that port on the part's path."""
    if not parts or len(parts) == 1:
        return clos_flow_rules(fabric, flow, parts[0][0] if parts else None, mode, number)
    return [x for i, (path, _) in enumerate(parts) for x in clos_flow_rules(
        fabric, replace(flow, sport=part_sport(flow, i, len(parts))), path, mode, number)]


def installed_plan(fabric: Clos, records):
    """All running jobs with their installed routes as one ``Plan`` (None without jobs).
    Flows with no alive path (or no route yet) are not part of it."""
    records = list(records)
    if not records:
        return None
    return installed_clos_plan(fabric, [(r.job, [p for _, p in r.flows_with_parts()])
                                        for r in records])
