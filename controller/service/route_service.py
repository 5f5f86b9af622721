"""The controller's operations: REST requests and switch events in, state changes and
reconciliation out. Free of any SDN framework: the Ryu shell (``app.py``) and the REST
dispatcher (``api.py``) call these methods; rules reach switches through the ``Installer``.

Each operation computes its whole outcome first (plan, desired tables, conflicts), then lets
the reconciler bring the switches there (make before break, rolled back on failure), and only
then commits the new state and saves it. A switch that connects is queued, its tables are read
without the lock and repaired under it, never by a nested call: the lock is not re-entrant.
"""
from __future__ import annotations

import ipaddress
import logging
import re
import threading
import time
from typing import Callable

from controller.service import views
from controller.enforcement.desired import desired_tables, installed_plan
from controller.errors import ConflictError, InputError, InstallError, NotFoundError
from controller.enforcement.openflow import COOKIE_STATIC
from controller.model.fabric import Fabric
from controller.discovery.finder import FabricFinder
from controller.model.fluid import PredictionError, predict_allreduce
from controller.model.jobs import parse_job
from controller.planners.churn import align_spines, replan
from controller.model.loads import load_summary
from controller.service.cluster import standalone_view
from controller.planners.plan import Plan, planner_options, run_planner
from controller.planners.auto import OBJECTIVES
from controller.planners import ALGORITHMS
from controller.model.problem import Assignment, Problem
from controller.enforcement.reconcile import Installer, Reconciler
from controller.planners.ringorder import advise_order, advise_ring, apply_advice
from controller.enforcement.rules import MODES, bootstrap_messages, part_sport
from controller.enforcement.hostmode import HostPorts, host_protocol
from controller.service.state import (UNROUTABLE, ControllerState, JobRecord, SwitchSeen,
                                      effective_fabric, flow_key, from_doc, to_doc)

LOG = logging.getLogger("mlroute")
MAX_JOBS = 1024
OVER_BUDGET = ("refuse", "host")
# what can be addressed as one URL path segment without escaping (RFC 3986 unreserved)
JOB_ID = re.compile(r"[A-Za-z0-9._~-]{1,64}")


