"""The controller's state and operations, free of any SDN framework: the REST API and the Ryu
shell call these methods; rules reach switches through an injected ``Installer``.

Every change is computed in full before anything is sent: plan, rules for every switch, diff
against what each switch holds. The switches then get the additions (and overwrites) first,
confirmed by a barrier, and only then the deletions (make before break). If a switch rejects a
rule or does not confirm in time, everything is rolled back and the call fails with nothing
changed.
"""
from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field
from typing import Callable, Protocol

from controller.errors import ConflictError, InputError, InstallError, NotFoundError
from controller.fabric import Fabric
from controller.jobs import Job, parse_job
from controller.loads import link_loads, load_summary
from controller.openflow import COOKIE_STATIC, Message, SwitchState, apply, diff
from controller.plan import make_plan, planner_options, route_doc
from controller.planners import ALGORITHMS
from controller.problem import Assignment, Problem
from controller.rules import MODES, all_static, flow_rules, part_sport
from controller.telemetry import Telemetry


MAX_JOBS = 1024


class Installer(Protocol):
    def install(self, batches: dict[int, list[Message]]) -> None:
        """Send each switch its messages and wait for its barrier reply; raise InstallError
        naming the switch if one rejects a message or does not answer in time."""

    def reset(self, dpid: int) -> None:
        """Remove every flow and group from a switch (used when it connects)."""


@dataclass
class JobRecord:
    job: Job
    number: int  # names the job in its rules' cookies
    algorithm: str
    mode: str
    created: float
    routes: list = field(default_factory=list)  # per flow of job.flows(): parts or None


@dataclass
class SeenSwitch:
    connected: bool = False
    ports: dict = field(default_factory=dict)  # port number -> up
    since: float = 0.0


