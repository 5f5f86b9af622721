"""Prometheus metrics (prometheus_client), read from the service when scraped.

mlroute_rules_installed, mlroute_rule_changes_total{kind}, mlroute_install_seconds (histogram),
mlroute_planner_seconds (histogram), mlroute_planned_link_flows{link},
mlroute_measured_link_bps{link}, mlroute_path_imbalance{direction,stat},
mlroute_switches_connected, mlroute_switches_declared, mlroute_jobs,
mlroute_restart_round_switches, mlroute_restart_rounds_total{outcome} (switches lost together),
mlroute_failures_handled_total, mlroute_install_failures_total, mlroute_recovery_seconds (histogram),
mlroute_table_full_total{outcome}, mlroute_table_full_freed_rules_total (full flow tables),
mlroute_unroutable_flows{src_leaf,dst_leaf}, mlroute_switch_syncs_total,
mlroute_openflow_messages_total, mlroute_wiring_problems{kind},
mlroute_switch_flow_rules{switch,owner}, mlroute_max_flow_rules,
mlroute_security_events_total{kind} (refused LLDP probes and address claims, addresses moved),
mlroute_discovery_frames_total{kind} (probes and answers discovery sent),
mlroute_link_speed_gbps{source}, mlroute_sflow_datagrams_total,
mlroute_sflow_rejected_datagrams_total, mlroute_sflow_samples_total,
mlroute_sflow_dropped_samples_total, mlroute_learning_samples_total{job} (learned matrices:
what is heard and attributed), mlroute_forged_packets_total{switch} (what a leaf's host ports
refused for a source address not their host's: ``enforcement.source_check``),
mlroute_agents_{reporting,silent,document_refused,credential_refused,contradicting},
mlroute_probe_links_{down,suppressed}, mlroute_probe_link_changes_total (hosts' agents and
the link state of their probes, no OpenFlow: ``hoststatus.py``, ``pathstate.py``).
"""
from __future__ import annotations

import time

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily
from prometheus_client.exposition import CONTENT_TYPE_LATEST

from controller.enforcement.openflow import COOKIE_STATIC
from controller.enforcement.source_check import forged_drop
from controller.service import hoststatus, views

BUCKETS_S = (0.001, 0.005, 0.01, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)


def _histogram(name: str, doc: str, values: list[float]) -> HistogramMetricFamily:
    buckets = [(str(b), sum(1 for v in values if v <= b)) for b in BUCKETS_S]
    buckets.append(("+Inf", len(values)))
    return HistogramMetricFamily(name, doc, buckets=buckets, sum_value=sum(values))


def _agents(svc):
    """The hosts' agents (no OpenFlow: their probes are the link state; ``hoststatus.py``)."""
    probes = svc.paths.status(time.monotonic())
    hosts = hoststatus.of_service(svc, probes) or {}
    for name, doc, value in (
            ("mlroute_agents_reporting", "hosts whose agents reported probes within the window",
             hosts.get("reporting", 0)),
            ("mlroute_agents_silent", "hosts with srv6 flows whose agents did not report within "
             "the window", hosts.get("silent", 0)),
            ("mlroute_agents_document_refused", "hosts whose agents refused the controller's "
             "last document (they keep their old rules)", hosts.get("document_refused", 0)),
            ("mlroute_agents_report_refused", "hosts whose last probe report was refused "
             "(400: a path not from its leaf or off the cables)", hosts.get("report_refused", 0)),
            ("mlroute_agents_credential_refused", "hosts named by requests the REST server "
             "refused (a wrong credential, or another host's)", hosts.get("credential_refused", 0)),
            ("mlroute_agents_contradicting", "hosts whose failed probes others contradict "
             "(their failure evidence is discounted)", len(probes.get("contradicting", []))),
            ("mlroute_probe_links_down", "links the hosts' probes hold down",
             len(probes.get("links_down", []))),
            ("mlroute_probe_links_suppressed", "links held down by flap damping",
             len(probes.get("suppressed", [])))):
        yield GaugeMetricFamily(name, doc, value=value)
    yield CounterMetricFamily("mlroute_probe_link_changes", "links the hosts' probes took down "
                              "or brought back (each one a re-plan)",
                              value=probes.get("changes", 0))