class RouteService:
    def __init__(self, installer: Installer, fabric: Fabric | None = None,
                 algorithm: str = "auto", mode: str = "flow",
                 clock: Callable[[], float] = time.time, planner_opts: dict | None = None,
                 store=None, on_progress: Callable[[], None] | None = None,
                 dead_after: float = 0.0, objective: str = "flows",
                 sleep: Callable[[float], None] = time.sleep, resolve_timeout: float = 3.0,
                 link_gbps: float | None = None, hold_down: float = 0.0, max_flow_rules: int = 0,
                 over_budget: str = "refuse"):
        if algorithm not in ALGORITHMS:
            raise InputError(f"unknown algorithm {algorithm!r}")
        if objective not in OBJECTIVES:
            raise InputError(f"unknown objective {objective!r} (choose from {', '.join(OBJECTIVES)})")
        if mode not in MODES:
            raise InputError(f"unknown mode {mode!r}")
        if fabric is not None and not fabric.wired:
            raise InputError("fabric: the controller needs dpids, ports, host_ip and host_mac")
        if max_flow_rules < 0 or over_budget not in OVER_BUDGET:
            raise InputError(f"rule budget: max flow rules must be >= 0 (0: none) and over "
                             f"budget one of {', '.join(OVER_BUDGET)}")
        self.max_flow_rules = max_flow_rules  # flow entries per switch (0: no budget)
        self.over_budget = over_budget  # a job over it: "refuse" (409) or plan it in "host" mode
        self.host = HostPorts()  # host mode: learned port maps and chosen source ports
        self.last_port_changes: list[dict] = []
        self.state = ControllerState()
        self.reconciler = Reconciler(installer, self.state.counters, self._name)
        self.algorithm = algorithm
        self.mode = mode
        self.objective = objective
        self.last_moved = 0  # flows moved by the last re-plan (auto's churn planner)
        self.clock = clock
        self.planner_opts = planner_opts or {}
        self.on_progress = on_progress  # called during long computations (cooperative yield)
        self.dead_after = dead_after  # seconds a disconnected switch counts as still forwarding
        self.lock = threading.Lock()
        self.store = store
        self.passive = False  # a standby of redundant controllers: observes, never sends
        self.cluster = None  # controller.service.cluster.Cluster when controllers share etcd
        self._predictions: tuple[int, dict] = (-1, {})
        self._tables_cache: tuple = (None, {})
        declared, jobs, number = from_doc(store.load() if store else None, fabric)
        self.state.declared = declared
        self.state.fabric = declared
        self.state.jobs = jobs
        self.state.next_number = number
        # discovery: checks a declared fabric, or finds the fabric when none is declared
        self.finder = FabricFinder(fabric, link_gbps)
        self.finder.recognised = None if fabric is not None else declared
        self.sleep = sleep  # waits without holding the lock (the shell's green sleep)
        self.ilp_budget = (self.planner_opts.get("auto") or {}).get("ilp_time_limit", 0.0)
        self.unproven: set[tuple[str, str]] = set()  # auto groups an ILP may still improve
        self.hold_down = hold_down  # seconds a returned link must stay up before re-optimising
        self._reoptimise_at: float | None = None
        self.resolve_timeout = resolve_timeout  # seconds to find a host by ARP probes
        self._arp_probed: dict[str, float] = {}  # address -> time of the last probe round
        if self.state.fabric is not None:  # before REST serves: about 1 s at paper scale
            self._current_tables()

    # read-only shortcuts for the shell, the metrics and tests
    @property
    def fabric(self) -> Fabric | None:
        return self.state.fabric

    @property
    def jobs(self) -> dict:
        return self.state.jobs

    @property
    def installed(self) -> dict:
        return self.reconciler.installed

    @property
    def counters(self) -> dict:
        return self.state.counters

    @property
    def telemetry(self):
        return self.state.telemetry

    def _name(self, dpid: int) -> str:
        f = self.state.fabric
        return (f.switch_of_dpid.get(dpid) if f else None) or f"{dpid:#x}"

    # ---- switch events ----------------------------------------------------------------------
    def switch_connected(self, dpid: int, ports: dict[int, bool]) -> None:
        """A switch (re)connected: note its ports, queue it for reconciliation (its tables are
        read and only the difference is sent), and handle the links that came back."""
        with self.lock:
            self.state.switches[dpid] = SwitchSeen(True, dict(ports), self.clock())
            self.finder.switch_up(dpid, ports, self.clock())
            f = self.state.declared
            if f is None or dpid not in f.switch_of_dpid:
                self._bootstrap(dpid)
                return
            self.reconciler.connected(dpid)
            self._topology_changed(f"switch {f.switch_of_dpid[dpid]} connected")
        self._sync_queued()

    def _sync_queued(self) -> None:
        """Reconcile queued switches one at a time; each switch's tables are read without the
        lock (a network wait), so requests are served while many switches reconnect. Nothing
        else sends to a switch that is not synchronised, so the read cannot go stale; the
        difference is computed and sent under the lock against the newest desired tables."""
        rec = self.reconciler
        failed: set[int] = set()  # stay queued: tried again at the next tick
        while True:
            with self.lock:
                if self.state.fabric is None or self.passive:
                    break
                dpid = rec.claim()
            if dpid is None:
                break
            try:
                have = rec.installer.read_tables(dpid)
            except InstallError as e:
                with self.lock:
                    if dpid in rec.syncing:
                        rec.syncing.discard(dpid)
                        failed.add(dpid)
                LOG.error("mlroute: switch %s could not be read: %s", self._name(dpid), e)
                continue
            with self.lock:
                seen = self.state.switches.get(dpid)
                if dpid not in rec.syncing or seen is None or not seen.connected:
                    continue  # it left (or reconnected: queued again) meanwhile
                try:
                    rec.repair(dpid, have, *self._current_tables().get(dpid, ([], [])))
                except InstallError as e:
                    failed.add(dpid)
                    LOG.error("mlroute: switch %s could not be repaired: %s", self._name(dpid), e)
                    continue
                self._host_refresh()
        if failed:
            with self.lock:
                rec.pending |= {d for d in failed if d not in rec.installed and
                                self.state.switches.get(d) and self.state.switches[d].connected}

    def _current_tables(self) -> dict:
        """Desired tables of the committed state, computed once per change (a paper-scale
        fabric has about 40,000 static entries)."""
        st = self.state
        key = (st.version, id(st.fabric), id(st.jobs))
        if self._tables_cache[0] != key:
            self._tables_cache = (key, desired_tables(st.fabric, st.jobs.values()))
        return self._tables_cache[1]

    def switch_disconnected(self, dpid: int) -> None:
        with self.lock:
            s = self.state.switches.setdefault(dpid, SwitchSeen())
            s.connected = False
            s.since = self.clock()
            self.finder.switch_down(dpid, self.clock())
            self.reconciler.disconnected(dpid)
            f = self.state.declared
            if f is not None and dpid in f.switch_of_dpid:
                self._topology_changed(f"switch {f.switch_of_dpid[dpid]} disconnected")
                self._drain()

    def tick(self, probe: bool = True) -> None:
        """Called periodically (each second): LLDP probes out of every port (``probe``), the
        fabric adopted once discovery settled, and a switch silent for longer than
        ``dead_after`` counts as failed (its links go down, jobs crossing them re-planned)."""
        if self.passive:
            return
        with self.lock:
            now = self.clock()
            for dpid, port, frame in self.finder.lldp_probes(now) if probe else ():
                self._packet_out(dpid, port, frame)
            found = self.finder.settle(now)
            if found is not None:
                self._adopt(found, "fabric discovered")
            if self.state.declared is not None:
                self._topology_changed("switch disconnected for longer than "
                                       f"{self.dead_after:g} s")
            if self._reoptimise_at is not None and now >= self._reoptimise_at:
                self._reoptimise_at = None
                self._reoptimise()
        self._sync_queued()  # switches queued, or whose read failed before: tried again

    def _reoptimise(self) -> None:
        """Links came back and stayed up for the hold-down time: re-plan the auto groups from
        their installed routes (flows move only where that lowers the objective)."""
        st = self.state
        algs = {r.algorithm for r in st.jobs.values() if r.algorithm == "auto"}
        if not algs:
            return
        try:
            stats = self._change(self._plan(st.jobs, algs))
            error = None
        except (ConflictError, InstallError) as e:
            stats, error = None, str(e)
        st.add_event({"time": self.clock(), "cause": f"links up for {self.hold_down:g} s: "
                      "re-optimised", "replanned": sorted(algs) if not error else [],
                      "moved_flows": self.last_moved if not error else 0,
                      "rules": _public(stats), "error": error})

    def improve(self, run=None) -> dict | None:
        """Anytime planning: one auto group whose optimality is not proven gets auto with its
        ILP stage (``run(problem, ilp_time_limit, objective)``, slow: called without the lock,
        in a child process by the shell). A better routing, renamed to keep as many flows in
        place as possible, is installed make before break and reported as an event."""
        with self.lock:
            if not self.unproven or self.state.fabric is None or self.passive:
                return None
            key = sorted(self.unproven)[0]
            group = [r for r in self.state.jobs.values()
                     if r.algorithm == key[0] and
                     r.job.options.get("objective", self.objective) == key[1]]
            self.unproven.discard(key)
            if not group:
                return None
            version = self.state.version
            problem = Problem.build(self.state.fabric, [r.job for r in group],
                                    skip_unroutable=True)
            flows = [(r, f) for r in group for f in r.job.flows()]
            before = [flows[pos][0].routes.get(flow_key(flows[pos][1])) for pos in problem.inter]
            if any(p is None or len(p) != 1 for p in before):
                return None
            current = load_summary(problem, Assignment(list(before)))["max_link_load"]
        if run is None:
            from controller.planners.auto import auto

            def run(p, budget, objective):
                return auto(p, ilp_time_limit=budget, objective=objective)
        try:
            better = run(problem, self.ilp_budget, key[1])
        except InputError as e:
            LOG.error("mlroute: off-path planning failed: %s", e)
            return {"group": list(key), "error": str(e)}
        with self.lock:
            st = self.state
            found = better.info.get("max_link_load", current)
            result = {"group": list(key), "max_link_load_before": current,
                      "max_link_load_after": found, "optimal": bool(better.info.get("optimal"))}
            if st.version != version:
                result["stale"] = True  # the jobs or the fabric changed meanwhile
                return result
            if found >= current:
                result["improved"] = False
                return result
            spines = align_spines(problem, better.spines(), [p[0][0] for p in before])
            records = {k: v.copy() for k, v in st.jobs.items()}
            moved = 0
            for pos, s_new in zip(problem.inter, spines):
                r, f = flows[pos]
                old = records[r.job.id].routes.get(flow_key(f))
                moved += old != ((s_new, 1.0),)
                records[r.job.id].routes[flow_key(f)] = ((s_new, 1.0),)
            try:
                stats = self._change(records)
            except (ConflictError, InstallError) as e:
                result["error"] = str(e)
                return result
            result.update(improved=True, moved_flows=moved, rules=_public(stats))
            st.add_event({"time": self.clock(), "cause": "off-path ILP found a better routing",
                          **result})
            return result

    def packet_in(self, dpid: int, port: int, frame: bytes) -> None:
        """An LLDP probe or a host's ARP/IPv4 packet reached the controller."""
        with self.lock:
            self.finder.packet_in(dpid, port, frame, self.clock())

    def _packet_out(self, dpid: int, port: int, frame: bytes) -> None:
        if self.passive:
            return
        try:
            self.reconciler.installer.packet_out(dpid, port, frame)
        except InstallError as e:  # a switch that just left; the next round tries again
            LOG.debug("mlroute: packet-out to %s failed: %s", self._name(dpid), e)

    def _bootstrap(self, dpid: int) -> None:
        """A switch that is not part of the fabric (yet): LLDP and ARP to the controller, so
        that discovery can see its links and hosts. Reconciled like any entry once known."""
        if self.passive:
            return
        try:
            self.reconciler.installer.install({dpid: bootstrap_messages(dpid)})
        except InstallError as e:
            LOG.error("mlroute: switch %#x: %s", dpid, e)

    def _adopt(self, fabric: Fabric, cause: str) -> None:
        """Use a discovered fabric. With jobs running it must keep every switch, port and host
        they know (it may add hosts and switches and change which links are down)."""
        st = self.state
        if st.declared is not None and st.jobs and not _extends(st.declared, fabric):
            st.add_event({"time": self.clock(), "cause": cause, "error": (
                "the discovered wiring changes switches or hosts that running jobs use: kept "
                "the fabric in use; delete the jobs to adopt it")})
            return
        st.declared = fabric
        rec = self.reconciler
        rec.forget(lambda d: d in fabric.switch_of_dpid)
        for dpid, seen in st.switches.items():
            if seen.connected and dpid in fabric.switch_of_dpid and dpid not in rec.installed:
                rec.connected(dpid)
        self._topology_changed(cause, force=True)
        self._drain()
        self._save()

    def port_changed(self, dpid: int, port: int, up: bool) -> None:
        """A port went up or down; a leaf-spine link that went down re-plans the jobs using it."""
        with self.lock:
            self.state.switches.setdefault(dpid, SwitchSeen(True)).ports[port] = up
            self.finder.port_changed(dpid, port, up, self.clock())
            f = self.state.declared
            if f is None or dpid not in f.switch_of_dpid:
                return
            sw = f.switch_of_dpid[dpid]
            peer = f.peer(sw, port)
            if peer in f.spine_index or peer in f.leaf_index:
                self._topology_changed(f"port {sw}:{port} to {peer} {'up' if up else 'down'}")
                self._drain()

    def _topology_changed(self, cause: str, force: bool = False) -> None:
        """Recompute the effective fabric. Jobs crossing links that went down are re-planned
        (per algorithm group) and installed make before break, with the new static entries;
        flows that had no alive spine are planned as soon as one returns. A leaf pair that
        lost every spine makes only its own flows unroutable (reported); the rest is served."""
        if self.passive:  # a standby follows the master's stored intent
            return
        t0 = time.perf_counter()
        st = self.state
        fabric = effective_fabric(st.declared, st.switches, self.clock(), self.dead_after)
        before = st.fabric.down if st.fabric is not None else fabric.down
        if fabric.down == before and not force:
            return
        went_down = fabric.down - before
        came_up = before - fabric.down
        old_fabric = st.fabric
        st.fabric = fabric
        st.version += 1
        algs = {r.algorithm for r in st.jobs.values()
                if (went_down and self._crosses(r, went_down)) or (came_up and r.unroutable())
                or (came_up and r.algorithm == "auto" and self.hold_down <= 0)}
        if came_up and self.hold_down > 0:
            self._reoptimise_at = self.clock() + self.hold_down
        records, error, stats, host = st.jobs, None, None, {}
        try:
            records = self._plan(st.jobs, algs)
            want = desired_tables(fabric, records.values())
            stats = self.reconciler.converge(want)
            st.jobs = records
            self._record_install(stats)
            host = self._host_refresh()  # host mode: new ports where the buckets changed
        except (ConflictError, InstallError) as e:
            error = str(e)
            LOG.error("mlroute: %s: %s", cause, e)
            if isinstance(e, InstallError):
                st.fabric = old_fabric  # nothing changed on the switches; try at the next event
        self._save()
        event = {"time": self.clock(), "cause": cause,
                 "links_down": sorted(f"{l}-{s}" for l, s in went_down),
                 "links_up": sorted(f"{l}-{s}" for l, s in came_up),
                 "replanned": sorted(algs) if error is None else [],
                 "moved_flows": self.last_moved if error is None and algs else 0,
                 "rules": _public(stats), "error": error,
                 "unroutable_flows": sum(len(r.unroutable()) for r in st.jobs.values()),
                 "recovery_ms": round((time.perf_counter() - t0) * 1e3, 3), **host}
        st.add_event(event)
        if went_down:
            st.counters["failures_handled"] += 1
            st.record("recovery_ms", event["recovery_ms"])

    def _crosses(self, r: JobRecord, links: set[tuple[str, str]]) -> bool:
        f = self.state.fabric
        for flow, parts in r.flows_with_parts():
            a, b = f.hosts[flow.src], f.hosts[flow.dst]
            for s, _ in parts or ():
                if (a, f.spines[s]) in links or (b, f.spines[s]) in links:
                    return True
        return False

    def _drain(self) -> None:
        """Read and repair every queued switch (after the operation that queued it)."""
        rec = self.reconciler
        if not rec.pending or self.state.fabric is None or self.passive:
            return
        want = self._current_tables()
        for dpid, error in rec.drain(want):
            LOG.error("mlroute: switch %s could not be reconciled: %s", self._name(dpid), error)
        self._host_refresh()

    # ---- fabric -----------------------------------------------------------------------------
    def put_fabric(self, doc) -> dict:
        with self.lock:
            fabric = Fabric.from_dict(doc)
            if not fabric.wired:
                raise InputError("fabric: the controller needs dpids, ports, host_ip and host_mac")
            st = self.state
            if st.jobs:
                raise ConflictError("fabric: delete the running jobs before replacing the fabric")
            self.finder.declared = fabric
            old = st.declared, st.fabric
            st.declared = fabric
            st.fabric = effective_fabric(fabric, st.switches, self.clock(), self.dead_after)
            rec = self.reconciler
            rec.forget(lambda d: d in fabric.switch_of_dpid)
            try:
                self._record_install(rec.converge(desired_tables(st.fabric, [])))
            except InstallError:
                st.declared, st.fabric = old
                raise
            st.version += 1
            for dpid, seen in st.switches.items():
                if seen.connected and dpid in fabric.switch_of_dpid and dpid not in rec.installed:
                    rec.connected(dpid)
            self._drain()
            self._save()
            return self._fabric_view()

    def fabric_view(self) -> dict:
        with self.lock:
            return self._fabric_view()

    def _fabric_view(self) -> dict:
        rec = self.reconciler
        doc = views.fabric_view(self.state, rec.installed, rec.pending, rec.last_sync)
        doc["rule_budget"] = self._budget_view()
        doc["host_mode"] = self._host_view()
        doc["discovery"] = {"mode": "checking the declared fabric" if self.finder.declared
                            else "discovering", "wiring_problems": self.finder.problems}
        return doc

    # ---- jobs -------------------------------------------------------------------------------
    def post_job(self, doc) -> dict:
        doc = self._resolve_addresses(doc)
        with self.lock:
            st = self.state
            fabric = views.need_fabric(st)
            job = parse_job(doc, fabric)
            if not JOB_ID.fullmatch(job.id):
                raise InputError(f"job id {job.id!r}: use 1-64 letters, digits, '.', '_', '~' "
                                 "or '-' (it must be usable in a URL path)")
            if job.id in st.jobs:
                raise ConflictError(f"job {job.id!r} exists already")
            if len(st.jobs) >= MAX_JOBS:
                raise ConflictError(f"{MAX_JOBS} jobs run already: delete one first")
            seen: set = set()
            for f in job.flows():
                if flow_key(f) in seen:
                    raise InputError(f"job {job.id}: flow {f.src} -> {f.dst} appears twice with "
                                     "the same ports: give the flows distinct ports")
                seen.add(flow_key(f))
            algorithm = job.options.get("algorithm", self.algorithm)
            mode = job.options.get("mode", self.mode)
            if algorithm not in ALGORITHMS:
                raise InputError(f"job {job.id}: unknown algorithm {algorithm!r} "
                                 f"(choose from {', '.join(ALGORITHMS)})")
            if mode not in MODES:
                raise InputError(f"job {job.id}: unknown mode {mode!r} "
                                 f"(choose from {', '.join(MODES)})")
            objective = job.options.get("objective", self.objective)
            if objective not in OBJECTIVES:
                raise InputError(f"job {job.id}: unknown objective {objective!r} "
                                 f"(choose from {', '.join(OBJECTIVES)})")
            if objective != "flows" and algorithm != "auto":
                raise InputError(f"job {job.id}: objective {objective!r} needs algorithm 'auto'")
            advice = None
            if job.options.get("ring_order") == "advised" and job.is_collective:
                advice = {"rings": [advise_ring(fabric, r) for r in job.rings]}
                job = apply_advice(job, advice)
            records = dict(st.jobs)
            records[job.id] = JobRecord(job, st.next_number, algorithm, mode, self.clock())
            planned = self._plan(records, {algorithm})
            admitted = self._admit(planned, job.id)  # rule budget; host-mode flows
            bad = planned[job.id].unroutable()
            if bad:  # a new job must be routable as a whole; running ones may degrade
                raise ConflictError(
                    f"no alive spine between leaves {fabric.hosts[bad[0].src]} and "
                    f"{fabric.hosts[bad[0].dst]} (flow {bad[0].src} -> {bad[0].dst} of job "
                    f"{job.id})")
            stats = self._change(planned)
            st.next_number += 1
            view = self._job_view(job.id)
            view.update(install_ms=round((stats["seconds"] or 0) * 1e3, 3), rules=_public(stats),
                        moved_flows=self.last_moved, **admitted)
            if self.host.ports:
                view["port_changes"] = self.last_port_changes
            if advice is not None:
                view["ring_order_advice"] = advice
            return view

    def advise(self, doc) -> dict:
        """Ring order advice for a job document, not installed: per ring the order that
        crosses fewest leaves, and the saving in inter-leaf flows and predicted time (the job
        planned alone with its algorithm)."""
        doc = self._resolve_addresses(doc)
        with self.lock:
            fabric = views.need_fabric(self.state)
            job = parse_job(doc, fabric)
            if not job.is_collective:
                raise InputError(f"job {job.id}: ring order advice needs a ring All-Reduce")
            algorithm = job.options.get("algorithm", self.algorithm)
            if algorithm not in ALGORITHMS:
                raise InputError(f"job {job.id}: unknown algorithm {algorithm!r}")
            opts = dict(self.planner_opts.get(algorithm, planner_options(algorithm)))
            if algorithm == "auto":
                opts["ilp_time_limit"] = 0  # advice answers at once
        return advise_order(fabric, [job], algorithm, predict=True, **opts)

    def delete_job(self, job_id: str) -> dict:
        with self.lock:
            if job_id not in self.state.jobs:
                raise NotFoundError(f"no job {job_id!r}")
            records = {k: v for k, v in self.state.jobs.items() if k != job_id}
            stats = self._change(records)
            return {"deleted": job_id, "rules": _public(stats)}

    def optimize(self) -> dict:
        """Re-plan every running job together (per algorithm) and install the difference."""
        with self.lock:
            st = self.state
            views.need_fabric(st)
            planned = self._plan(st.jobs, {r.algorithm for r in st.jobs.values()})
            stats = self._change(planned)
            return {"jobs": list(st.jobs), "rules": _public(stats), "moved_flows": self.last_moved,
                    **views.links_view(st, self.current_plan())["summary"]}

    def _change(self, records: dict) -> dict:
        """Install ``records`` (make before break) and commit them; nothing changes on error."""
        st = self.state
        want = desired_tables(st.fabric, records.values())
        self.reconciler.check_offline(
            want, self._current_tables, self._name)
        stats = self.reconciler.converge(want)
        ports = self._host_place_or_undo(records)
        st.jobs = records
        self._host_commit(records, ports)
        st.version += 1
        self._record_install(stats)
        self._drain()
        self._save()
        return stats

    def _record_install(self, stats: dict) -> None:
        if stats.get("seconds") is not None:
            self.state.record("install_s", stats["seconds"])

    def job_view(self, job_id: str) -> dict:
        with self.lock:
            return self._job_view(job_id)

    def _job_view(self, job_id: str) -> dict:
        r = self.state.jobs.get(job_id)
        if r is None:
            raise NotFoundError(f"no job {job_id!r}")
        return views.job_view(self.state, r, self._prediction(job_id),
                              self.host.ports.get(job_id))

    def jobs_view(self) -> dict:
        with self.lock:
            return views.jobs_view(self.state)

    def routes_view(self) -> dict:
        with self.lock:
            return views.routes_view(self.state, self.host.ports)

    def links_view(self) -> dict:
        with self.lock:
            return views.links_view(self.state, self.current_plan())

    def imbalance_view(self) -> dict:
        with self.lock:
            return views.imbalance_view(self.state)

    def job_ports(self, job_id: str) -> str:
        """The source port of every connection of a job as text, one line per connection
        (what a job launcher reads: host mode's chosen ports, or the flows' own)."""
        with self.lock:
            r = self.state.jobs.get(job_id)
            if r is None:
                raise NotFoundError(f"no job {job_id!r}")
            return views.ports_export(self.state, r, self.host.ports.get(job_id))

    # ---- host mode: source ports instead of per-flow entries (controller/enforcement/hostmode.py) --------
    def _host_flows(self, records: dict) -> tuple[list, list]:
        """Host-mode flows as ((job id, flow key), flow, parts), and the (host, protocol,
        port) that flows of the other modes use, which host-mode flows must not take."""
        flows, taken = [], []
        for r in records.values():
            for flow, parts in r.flows_with_parts():
                if r.mode == "host":
                    flows.append(((r.job.id, flow_key(flow)), flow, parts))
                elif parts:
                    for i in range(len(parts)):
                        port = part_sport(flow, i, len(parts))
                        if port:
                            taken.append((flow.src, flow.proto, port))
        return flows, taken

    def _host_place(self, records: dict) -> dict:
        """Ports of every host-mode flow of ``records``; probes the leaves whose map is
        unknown or stale (their tables must be installed)."""
        flows, taken = self._host_flows(records)
        if not flows:
            return {}
        probe = getattr(self.reconciler.installer, "probe", None)
        if probe is None:
            raise ConflictError("host mode: the switch connection cannot send probes")
        return self.host.place(self.state.fabric, flows, probe, taken)

    def _host_place_or_undo(self, records: dict) -> dict:
        """``_host_place`` for a change whose tables are installed already; on failure the
        switches are brought back to the committed state and the error raised."""
        try:
            return self._host_place(records)
        except (ConflictError, InputError):  # InstallError too: probes lost
            try:
                self.reconciler.converge(desired_tables(self.state.fabric,
                                                        self.state.jobs.values()))
            except InstallError as e:
                LOG.error("mlroute: undoing a change whose probes failed: %s", e)
            raise

    def _host_commit(self, records: dict, ports: dict) -> list[dict]:
        """Keep the ports of committed ``records``; ``last_port_changes`` lists the flows
        whose port changed (the host opens the new connection before closing the old)."""
        fabric = self.state.fabric
        changes = []
        for (jid, fk), part, old, new in self.host.changes(ports):
            parts = records[jid].routes.get(fk) or ()
            changes.append({"job": jid, "src": fk[0], "dst": fk[1], "part": part,
                            "old_sport": old, "sport": new,
                            "spine": fabric.spines[parts[part][0]] if part < len(parts) else None})
        self.host.commit(ports)
        if not any(r.mode == "host" for r in records.values()):
            self.host.maps.clear()  # the pipeline goes with the last host job: learn again
        self.last_port_changes = changes
        return changes

    def _host_refresh(self) -> dict:
        """After a topology change or a switch synchronised: the leaves whose live uplinks
        changed are probed again and the host-mode flows whose port no longer leads to the
        planned spine get new ones (also the ports of jobs loaded from the state file).
        Returns the event's fields: ``port_changes`` or ``host_error``."""
        st, rec = self.state, self.reconciler
        if self.passive or st.fabric is None:
            return {}
        flows, _ = self._host_flows(st.jobs)
        if not flows:
            self.host.maps.clear()
            self.host.ports = {}
            return {}
        complete = all(fk in self.host.ports.get(jid, {}) and None not in
                       self.host.ports[jid][fk] for (jid, fk), _f, _p in flows)
        if complete and not self.host.stale(st.fabric):
            return {}
        if rec.pending:  # probes need the tables in place: after the drain
            return {}
        try:
            ports = self._host_place(st.jobs)
        except (ConflictError, InputError) as e:
            LOG.error("mlroute: host mode: %s", e)
            return {"host_error": str(e)}
        changes = self._host_commit(st.jobs, ports)
        st.version += 1
        return {"port_changes": changes}

    # ---- per-switch rule budget ------------------------------------------------------------
    def _admit(self, planned: dict, job_id: str) -> dict:
        """A new job within every switch's flow-entry budget (``max_flow_rules``): over it, a
        flow or sr job is refused naming the switch and the counts, or (``over_budget`` host)
        planned in host mode, which needs no per-flow entry. Host-mode flows must be
        steerable by source port. Returns what the answer reports."""
        r = planned[job_id]
        note = {}
        if self.max_flow_rules:
            over = self._over_budget(planned)
            if over and r.mode != "host" and self.over_budget == "host":
                note = {"over_budget": over[0], "mode_reason": (
                    f"{over[0]['message']}: planned in host mode instead (--mlroute-over-budget "
                    "host)")}
                r.mode = "host"
                over = self._over_budget(planned)
            if over:
                raise ConflictError(
                    f"job {job_id}: {over[0]['message']} (--mlroute-max-flow-rules)"
                    + (f"; {len(over) - 1} more switches over it" if len(over) > 1 else "")
                    + ("" if r.mode == "host" else "; post it with \"mode\": \"host\" (no "
                       "per-flow entries) or make it smaller"))
        if r.mode == "host":
            for f in r.job.flows():
                try:
                    host_protocol(f)
                except InputError as e:
                    raise InputError(f"job {job_id}: {e}") from None
        return note

    def _over_budget(self, planned: dict) -> list[dict]:
        """Switches that would hold more flow entries than the budget and more than now,
        fullest first."""
        st = self.state
        new = desired_tables(st.fabric, planned.values())
        now = desired_tables(st.fabric, st.jobs.values())
        over = []
        for dpid, (rules, _) in new.items():
            n = len(rules)
            if n > self.max_flow_rules and n > len(now.get(dpid, ([], []))[0]):
                jobs = sum(1 for x in rules if x.cookie != COOKIE_STATIC)
                name = self._name(dpid)
                over.append({"switch": name, "rules": n, "job_rules": jobs,
                             "static_rules": n - jobs, "budget": self.max_flow_rules,
                             "message": f"switch {name} would hold {n} flow entries ({jobs} of "
                                        f"jobs, {n - jobs} static), over its budget of "
                                        f"{self.max_flow_rules}"})
        return sorted(over, key=lambda o: (-o["rules"], o["switch"]))

    def _budget_view(self) -> dict:
        installed = self.reconciler.installed
        counts = {self._name(d): len(t.rules) for d, t in installed.items()}
        fullest = max(counts.items(), key=lambda kv: (kv[1], kv[0]), default=(None, 0))
        return {"max_flow_rules": self.max_flow_rules or None, "over_budget": self.over_budget,
                "fullest_switch": fullest[0], "fullest_rules": fullest[1],
                "switches_over": sorted(k for k, v in counts.items()
                                        if self.max_flow_rules and v > self.max_flow_rules)}

    def _host_view(self) -> dict:
        """What host mode learned and what it cost: probes sent since start, maps held."""
        h = self.host
        return {"probes_sent": h.probes_sent, "probe_rounds": h.probe_rounds,
                "maps": len(h.maps), "ports_probed": sum(m.window for m in h.maps.values()),
                "flows_with_ports": sum(len(v) for v in h.ports.values())}

    # ---- planning and prediction -------------------------------------------------------------
    def _plan(self, records: dict[str, JobRecord], algorithms: set[str]) -> dict[str, JobRecord]:
        """New records with the jobs of the given algorithms re-planned together. Flows of a
        leaf pair with no alive spine get no route (UNROUTABLE) instead of failing the plan."""
        out = {k: v.copy() for k, v in records.items()}
        fabric = self.state.fabric
        self.last_moved = 0
        groups = {}
        for r in out.values():
            if r.algorithm in algorithms:
                objective = (r.job.options.get("objective", self.objective)
                             if r.algorithm == "auto" else "flows")
                groups.setdefault((r.algorithm, objective), []).append(r)
        for (alg, objective), group in sorted(groups.items()):
            problem = Problem.build(fabric, [r.job for r in group], skip_unroutable=True)
            if alg == "auto":  # from the installed routes: move only what must or helps
                previous = [r.routes.get(flow_key(f)) for r in group for f in r.job.flows()]
                t0 = time.perf_counter()
                assignment = replan(problem, previous, objective, ilp_time_limit=0)
                ms = (time.perf_counter() - t0) * 1e3
                self.last_moved += assignment.info["moved_flows"]
                self.state.counters["moved_flows"] = (self.state.counters.get("moved_flows", 0)
                                                      + assignment.info["moved_flows"])
                if assignment.info.get("optimal"):
                    self.unproven.discard((alg, objective))
                elif self.ilp_budget > 0 and not assignment.is_split():
                    self.unproven.add((alg, objective))
            else:
                assignment, ms = run_planner(problem, alg,
                                             **self.planner_opts.get(alg, planner_options(alg)))
            self.state.record("planner_ms", ms)
            parts = Plan(alg, problem, assignment, ms).parts_by_flow()
            for pos in problem.unroutable:
                parts[pos] = UNROUTABLE
            pos = 0
            for r in group:
                for f in r.job.flows():
                    r.routes[flow_key(f)] = parts[pos]
                    pos += 1
        return out

    def current_plan(self):
        """The running jobs and their installed routes as one Plan (call under the lock)."""
        st = self.state
        return installed_plan(st.fabric, st.jobs.values()) if st.fabric else None

    def _prediction(self, job_id: str) -> dict:
        """The fluid model's All-Reduce time of one iteration, every routable job starting
        together, computed once per state version. A job with unroutable flows, or a model
        that cannot finish within its bound, gets no figure and the reason."""
        version, cached = self._predictions
        if version != self.state.version:
            cached = self._predict_all()
            self._predictions = (self.state.version, cached)
        return cached.get(job_id, {"seconds": None, "error": "not predicted"})

    def _predict_all(self) -> dict:
        st = self.state
        out, routable = {}, []
        for r in st.jobs.values():
            bad = r.unroutable()
            if bad:
                f = st.fabric
                out[r.job.id] = {"seconds": None, "error": (
                    f"{len(bad)} flows have no alive spine (leaves {f.hosts[bad[0].src]} and "
                    f"{f.hosts[bad[0].dst]} first)")}
            else:
                routable.append(r)
        plan = installed_plan(st.fabric, routable) if routable else None
        if plan is None:
            return out
        try:
            times = predict_allreduce(plan, on_event=self.on_progress)
        except PredictionError as e:
            LOG.error("mlroute: prediction failed: %s", e)
            for r in routable:
                out[r.job.id] = {"seconds": None, "error": f"prediction failed: {e}"}
            return out
        for r in routable:
            out[r.job.id] = {"seconds": times.get(r.job.id)}
        return out

    # ---- telemetry ---------------------------------------------------------------------------
    def port_stats(self, dpid: int, tx_bytes: dict[int, int], now: float | None = None) -> None:
        with self.lock:
            if self.state.fabric is not None:
                self.state.telemetry.port_stats(self.state.fabric, dpid, tx_bytes,
                                                self.clock() if now is None else now)

    def flow_stats(self, dpid: int, entries, now: float | None = None) -> None:
        """entries: (table, priority, match dict, bytes, packets) of a switch's rules."""
        with self.lock:
            keyed = [((dpid, table, prio, tuple(sorted(match.items()))), nbytes, npackets)
                     for table, prio, match, nbytes, npackets in entries]
            self.state.telemetry.flow_stats(keyed, self.clock() if now is None else now)

    # ---- persistence --------------------------------------------------------------------------
    def _save(self) -> None:
        if self.store is not None:
            self.store.save(to_doc(self.state))

    # ---- redundant controllers (controller/service/cluster.py) ---------------------------------------
    def follow_intent(self, doc: dict | None) -> bool:
        """A standby takes the master's stored intent as it is, routes included: nothing is
        planned (``auto`` and ``ilp`` stop at time limits) and nothing is sent (the master
        installed it). Ignored on the master (False): its own writes come back from etcd."""
        with self.lock:
            if not self.passive:
                return False
            self._load_intent(doc)
            return True

    def _load_intent(self, doc: dict | None) -> None:
        if doc is None:
            return
        declared, jobs, number = from_doc(doc, None)
        st = self.state
        st.declared, st.fabric, st.jobs, st.next_number = declared, declared, jobs, number
        st.version += 1
        if declared is not None:
            self.reconciler.forget(lambda d: d in declared.switch_of_dpid)
            if self.finder.declared is None:
                self.finder.recognised = declared

    def take_over(self, doc: dict | None) -> dict:
        """Become the master (after the switches accepted this controller's master role):
        the stored intent as a restarted controller loads it, then every connected switch is
        read and repaired, so a switch whose tables match gets no message. Links seen down
        re-plan only the jobs crossing them. Returns what the synchronisation sent."""
        with self.lock:
            self._load_intent(doc)
            self.passive = False
            # discovery: as a standby it saw no LLDP (slaves get no packet-ins), so the
            # fabric is checked again only after a quiet period of probes, as after a restart
            self.finder.topology.changed_at = self.clock()
            st, rec = self.state, self.reconciler
            sent0 = st.counters["messages_sent"]
            f = st.declared
            synced = 0
            if f is not None:
                st.fabric = f  # as after a restart: links seen down are found again below
                for dpid, seen in st.switches.items():
                    if seen.connected and dpid in f.switch_of_dpid:
                        rec.connected(dpid)
                        synced += 1
                self._topology_changed("became the master controller", force=True)
                self._drain()  # (the re-plan above also stored the intent, for standbys)
            return {"switches": synced, "messages": st.counters["messages_sent"] - sent0,
                    "pending": len(rec.pending)}

    def stand_by(self) -> None:
        """Stop acting on switches (another controller is, or may be, the master). The shadow
        tables are dropped: a later takeover reads every switch again."""
        self.passive = True
        with self.lock:
            for dpid in list(self.reconciler.installed):
                self.reconciler.connected(dpid)

    def cluster_view(self) -> dict:
        return self.cluster.view() if self.cluster is not None else standalone_view()

    # ---- addresses ----------------------------------------------------------------------------
    def arp_answer(self, ip: str) -> str | None:
        """The MAC owning ``ip`` for the controller's ARP answers: the fabric's hosts, else a
        host discovery has heard. An unknown address is looked for with ARP probes (at most
        one round per second per address) and None is returned for now."""
        with self.lock:
            f = self.state.fabric
            for host, addr in (f.host_ip.items() if f else ()):
                if addr == ip:
                    return f.host_mac.get(host)
            mac = self.finder.mac_of(ip)
            if mac is None and self.finder.declared is None:
                self._probe(ip)
            return mac

    def _probe(self, ip: str) -> None:
        now = self.clock()
        if now - self._arp_probed.get(ip, -1e9) < 1.0:
            return
        self._arp_probed[ip] = now
        if len(self._arp_probed) > 4096:
            self._arp_probed = {k: v for k, v in self._arp_probed.items() if now - v < 10}
        for dpid, port, frame in self.finder.arp_probes(ip):
            self._packet_out(dpid, port, frame)

    def _resolve_addresses(self, doc):
        """A job may name ranks by IPv4 address: replace each by its host's name. An address
        no host of the fabric has is looked for with ARP probes (discovery) for at most
        ``resolve_timeout`` seconds, then it is a 400 naming it."""
        if not isinstance(doc, dict):
            return doc
        addresses = {a for a in _addresses(doc)}
        if not addresses:
            return doc
        deadline = self.clock() + self.resolve_timeout
        while True:
            with self.lock:
                f = self.state.fabric
                names = {ip: h for h, ip in (f.host_ip.items() if f else ())}
                missing = sorted(addresses - set(names))
                if not missing:
                    return _renamed(doc, names)
                if self.finder.declared is not None or self.clock() >= deadline:
                    raise InputError(
                        f"no host has address {missing[0]}" + (
                            " in the declared fabric" if self.finder.declared is not None else
                            f" (ARP probes for {self.resolve_timeout:g} s got no answer)"))
                for ip in missing:
                    if self.finder.mac_of(ip) is None:
                        self._probe(ip)
                found = self.finder.settle(self.clock(), force=all(
                    self.finder.mac_of(ip) for ip in missing))
                if found is not None:
                    self._adopt(found, "fabric discovered")
            self.sleep(0.1)