class RouteService:
    def __init__(self, installer: Installer, fabric: Fabric | None = None,
                 algorithm: str = "greedy", mode: str = "flow",
                 clock: Callable[[], float] = time.time, planner_opts: dict | None = None,
                 store=None):
        if algorithm not in ALGORITHMS:
            raise InputError(f"unknown algorithm {algorithm!r}")
        if mode not in MODES:
            raise InputError(f"unknown mode {mode!r}")
        if fabric is not None and not fabric.wired:
            raise InputError("fabric: the controller needs dpids, ports, host_ip and host_mac")
        self.installer = installer
        self.declared = fabric  # as declared; ``fabric`` adds the links seen down
        self.fabric = fabric
        self.algorithm = algorithm
        self.mode = mode
        self.clock = clock
        self.planner_opts = planner_opts or {}
        self.jobs: dict[str, JobRecord] = {}
        self.installed: dict[int, SwitchState] = {}  # connected, provisioned switches
        self.seen: dict[int, SeenSwitch] = {}
        self.next_number = 1
        self.stale: set[int] = set()  # switches to wipe and re-provision after a commit
        self.lock = threading.RLock()
        self.counters = {"rules_installed": 0, "rules_removed": 0, "installs": 0,
                         "install_failures": 0, "failures_handled": 0}
        self.events: list[dict] = []  # topology changes handled, newest last
        self.recovery_ms: list[float] = []
        self.telemetry = Telemetry()
        self.planner_ms: list[float] = []  # every planner run, newest last (bounded)
        self.install_s: list[float] = []  # every confirmed change, newest last (bounded)
        self.store = store
        if store is not None:
            self._restore(store.load())

    # ---- switch events ----------------------------------------------------------------------
    def switch_connected(self, dpid: int, ports: dict[int, bool]) -> None:
        """A switch (re)connected: note its ports, take link changes into account, then wipe
        it and install everything it should hold."""
        with self.lock:
            self.seen[dpid] = SeenSwitch(True, dict(ports), self.clock())
            self.installed.pop(dpid, None)
            if self.fabric is None or dpid not in self.fabric.switch_of_dpid:
                return
            self._topology_changed(f"switch {self.fabric.switch_of_dpid[dpid]} connected")
            self._provision(dpid)

    def _provision(self, dpid: int) -> None:
        self.installer.reset(dpid)
        self.installed[dpid] = SwitchState()
        want = self._desired(self.jobs.values()).get(dpid, ([], []))
        make, _ = diff(dpid, self.installed[dpid], *want)
        try:
            self.installer.install({dpid: make})
        except InstallError:
            self.installed.pop(dpid, None)
            raise
        apply(self.installed[dpid], make)
        self.counters["rules_installed"] += sum(m.kind == "flow_add" for m in make)

    def switch_disconnected(self, dpid: int) -> None:
        with self.lock:
            s = self.seen.setdefault(dpid, SeenSwitch())
            s.connected = False
            s.since = self.clock()
            self.installed.pop(dpid, None)
            if self.fabric is not None and dpid in self.fabric.switch_of_dpid:
                self._topology_changed(f"switch {self.fabric.switch_of_dpid[dpid]} disconnected")

    def port_changed(self, dpid: int, port: int, up: bool) -> None:
        """A port went up or down; a leaf-spine link that went down re-plans the jobs using it."""
        with self.lock:
            self.seen.setdefault(dpid, SeenSwitch(True)).ports[port] = up
            f = self.declared
            if f is None or dpid not in f.switch_of_dpid:
                return
            sw = f.switch_of_dpid[dpid]
            peer = f.peer(sw, port)
            if peer in f.spine_index or peer in f.leaf_index:
                self._topology_changed(f"port {sw}:{port} to {peer} {'up' if up else 'down'}")

    def _failed_links(self) -> set[tuple[str, str]]:
        """Leaf-spine links that are down: an end switch that was seen and is disconnected, or
        an end port reported down. Unknown state (never seen, never reported) counts as up."""
        f = self.declared
        out = set()
        for leaf in f.leaves:
            for spine in f.spines:
                for sw, peer in ((leaf, spine), (spine, leaf)):
                    s = self.seen.get(f.dpids[sw])
                    if s is not None and (not s.connected or s.ports.get(f.port(sw, peer)) is False):
                        out.add((leaf, spine))
        return out

    def _topology_changed(self, cause: str) -> None:
        """Recompute which links are alive. Links that went down: re-plan every algorithm group
        with a job crossing them and install make before break; the new static rules (ECMP
        buckets, spine routes) go in with the same change. Links that came back are used by the
        static rules at once and by planned flows at the next re-plan."""
        t0 = time.perf_counter()
        down = self.declared.down | self._failed_links()
        if down == self.fabric.down:
            return
        went_down = down - self.fabric.down
        came_up = self.fabric.down - down
        self.fabric = self.declared.with_down(down)
        records, replanned, error = self.jobs, [], None
        if went_down:
            algs = {r.algorithm for r in self.jobs.values() if self._crosses(r, went_down)}
            try:
                records = self._plan(self.jobs, algs)
                replanned = sorted(algs)
            except ConflictError as e:  # a leaf pair lost every spine: keep routes, report
                error = str(e)
        try:
            stats = self._converge(self._desired(records.values()))
            self.jobs = records
        except ConflictError as e:
            stats, error = None, str(e)
        self._heal()
        self._save()
        event = {"time": self.clock(), "cause": cause,
                 "links_down": sorted(f"{l}-{s}" for l, s in went_down),
                 "links_up": sorted(f"{l}-{s}" for l, s in came_up),
                 "replanned": replanned, "rules": stats, "error": error,
                 "recovery_ms": round((time.perf_counter() - t0) * 1e3, 3)}
        self.events.append(event)
        del self.events[:-50]
        if went_down:
            self.counters["failures_handled"] += 1
            self.recovery_ms.append(event["recovery_ms"])

    def _crosses(self, r: JobRecord, links: set[tuple[str, str]]) -> bool:
        f = self.fabric
        for flow, parts in zip(r.job.flows(), r.routes):
            if parts is None:
                continue
            a, b = f.hosts[flow.src], f.hosts[flow.dst]
            for s, _ in parts:
                if (a, f.spines[s]) in links or (b, f.spines[s]) in links:
                    return True
        return False

    # ---- fabric -----------------------------------------------------------------------------
    def put_fabric(self, doc) -> dict:
        with self.lock:
            fabric = Fabric.from_dict(doc)
            if not fabric.wired:
                raise InputError("fabric: the controller needs dpids, ports, host_ip and host_mac")
            if self.jobs:
                raise ConflictError("fabric: delete the running jobs before replacing the fabric")
            old = self.declared, self.fabric
            self.declared = fabric
            self.fabric = fabric.with_down(fabric.down | self._failed_links())
            try:
                self._converge(self._desired([]))
            except InstallError:
                self.declared, self.fabric = old
                raise
            self._save()
            for dpid in list(self.installed):
                if dpid not in fabric.switch_of_dpid:
                    self.installed.pop(dpid)
            # switches already connected but never provisioned under the old fabric
            for dpid, seen in self.seen.items():
                if seen.connected and dpid in fabric.switch_of_dpid and dpid not in self.installed:
                    self.switch_connected(dpid, seen.ports)
            return self.fabric_view()

    def fabric_view(self) -> dict:
        with self.lock:
            f = self.fabric
            seen = {}
            for dpid, s in sorted(self.seen.items()):
                name = f.switch_of_dpid.get(dpid) if f else None
                seen[name or f"dpid:{dpid:#x}"] = {
                    "dpid": dpid, "connected": s.connected, "provisioned": dpid in self.installed,
                    "ports_up": sorted(p for p, up in s.ports.items() if up),
                    "ports_down": sorted(p for p, up in s.ports.items() if not up)}
            missing, port_issues = [], []
            if f:
                for sw in f.spines + f.leaves:
                    s = self.seen.get(f.dpids[sw])
                    if s is None or not s.connected:
                        missing.append(sw)
                        continue
                    for peer, port in f.ports[sw].items():
                        if not s.ports.get(port, False):
                            port_issues.append({"switch": sw, "port": port, "peer": peer})
            unknown = [k for k, v in seen.items() if f is None or v["dpid"] not in f.switch_of_dpid]
            d = self.declared
            return {"declared": d.to_dict() if d else None, "seen": seen,
                    "links_down": sorted(f"{l}-{s}" for l, s in (f.down - d.down)) if f else [],
                    "events": self.events[-10:],
                    "missing_switches": missing, "ports_not_up": port_issues,
                    "unknown_switches": unknown,
                    "ready": f is not None and not missing and all(
                        self.seen[f.dpids[sw]].connected and f.dpids[sw] in self.installed
                        for sw in f.spines + f.leaves)}

    # ---- jobs -------------------------------------------------------------------------------
    def post_job(self, doc) -> dict:
        with self.lock:
            fabric = self._need_fabric()
            job = parse_job(doc, fabric)
            if job.id in self.jobs:
                raise ConflictError(f"job {job.id!r} exists already")
            if len(self.jobs) >= MAX_JOBS:
                raise ConflictError(f"{MAX_JOBS} jobs run already: delete one first")
            algorithm = job.options.get("algorithm", self.algorithm)
            mode = job.options.get("mode", self.mode)
            if algorithm not in ALGORITHMS:
                raise InputError(f"job {job.id}: unknown algorithm {algorithm!r} "
                                 f"(choose from {', '.join(ALGORITHMS)})")
            if mode not in MODES:
                raise InputError(f"job {job.id}: unknown mode {mode!r} (choose from flow, sr)")
            record = JobRecord(job, self.next_number, algorithm, mode, self.clock())
            records = dict(self.jobs)
            records[job.id] = record
            planned = self._plan(records, {algorithm})
            t0 = time.perf_counter()
            stats = self._converge(self._desired(planned.values()))
            install_ms = (time.perf_counter() - t0) * 1e3
            self.jobs = planned
            self.next_number += 1
            self._heal()
            self._save()
            view = self.job_view(job.id)
            view.update(install_ms=round(install_ms, 3), rules=stats)
            return view

    def delete_job(self, job_id: str) -> dict:
        with self.lock:
            if job_id not in self.jobs:
                raise NotFoundError(f"no job {job_id!r}")
            records = {k: v for k, v in self.jobs.items() if k != job_id}
            stats = self._converge(self._desired(records.values()))
            del self.jobs[job_id]
            self._heal()
            self._save()
            return {"deleted": job_id, "rules": stats}

    def optimize(self) -> dict:
        """Re-plan every running job together (per algorithm) and install the difference."""
        with self.lock:
            self._need_fabric()
            planned = self._plan(dict(self.jobs), {r.algorithm for r in self.jobs.values()})
            stats = self._converge(self._desired(planned.values()))
            self.jobs = planned
            self._heal()
            self._save()
            return {"jobs": list(self.jobs), "rules": stats, **self.links_view()["summary"]}

    def job_view(self, job_id: str) -> dict:
        with self.lock:
            r = self.jobs.get(job_id)
            if r is None:
                raise NotFoundError(f"no job {job_id!r}")
            from controller.fluid import predict_allreduce
            plan = self._current_plan()
            predicted = predict_allreduce(plan)[job_id] if plan else 0.0
            return {"id": job_id, "algorithm": r.algorithm, "mode": r.mode, "number": r.number,
                    "created": r.created, "flows": len(r.routes),
                    "job": r.job.to_dict(),
                    "routes": [dict(x, measured=self._measured_parts(r, fl, p))
                               if p is not None else x
                               for x, fl, p in zip(self._routes(r), r.job.flows(), r.routes)],
                    "ideal_s": r.job.ideal_allreduce_s(self.fabric.link_bps()),
                    "predicted_allreduce_s": predicted}

    def jobs_view(self) -> dict:
        with self.lock:
            return {"jobs": [{"id": r.job.id, "algorithm": r.algorithm, "mode": r.mode,
                              "flows": len(r.routes), "number": r.number, "created": r.created}
                             for r in self.jobs.values()]}

    def routes_view(self) -> dict:
        with self.lock:
            return {"routes": [x for r in self.jobs.values() for x in self._routes(r)]}

    def links_view(self) -> dict:
        """Planned load per directed leaf-spine link, in flows and bytes per step."""
        with self.lock:
            f = self._need_fabric()
            plan = self._current_plan()
            if plan is None:
                import numpy as np
                flows_up = flows_down = bytes_up = bytes_down = np.zeros((len(f.leaves),
                                                                          len(f.spines)))
            else:
                flows_up, flows_down = link_loads(plan.problem, plan.assignment, "flows")
                bytes_up, bytes_down = link_loads(plan.problem, plan.assignment, "bytes")
            links = []
            for i, leaf in enumerate(f.leaves):
                for j, spine in enumerate(f.spines):
                    if (leaf, spine) in f.down:
                        continue
                    links.append({"link": f"{leaf}->{spine}", "flows": float(flows_up[i, j]),
                                  "bytes": float(bytes_up[i, j]),
                                  "measured": self.telemetry.link(f, leaf, spine)})
                    links.append({"link": f"{spine}->{leaf}", "flows": float(flows_down[i, j]),
                                  "bytes": float(bytes_down[i, j]),
                                  "measured": self.telemetry.link(f, spine, leaf)})
            if plan is None:
                return {"links": links, "summary": {"max_link_load": 0, "links_at_max": 0}}
            s = load_summary(plan.problem, plan.assignment)
            return {"links": links, "summary": {"max_link_load": s["max_link_load"],
                                                "links_at_max": s["links_at_max"]}}

    # ---- internals --------------------------------------------------------------------------
    def _need_fabric(self) -> Fabric:
        if self.fabric is None:
            raise ConflictError("no fabric declared yet: PUT /v1/fabric first")
        return self.fabric

    def _plan(self, records: dict[str, JobRecord], algorithms: set[str]) -> dict[str, JobRecord]:
        """New records with the jobs of the given algorithms re-planned together."""
        out = {k: JobRecord(v.job, v.number, v.algorithm, v.mode, v.created, list(v.routes))
               for k, v in records.items()}
        for alg in sorted(algorithms):
            group = [r for r in out.values() if r.algorithm == alg]
            if not group:
                continue
            plan = make_plan(self.fabric, [r.job for r in group], alg,
                             **self.planner_opts.get(alg, planner_options(alg)))
            self.planner_ms.append(plan.runtime_ms)
            del self.planner_ms[:-1000]
            parts = plan.parts_by_flow()
            offset = 0
            for r in group:
                n = len(r.job.flows())
                r.routes = parts[offset:offset + n]
                offset += n
        return out

    def _current_plan(self):
        """All running jobs with their installed routes, as one Plan (for loads, predictions)."""
        from controller.plan import Plan
        if not self.jobs:
            return None
        jobs = [r.job for r in self.jobs.values()]
        problem = Problem.build(self.fabric, jobs)
        routes = [p for r in self.jobs.values() for p in r.routes]
        parts = [routes[pos] for pos in problem.inter]
        return Plan("installed", problem, Assignment(parts), 0.0)

    def _routes(self, r: JobRecord) -> list[dict]:
        spines = self.fabric.spines
        return [route_doc(flow, parts, spines, part_sport)
                for flow, parts in zip(r.job.flows(), r.routes)]

    def _desired(self, records) -> dict[int, tuple[list, list]]:
        """Every switch's wanted rules and groups: static ones plus every job's flow rules.
        Two flows with the same match are a conflict naming both."""
        f = self._need_fabric()
        want = {dpid: (list(rules), list(groups)) for dpid, (rules, groups) in all_static(f).items()}
        owner: dict[tuple, str] = {}
        for r in records:
            for flow, parts in zip(r.job.flows(), r.routes):
                for x in flow_rules(f, flow, parts, r.mode, r.number):
                    if x.key in owner:
                        raise ConflictError(
                            f"flow {flow.src} -> {flow.dst} of job {r.job.id} has the same match "
                            f"as a flow of job {owner[x.key]}: give the flows distinct ports")
                    owner[x.key] = r.job.id
                    want[x.dpid][0].append(x)
        return want

    def _converge(self, want: dict[int, tuple[list, list]]) -> dict:
        """Bring every provisioned switch to ``want``: additions first, then deletions."""
        t0 = time.perf_counter()
        f = self.fabric
        current = None  # what the switches should hold now; built only if one is offline
        for dpid, (rules, _) in want.items():
            if dpid in self.installed:
                continue
            if current is None:
                current = self._desired(self.jobs.values())
            new_jobs = {x for x in rules if x.cookie != COOKIE_STATIC}
            old_jobs = {x for x in current.get(dpid, ([], []))[0] if x.cookie != COOKIE_STATIC}
            if new_jobs != old_jobs:
                raise ConflictError(f"switch {f.switch_of_dpid[dpid]} (dpid {dpid:#x}) is not "
                                    "connected: cannot install its rules")
        makes, breaks = {}, {}
        for dpid, state in self.installed.items():
            rules, groups = want.get(dpid, ([], []))
            make, brk = diff(dpid, state, rules, groups)
            if make:
                makes[dpid] = make
            if brk:
                breaks[dpid] = brk
        try:
            self.installer.install(makes)
        except InstallError:
            self.counters["install_failures"] += 1
            self._rollback(makes)
            raise
        for dpid, msgs in makes.items():
            apply(self.installed[dpid], msgs)
        try:
            self.installer.install(breaks)
        except InstallError:
            self.counters["install_failures"] += 1
            # the new rules are in place and confirmed, so the change stands; the switches
            # whose deletions were not confirmed are started afresh once it is committed
            self.stale.update(breaks)
            breaks = {}
        for dpid, msgs in breaks.items():
            apply(self.installed[dpid], msgs)
        added = sum(m.kind == "flow_add" for ms in makes.values() for m in ms)
        removed = sum(m.kind == "flow_delete" for ms in breaks.values() for m in ms)
        self.counters["rules_installed"] += added
        self.counters["rules_removed"] += removed
        self.counters["installs"] += 1
        if makes or breaks:
            self.install_s.append(time.perf_counter() - t0)
            del self.install_s[:-1000]
        return {"added": added, "removed": removed, "switches": len(set(makes) | set(breaks))}

    def _rollback(self, makes: dict[int, list[Message]]) -> None:
        """Undo additions that may have reached switches: restore overwritten rules, delete new."""
        undo = {}
        for dpid, msgs in makes.items():
            state = self.installed[dpid]
            back = []
            for m in msgs:
                if m.kind == "flow_add":
                    old = state.rules.get(m.rule.key)
                    back.append(Message("flow_add", rule=old) if old else Message("flow_delete", rule=m.rule))
                elif m.kind == "group_add":
                    back.append(Message("group_delete", group=m.group))
                elif m.kind == "group_modify":
                    back.append(Message("group_modify", group=state.groups[m.group.group_id]))
            undo[dpid] = back
        try:
            self.installer.install(undo)
        except InstallError:  # could not confirm the undo: start those switches afresh
            self.stale.update(makes)
            self._heal()

    def _heal(self) -> None:
        """Wipe and re-provision switches whose state is uncertain; a switch that fails even
        that is left unprovisioned (it is provisioned again when it reconnects)."""
        while self.stale:
            dpid = self.stale.pop()
            seen = self.seen.get(dpid)
            try:
                self.switch_connected(dpid, seen.ports if seen else {})
            except InstallError:
                self.installed.pop(dpid, None)

    # ---- telemetry ---------------------------------------------------------------------------
    def port_stats(self, dpid: int, tx_bytes: dict[int, int], now: float | None = None) -> None:
        with self.lock:
            if self.fabric is not None:
                self.telemetry.port_stats(self.fabric, dpid, tx_bytes,
                                          self.clock() if now is None else now)

    def flow_stats(self, dpid: int, entries, now: float | None = None) -> None:
        """entries: (table, priority, match dict, bytes, packets) of a switch's rules."""
        with self.lock:
            keyed = [((dpid, table, prio, tuple(sorted(match.items()))), nbytes, npackets)
                     for table, prio, match, nbytes, npackets in entries]
            self.telemetry.flow_stats(keyed, self.clock() if now is None else now)

    def imbalance_view(self) -> dict:
        with self.lock:
            self._need_fabric()
            doc = self.telemetry.imbalance(self.fabric)
            doc["definition"] = ("per leaf, (max - mean) / mean of the bytes on its alive "
                                 "uplinks (downlinks); max over leaves and mean weighted by "
                                 "bytes; window = last polling interval, total = since start")
            return doc

    def _measured_parts(self, r: JobRecord, flow, parts) -> list[dict]:
        """Bytes counted by each part's ingress rule, and the spine that rule sends to."""
        f = self.fabric
        out = []
        for rule_ in flow_rules(f, flow, parts, r.mode, r.number):
            got = self.telemetry.rules.get(rule_.key)
            port = next(a[1] for a in rule_.actions if a[0] == "output")
            out.append({"spine": f.peer(f.hosts[flow.src], port),
                        "bytes": got[0] if got else None})
        return out

    # ---- persistence ------------------------------------------------------------------------
    def _snapshot(self) -> dict:
        return {"version": 1, "next_number": self.next_number,
                "fabric": self.declared.to_dict() if self.declared else None,
                "jobs": [{"job": r.job.to_dict(), "number": r.number, "algorithm": r.algorithm,
                          "mode": r.mode, "created": r.created,
                          "routes": [None if p is None else [list(x) for x in p] for p in r.routes]}
                         for r in self.jobs.values()]}

    def _save(self) -> None:
        if self.store is not None:
            self.store.save(self._snapshot())

    def _restore(self, doc: dict | None) -> None:
        """Jobs and routes of a previous run; the fabric must be the one declared now."""
        if not doc:
            return
        stored = Fabric.from_dict(doc["fabric"]) if doc.get("fabric") else None
        if self.declared is None:
            self.declared = self.fabric = stored
        elif stored is not None and stored.to_dict() != self.declared.to_dict():
            raise InputError("the state file was written for another fabric: start with that "
                             "fabric, or move the state file away to start afresh")
        if self.declared is None:
            return
        for item in doc.get("jobs", []):
            job = parse_job(item["job"], self.declared)
            routes = [None if p is None else tuple((int(s), float(x)) for s, x in p)
                      for p in item["routes"]]
            if len(routes) != len(job.flows()):
                raise InputError(f"state file: job {job.id} has {len(routes)} routes for "
                                 f"{len(job.flows())} flows")
            self.jobs[job.id] = JobRecord(job, item["number"], item["algorithm"], item["mode"],
                                          item["created"], routes)
        self.next_number = max([doc.get("next_number", 1)] + [r.number + 1 for r in self.jobs.values()])

    # ---- ARP --------------------------------------------------------------------------------
    def arp_answer(self, ip: str) -> str | None:
        """The MAC of the declared host owning ``ip`` (the controller answers ARP requests)."""
        f = self.fabric
        if f is None:
            return None
        for host, addr in f.host_ip.items():
            if addr == ip:
                return f.host_mac.get(host)
        return None