class ServiceCollector:
    def __init__(self, service):
        self.service = service

    def collect(self):
        """Every family, read under the service lock and formatted after it is released: at
        the paper's scale the formatting took 170 ms, which REST requests waited for. A
        view: it does not wait for a change waiting on the switches (``servicelock.py``).
        Read in three holds of the lock (counters and tables; planned and measured links;
        the imbalance), each followed by the lock's ``pause`` (the shell's yield), and
        ``pause`` again after each family is formatted: under eventlet the page was one
        stretch of 47 ms at k = 16 (59 ms with an entry per host) that every REST request
        arriving meanwhile waited for. Each part reads a committed state; two parts may read
        two consecutive ones."""
        svc = self.service
        pause = svc.lock.pause or (lambda: None)
        links: dict = {}
        for part in (self._families, lambda: self._links(links), lambda: self._more(links)):
            with svc.lock.views:
                families = list(part())
            pause()
            for family in families:
                yield family  # formatted by the caller before the next is asked for
                pause()

    def _families(self):
        """The families of counters, switches and discovery (the caller holds the service
        lock)."""
        svc = self.service
        state = svc.state
        c = state.counters
        installed = sum(len(t.rules) for t in svc.reconciler.installed.values())
        yield GaugeMetricFamily("mlroute_rules_installed",
                                "flow rules the controller holds on connected switches",
                                value=installed)
        changes = CounterMetricFamily("mlroute_rule_changes", "rules added and removed",
                                      labels=["kind"])
        changes.add_metric(["added"], c["rules_installed"])
        changes.add_metric(["removed"], c["rules_removed"])
        yield changes
        yield CounterMetricFamily("mlroute_install_failures",
                                  "changes a switch rejected or did not confirm",
                                  value=c["install_failures"])
        full = CounterMetricFamily("mlroute_table_full",
                                   "times a switch refused additions for a full flow table, by "
                                   "what followed: made_room (entries no running job owns deleted "
                                   "first, the additions then taken), still_full (refused)",
                                   labels=["outcome"])
        for outcome in ("made_room", "still_full"):
            full.add_metric([outcome], c.get(f"table_full_{outcome}", 0))
        yield full
        yield CounterMetricFamily("mlroute_table_full_freed_rules",
                                  "entries no running job owns deleted first to make room in "
                                  "a full flow table", value=c.get("table_full_freed", 0))
        yield CounterMetricFamily("mlroute_switch_syncs",
                                  "switch tables read and repaired (connects, doubts)",
                                  value=c["reconnects"])
        yield CounterMetricFamily("mlroute_openflow_messages",
                                  "flow and group messages sent to switches",
                                  value=c["messages_sent"])
        yield CounterMetricFamily("mlroute_failures_handled",
                                  "link or switch failures handled", value=c["failures_handled"])
        yield CounterMetricFamily("mlroute_moved_flows",
                                  "running flows moved to another spine by re-plans",
                                  value=c.get("moved_flows", 0))
        yield CounterMetricFamily("mlroute_sflow_rejected_datagrams",
                                  "sFlow datagrams dropped: the sender is not a known agent",
                                  value=svc.learning.rejected)
        yield CounterMetricFamily("mlroute_sflow_datagrams",
                                  "sFlow datagrams with packet samples from known agents",
                                  value=svc.learning.datagrams)
        yield CounterMetricFamily("mlroute_sflow_samples",
                                  "packet samples accepted: IPv4 data frames between two hosts",
                                  value=svc.learning.learner.observed)
        yield CounterMetricFamily("mlroute_sflow_dropped_samples",
                                  "packet samples not counted: the switch dropped the packet "
                                  "(a forged source refused at its leaf among them)",
                                  value=svc.learning.learner.dropped)
        attributed = CounterMetricFamily("mlroute_learning_samples",
                                         "samples between a job's members since it was posted",
                                         labels=["job"])
        for jid, n in sorted(svc.learning.samples_by_job().items()):
            attributed.add_metric([jid], n)
        yield attributed
        yield _histogram("mlroute_install_seconds", "time to install and confirm a change",
                         state.install_s)
        yield _histogram("mlroute_planner_seconds", "planner runtime per call",
                         [ms / 1e3 for ms in state.planner_ms])
        yield _histogram("mlroute_recovery_seconds",
                         "from a link or switch failure to rules confirmed",
                         [ms / 1e3 for ms in state.recovery_ms])
        yield GaugeMetricFamily("mlroute_jobs", "running jobs", value=len(state.jobs))
        f = state.fabric
        declared = len(f.switches()) if f else 0
        yield GaugeMetricFamily("mlroute_switches_declared", "switches in the fabric",
                                value=declared)
        yield GaugeMetricFamily("mlroute_switches_connected", "declared switches connected",
                                value=sum(1 for d, s in state.switches.items() if s.connected and
                                          f is not None and d in f.switch_of_dpid))
        yield GaugeMetricFamily("mlroute_restart_round_switches",
                                "switches of open restart rounds still away (lost together: not "
                                "counted as failed until --mlroute-restart-grace)",
                                value=len(state.restarts.away(state.switches)))
        rounds = CounterMetricFamily("mlroute_restart_rounds",
                                     "restart rounds over, by outcome: returned (every switch "
                                     "back, nothing re-planned), expired (some still away after "
                                     "--mlroute-restart-grace: re-planned around them)",
                                     labels=["outcome"])
        for outcome in ("returned", "expired"):
            rounds.add_metric([outcome], state.restarts.closed[outcome])
        yield rounds
        yield from _rule_budget(svc.reconciler.installed, svc.switch_name,
                                svc.settings.max_flow_rules)
        yield _forged(f, state.telemetry.rules)
        wiring = GaugeMetricFamily("mlroute_wiring_problems",
                                   "discovered cabling that differs from the fabric in use",
                                   labels=["kind"])
        kinds: dict = {}
        for p in svc.finder.problems:
            kinds[p["kind"]] = kinds.get(p["kind"], 0) + 1
        for kind, n in sorted(kinds.items()):
            wiring.add_metric([kind], n)
        yield wiring
        yield from _discovery(svc.finder)
        yield from _agents(svc)

    def _links(self, out: dict):
        """Planned and measured flows per link (the caller holds the service lock); the
        links view is kept in ``out`` for ``_more``."""
        svc = self.service
        state = svc.state
        if state.fabric is None:
            return
        planned = GaugeMetricFamily("mlroute_planned_link_flows",
                                    "planned flows per directed switch link, by tier (leaf: "
                                    "leaf-spine or leaf-aggregation, core: aggregation-core)",
                                    labels=["link", "tier"])
        measured = GaugeMetricFamily("mlroute_measured_link_bps",
                                     "measured rate per directed switch link (port "
                                     "counters), by tier", labels=["link", "tier"])
        out["links"] = links = views.links_view(state, svc.current_plan())
        for link in links["links"]:
            labels = [link["link"], link.get("tier", "leaf")]
            planned.add_metric(labels, link["flows"])
            if link["measured"].get("bps") is not None:
                measured.add_metric(labels, link["measured"]["bps"])
        yield planned
        yield measured

    def _more(self, done: dict):
        """The path imbalance (the caller holds the service lock) and the unroutable flows
        of the links view ``_links`` read."""
        state = self.service.state
        if state.fabric is None or "links" not in done:
            return
        imb = GaugeMetricFamily("mlroute_path_imbalance",
                                "measured path imbalance over the last window",
                                labels=["direction", "stat"])
        window = views.imbalance_view(state)["window"]
        for direction in ("uplinks", "downlinks"):
            for stat in ("max", "mean"):
                imb.add_metric([direction, stat], window[direction][stat])
        yield imb
        broken = GaugeMetricFamily("mlroute_unroutable_flows",
                                   "planned flows whose leaf pair has no alive spine",
                                   labels=["src_leaf", "dst_leaf"])
        for p in done["links"]["summary"]["unroutable_pairs"]:
            broken.add_metric([p["src_leaf"], p["dst_leaf"]], p["flows"])
        yield broken