def _addresses(doc: dict) -> set[str]:
    """IPv4 addresses used as ranks or flow ends in a job document."""
    names = [x for r in doc.get("rings", []) if isinstance(r, list) for x in r]
    names += doc.get("ranks", []) if isinstance(doc.get("ranks"), list) else []
    for fl in doc.get("flows", []) if isinstance(doc.get("flows"), list) else []:
        if isinstance(fl, dict):
            names += [fl.get("src"), fl.get("dst")]
    out = set()
    for n in names:
        if isinstance(n, str) and n.count(".") == 3:
            try:
                out.add(str(ipaddress.IPv4Address(n)))
            except ValueError:
                pass
    return out


def _renamed(doc: dict, names: dict) -> dict:
    def name(x):
        return names.get(x, x) if isinstance(x, str) else x
    doc = dict(doc)
    if isinstance(doc.get("ranks"), list):
        doc["ranks"] = [name(x) for x in doc["ranks"]]
    if isinstance(doc.get("rings"), list):
        doc["rings"] = [[name(x) for x in r] if isinstance(r, list) else r for r in doc["rings"]]
    if isinstance(doc.get("flows"), list):
        doc["flows"] = [dict(fl, src=name(fl.get("src")), dst=name(fl.get("dst")))
                        if isinstance(fl, dict) else fl for fl in doc["flows"]]
    return doc


def _extends(old: Fabric, new: Fabric) -> bool:
    """``new`` keeps every switch, port, host and address of ``old`` (links may differ)."""
    if old.spines != new.spines[:len(old.spines)] or old.leaves != new.leaves[:len(old.leaves)]:
        return False
    if any(new.dpids.get(k) != v for k, v in old.dpids.items()):
        return False
    for host, leaf in old.hosts.items():
        if (new.hosts.get(host) != leaf or new.host_ip.get(host) != old.host_ip.get(host) or
                new.host_mac.get(host) != old.host_mac.get(host) or
                new.ports.get(leaf, {}).get(host) != old.ports[leaf].get(host)):
            return False
    return all(new.ports.get(sw, {}).get(peer) == port
               for sw, ports in old.ports.items() for peer, port in ports.items()
               if peer in old.spine_index or peer in old.leaf_index)


def _public(stats: dict | None) -> dict | None:
    """Rule counts of a change as the API reports them."""
    if stats is None:
        return None
    return {k: stats[k] for k in ("added", "removed", "switches") if k in stats}