def _rule_budget(installed: dict, name, budget: int):
    """Flow entries per synchronised switch (``installed``: dpid -> its shadow tables; by
    owner: static, or of jobs; ``name(dpid)`` labels it) and the per-switch ``budget``."""
    per_switch = GaugeMetricFamily("mlroute_switch_flow_rules",
                                   "flow entries a switch holds, by owner (static or jobs)",
                                   labels=["switch", "owner"])
    for dpid, table in sorted(installed.items()):
        jobs = sum(1 for r in table.rules.values() if r.cookie != COOKIE_STATIC)
        per_switch.add_metric([name(dpid), "static"], len(table.rules) - jobs)
        per_switch.add_metric([name(dpid), "jobs"], jobs)
    yield per_switch
    yield GaugeMetricFamily("mlroute_max_flow_rules",
                            "flow entries a switch may hold (0: no budget)", value=budget)


def _forged(fabric, counters: dict) -> CounterMetricFamily:
    """Per leaf, the packets its host ports refused (``source_check``), from the counter of
    its drop entry (read with the port counters; 0 until read)."""
    out = CounterMetricFamily("mlroute_forged_packets", "packets a leaf dropped at its host "
                              "ports: IPv4 from an address not the port's host's (or MPLS)",
                              labels=["switch"])
    for leaf in sorted(fabric.tier_of if fabric else ()):
        if fabric.tier_of[leaf] == 0 and leaf in fabric.dpids:
            got = counters.get(forged_drop(fabric.dpids[leaf]).key)
            out.add_metric([leaf], got[1] if got else 0)
    return out


def _discovery(finder):
    """The topology guard's events (every frame counted, kinds at 0 too), the frames
    discovery sent, and the link speed assumed with where it came from."""
    events = CounterMetricFamily("mlroute_security_events",
                                 "LLDP probes and address claims refused by the topology "
                                 "guard, and addresses moved because their owner was gone",
                                 labels=["kind"])
    for kind, n in sorted(finder.guard.counts.items()):
        events.add_metric([kind], n)
    yield events
    frames = CounterMetricFamily("mlroute_discovery_frames",
                                 "frames discovery sent (LLDP probes, ARP probes and answers)",
                                 labels=["kind"])
    for kind, n in sorted(finder.sent.items()):
        frames.add_metric([kind], n)
    yield frames
    speed = finder.link_speed()
    gauge = GaugeMetricFamily("mlroute_link_speed_gbps", "link speed the fabric assumes, by "
                              "where it came from", labels=["source"])
    gauge.add_metric([speed["source"]], speed["gbps"])
    yield gauge


def exposition(service) -> tuple[bytes, str]:
    """The metrics page and its content type."""
    registry = CollectorRegistry(auto_describe=False)
    registry.register(ServiceCollector(service))
    return generate_latest(registry), CONTENT_TYPE_LATEST
