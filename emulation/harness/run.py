"""The emulation runner as a library: ``emulate`` starts the controller and a Mininet
leaf-spine of Open vSwitch switches (``session.Session``), pushes the jobs over REST (planner jobs
format, hosts named h<leaf>_<k>), runs every job at once with one traffic agent per host and job,
reads the ingress rules' and ports' counters to prove the paths, deletes the jobs, repeats for
each algorithm, and writes ``summary.json`` and ``summary.png``. Its steps (``prepare_jobs``,
``run_round``, ``run_traffic``) are what tests and benchmarks call inside a session of their own.
The command is ``python -m emulation.run`` (``emulation/run.py``).

Transports: ``roce`` (``emulation/harness/roce.py``: UDP to 4791 with an InfiniBand BTH, RC-like
go-back-N; ring All-Reduce and explicit-flow jobs) and ``tcp`` (``emulation/harness/agents.py``: ring
All-Reduce only). ``auto`` (the default) picks RoCE for explicit-flow jobs, for jobs whose
flows are UDP 4791 and for every job in ``--mode host``; TCP for the other ring jobs.

Every link is shaped (HTB) to ``--bw`` Mbit/s, so the ideal is the shaped line rate; keep the
total offered load (flows x bw) well below what the userspace switch forwards (section 6 of
environment.md): the summary's ``goodput_over_bw`` for a collision-free routing shows whether
the switch CPU kept up (near 0.95 when it does: TCP/IP headers take the rest).
"""
from __future__ import annotations

import json
import os
import socket
import struct
import subprocess
import sys
import tempfile
import time

from controller.enforcement.modes import MODES as ENFORCEMENT_MODES
from controller.enforcement.openflow import job_cookie
from controller.errors import InputError
from controller.model.clos import Clos
from controller.model.jobs import parse_jobs
from emulation.harness import fabricnet, ovs
from emulation.harness.agents import _split_bytes, unix_listener
from emulation.harness.controller_proc import REPO
from emulation.harness.fabricnet import SWITCH_SNDBUF, ensure_switch_send_buffer, switch_send_buffer
from emulation.harness.roce import ROCE_PORT
from emulation.harness.session import Session
from topologies.clos import clos_fabric

PORT_BASE_DST, PORT_BASE_SRC = 5000, 6000
ROCE_SPORT_BASE = 49152  # RoCEv2 source ports are taken from the dynamic range
TRANSPORTS = ("auto", "roce", "tcp")
MODES = tuple(ENFORCEMENT_MODES)
QPN_BASE = 0x100


def _is_roce(proto, dport) -> bool:
    return proto in ("udp", 17) and dport == ROCE_PORT


def prepare_jobs(doc: dict, fabric: Clos, transport: str = "auto", mode: str = "flow"
                 ) -> list[dict]:
    """Jobs with a fixed 5-tuple per flow, as the agents will send them.

    TCP ring jobs get dport 5000+k and sport 6000+k (k: the job's position) unless given.
    RoCE jobs (see the module docstring for when) are UDP to 4791 with source port 49152+k for
    a ring, and for explicit flows 49152 + the flow's position among all explicit flows of the
    run, unless given. A job whose protocol or ports the chosen transport cannot send is an
    error that names it."""
    if transport not in TRANSPORTS:
        raise InputError(f"transport must be one of {', '.join(TRANSPORTS)}")
    jobs = parse_jobs(doc, fabric)  # validates
    out, explicit_sport = [], ROCE_SPORT_BASE
    for k, (raw, job) in enumerate(zip(doc["jobs"], jobs)):
        raw = dict(raw)
        raw.pop("algorithm", None)
        raw.pop("mode", None)
        if not job.is_collective:
            if transport == "tcp":
                raise InputError(f"job {job.id}: explicit-flow jobs are driven by the RoCE agents "
                                 "only (--transport roce)")
            flows = []
            for i, f in enumerate(raw["flows"]):
                f = dict(f)
                f.setdefault("proto", "udp")
                f.setdefault("dport", ROCE_PORT)
                if not _is_roce(f["proto"], f["dport"]):
                    raise InputError(f"job {job.id}: flow {i} is not UDP to port {ROCE_PORT}; "
                                     "the RoCE agents send RoCEv2")
                if not f.get("sport"):
                    f["sport"] = explicit_sport
                    explicit_sport += 1
                flows.append(f)
            raw["flows"] = flows
            out.append(raw)
            continue
        hosts = [h for r in job.rings for h in r]
        if len(hosts) != len(set(hosts)):
            raise InputError(f"job {job.id}: a host is in two rings of the job")
        if raw.get("proto") is not None:
            roce = raw["proto"] in ("udp", 17)  # TCP agents cannot send UDP: refused below
        else:
            roce = transport == "roce" or (transport == "auto" and mode == "host")
        if transport == "tcp" and roce:
            raise InputError(f"job {job.id}: UDP flows need --transport roce")
        if roce:
            raw.setdefault("proto", "udp")
            raw.setdefault("dport", ROCE_PORT)
            if not _is_roce(raw["proto"], raw["dport"]):
                raise InputError(f"job {job.id}: the RoCE agents send UDP to port {ROCE_PORT}")
            raw.setdefault("sport", ROCE_SPORT_BASE + k)
        else:
            raw.setdefault("proto", "tcp")
            if raw["proto"] not in ("tcp", 6):
                raise InputError(f"job {job.id}: the agents send TCP or RoCEv2 (UDP 4791)")
            if transport == "roce":
                raise InputError(f"job {job.id}: a TCP job cannot run over --transport roce")
            raw.setdefault("dport", PORT_BASE_DST + k)
            raw.setdefault("sport", PORT_BASE_SRC + k)
        out.append(raw)
    return out


def job_transport(job: dict) -> str:
    """The agents a prepared job needs: ``roce`` or ``tcp``."""
    if "flows" in job or job.get("proto") in ("udp", 17):
        return "roce"
    return "tcp"


def _rings(job: dict) -> list[list[str]]:
    return job["rings"] if "rings" in job else [job["ranks"]]


def route_parts(route: dict, default_sport: int = 0) -> list[tuple]:
    """(spine, share, source port) of each part of a route; one part for an unsplit flow."""
    if "split" in route:
        return [(p["spine"], p["share"], p.get("sport", default_sport)) for p in route["split"]]
    return [(route["spine"], 1.0, route.get("sport", default_sport))]


def route_payloads(job: dict, iterations: int) -> list[float]:
    """Payload bytes each route of a prepared job carries over ``iterations`` (routes in the
    routes format order: ring by ring, rank order; or the explicit flows in order)."""
    if "flows" in job:
        return [f["bytes"] * iterations for f in job["flows"]]
    return [job["bytes"] / len(ring) * 2 * (len(ring) - 1) * iterations
            for ring in _rings(job) for _ in ring]


def run_round(net, ctl, fabric: Clos, jobs: list[dict], algorithm: str,
              mode: str, iterations: int, workdir: str, roce_opts: dict | None = None) -> dict:
    posted = []
    try:
        t0 = time.perf_counter()
        for job in jobs:
            status, doc = ctl.rest("POST", "/v1/jobs", {**job, "algorithm": algorithm, "mode": mode})
            if status != 201:
                raise RuntimeError(f"POST job {job['id']}: {status} {doc.get('error')}")
            posted.append(job["id"])
        install_s = time.perf_counter() - t0
        views = {j["id"]: ctl.rest("GET", f"/v1/jobs/{j['id']}")[1] for j in jobs}
        links = ctl.rest("GET", "/v1/links")[1]
        before = {sw: ovs.port_bytes(sw) for sw in fabric.switches()}
        results, flows = run_traffic(net, fabric, jobs, views, iterations, workdir, algorithm,
                                     roce_opts)
        ovs.settle_counters(fabric.leaves)
        after = {sw: ovs.port_bytes(sw) for sw in fabric.switches()}
        link_bytes = _link_bytes(fabric, before, after)
        job_rules = _job_rules(fabric, views)
        if job_rules:
            verified, total, checks = _verify_paths(fabric, jobs, views, iterations)
            method = "ingress rule counters"
        else:  # host mode: no per-flow rules to read, only the links
            verified, total, checks = _verify_links(fabric, jobs, views, iterations, link_bytes)
            method = "link counters"
        out_jobs = {}
        for job in jobs:
            measured = results[job["id"]]
            v = views[job["id"]]
            mean = sum(measured) / len(measured)
            out_jobs[job["id"]] = {"transport": job_transport(job), "allreduce_s": measured,
                                   "ideal_s": v["ideal_s"],
                                   "predicted_s": v["predicted_allreduce_s"],
                                   "measured_over_ideal": mean / v["ideal_s"],
                                   "measured_over_predicted": mean / v["predicted_allreduce_s"]}
        ups = [b for name, b in link_bytes.items() if name.startswith("l")]
        return {"algorithm": algorithm, "mode": mode, "jobs": out_jobs,
                "max_link_load": links["summary"]["max_link_load"],
                "paths_verified": verified, "paths_total": total, "paths_method": method,
                "path_checks": checks, "job_rules": job_rules,
                "install_s": round(install_s, 3), "link_bytes": link_bytes,
                "uplink_bytes_max_over_mean": max(ups) / (sum(ups) / len(ups)) if sum(ups) else 0,
                "flows": flows, "packets": _packet_totals(flows)}
    finally:
        for jid in posted:
            ctl.rest("DELETE", f"/v1/jobs/{jid}")


class AgentGroup:
    """The agent processes of one round. Mininet starts them in their own sessions (``mnexec
    -d``), so Ctrl-C on the runner does not reach them: they are killed here by PID whatever
    ends the round (normal exit, error, KeyboardInterrupt)."""

    def __init__(self, workdir: str):
        self.workdir = workdir
        self.procs: list[subprocess.Popen] = []
        self._logs = []

    def start(self, host, cmd: list[str], name: str) -> subprocess.Popen:
        log = open(os.path.join(self.workdir, name + ".log"), "w")
        self._logs.append(log)
        p = host.popen(cmd, cwd=REPO, stdout=log, stderr=subprocess.STDOUT)
        self.procs.append(p)
        return p

    def wait(self, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        for p in self.procs:
            try:
                p.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                pass
        stuck = [p for p in self.procs if p.poll() is None]
        if stuck:
            raise TimeoutError(f"{len(stuck)} agents did not finish within {timeout:.0f} s")

    def exited(self) -> list[str]:
        """Names of the agents that have already exited."""
        return [os.path.basename(log.name)[:-4] for p, log in zip(self.procs, self._logs)
                if p.poll() is not None]

    def stop(self) -> None:
        for p in self.procs:
            if p.poll() is None:
                p.kill()
        for p in self.procs:
            try:
                p.wait(timeout=10)
            except subprocess.TimeoutExpired:
                pass
        for log in self._logs:
            log.close()
        self._logs = []

    def __enter__(self) -> AgentGroup:
        return self

    def __exit__(self, *exc) -> None:
        self.stop()


def _agent_error(workdir: str, name: str) -> str:
    """What an agent that stopped wrote: the error of its result file, else where its log is."""
    try:
        with open(os.path.join(workdir, name + ".json")) as fh:
            return json.load(fh)["error"]
    except (OSError, ValueError, KeyError):
        return f"see {os.path.join(workdir, name + '.log')}"


class StartGate:
    """The Unix socket where a round's agents report that they are connected
    (``agents.await_start``); once all have, each gets the same start time, ``lead`` s ahead.
    The agents run in the hosts' network namespaces but share the file system."""

    def __init__(self, path: str, lead: float = 0.1):
        self.path, self.lead = path, lead
        self.server = unix_listener(path, 128)
        self.server.settimeout(0.2)
        self.ready: list[socket.socket] = []

    def open(self, agents: AgentGroup, timeout: float) -> float:
        """Wait (bounded) for every agent of ``agents`` to report, then send them the start
        time and return it. An agent that exits first, or a timeout, raises: the round
        cannot start."""
        deadline = time.monotonic() + timeout
        while len(self.ready) < len(agents.procs):
            try:
                conn, _ = self.server.accept()
            except TimeoutError:
                gone = agents.exited()
                if gone:
                    raise RuntimeError(f"agent {gone[0]} exited before the start: "
                                       f"{_agent_error(os.path.dirname(self.path), gone[0])}"
                                       ) from None
                if time.monotonic() > deadline:
                    raise TimeoutError(f"{len(agents.procs) - len(self.ready)} agents did not "
                                       f"connect within {timeout:.0f} s") from None
                continue
            conn.settimeout(5.0)
            if conn.recv(1) == b"r":
                self.ready.append(conn)
            else:
                conn.close()
        start = time.time() + self.lead
        for conn in self.ready:
            conn.sendall(struct.pack("!d", start))
        return start

    def __enter__(self) -> StartGate:
        return self

    def __exit__(self, *exc) -> None:
        for conn in self.ready:
            conn.close()
        self.server.close()
        if os.path.exists(self.path):
            os.unlink(self.path)


def _run_traffic(net, fabric, jobs, views, iterations, workdir, tag) -> dict[str, list[float]]:
    """All-Reduce (or flow set) time per iteration for every job."""
    return run_traffic(net, fabric, jobs, views, iterations, workdir, tag)[0]


def run_traffic(net, fabric, jobs, views, iterations, workdir, tag, roce_opts=None
                ) -> tuple[dict[str, list[float]], list[dict]]:
    """Run every job's agents at once; returns per job the time of each iteration (last end
    minus first start over the agents of a ring, slowest ring of the job) and, for RoCE
    jobs, per-flow-part packet counters."""
    longest = max(views[j["id"]]["predicted_allreduce_s"] for j in jobs)
    groups: list[tuple] = []  # (job id, group, result file)
    qps: dict[int, dict] = {}
    with AgentGroup(workdir) as agents, StartGate(os.path.join(workdir, f"{tag}-start.sock")
                                                  ) as gate:
        for job in jobs:
            if job_transport(job) == "roce":
                _start_roce(agents, net, fabric, job, views[job["id"]]["routes"], iterations,
                            workdir, tag, gate.path, groups, qps, roce_opts or {})
            else:
                _start_tcp(agents, net, fabric, job, views[job["id"]]["routes"], iterations,
                           workdir, tag, gate.path, groups)
        gate.open(agents, timeout=60.0)
        agents.wait(60.0 + 4 * iterations * longest)
    per_group: dict[tuple, list] = {}
    sends, recvs = {}, {}
    for jid, g, out in groups:
        with open(out) as fh:
            res = json.load(fh)
        if "error" in res:
            raise RuntimeError(f"agent of job {jid} failed: {res['error']} (log: "
                               f"{out[:-5]}.log)")
        per_group.setdefault((jid, g), []).append(res["iterations"])
        sends.update({q["qpn"]: q for q in res.get("send", [])})
        recvs.update({q["qpn"]: q for q in res.get("recv", [])})
    times: dict[str, list[float]] = {}
    for (jid, g), ranks in per_group.items():
        group_times = [max(rk[it]["end"] for rk in ranks) - min(rk[it]["start"] for rk in ranks)
                       for it in range(iterations)]
        old = times.get(jid)
        times[jid] = group_times if old is None else [max(a, b) for a, b in zip(old, group_times)]
    return times, [_flow_counters(meta, sends.get(q, {}), recvs.get(q, {}))
                   for q, meta in sorted(qps.items())]


def _start_tcp(agents, net, fabric, job, routes, iterations, workdir, tag, gate, groups):
    offset = 0
    for r, ranks in enumerate(_rings(job)):
        n = len(ranks)
        chunk = int(job["bytes"] / n)
        ring_routes = routes[offset:offset + n]
        offset += n
        for i, host in enumerate(ranks):
            out_route, in_route = ring_routes[i], ring_routes[(i - 1) % n]
            parts = [(sport, share) for _, share, sport in route_parts(out_route, job["sport"])]
            recv = [share for _, share, _ in route_parts(in_route, job["sport"])]
            name = f"{tag}-{job['id']}-r{r}-{i}"
            out = os.path.join(workdir, name + ".json")
            cmd = [sys.executable, "-m", "emulation.harness.agents", "ring",
                   "--listen-port", str(job["dport"]),
                   "--next-ip", fabric.host_ip[ranks[(i + 1) % n]],
                   "--dport", str(job["dport"]),
                   "--parts", ",".join(f"{s}:{sh!r}" for s, sh in parts),
                   "--recv-parts", ",".join(repr(x) for x in recv),
                   "--chunk", str(chunk), "--steps", str(2 * (n - 1)),
                   "--iterations", str(iterations),
                   "--compute-s", str(job.get("compute_s", 0)),
                   "--start-gate", gate, "--out", out,
                   "--barrier", os.path.join(workdir, f"{tag}-{job['id']}-r{r}.sock"),
                   "--rank", str(i), "--size", str(n)]
            agents.start(net.get(host), cmd, name)
            groups.append((job["id"], r, out))


def _start_roce(agents, net, fabric, job, routes, iterations, workdir, tag, gate, groups,
                qps, opts):
    """One RoCE agent per host of the job (per ring rank, or per host of its explicit flows),
    every flow part a queue pair with a QP number unique in the round."""
    parts_of = []  # per route: [(qpn, sport, share)]
    for ri, route in enumerate(routes):
        plist = []
        for pi, (spine, share, sport) in enumerate(route_parts(route, job.get("sport", 0))):
            qpn = QPN_BASE + len(qps)
            qps[qpn] = {"job": job["id"], "src": route["src"], "dst": route["dst"],
                        "sport": sport, "spine": spine, "share": share, "qpn": qpn}
            plist.append((qpn, sport, share))
        parts_of.append(plist)
    common = {"iterations": iterations, "compute_s": job.get("compute_s", 0),
              "start_gate": gate, **opts}

    def qp_list(route_index, size, peer):
        shares = [share for _, _, share in parts_of[route_index]]
        return [{"qpn": qpn, "peer": peer, "sport": sport, "bytes": b}
                for (qpn, sport, _), b in zip(parts_of[route_index], _split_bytes(size, shares))]

    specs = []  # (host, group, spec)
    if "flows" in job:
        hosts = sorted({h for f in job["flows"] for h in (f["src"], f["dst"])})
        barrier = os.path.join(workdir, f"{tag}-{job['id']}.sock")
        for rank, host in enumerate(hosts):
            send = [q for fi, f in enumerate(job["flows"]) if f["src"] == host
                    for q in qp_list(fi, int(f["bytes"]), fabric.host_ip[f["dst"]])]
            recv = [q for fi, f in enumerate(job["flows"]) if f["dst"] == host
                    for q in qp_list(fi, int(f["bytes"]), fabric.host_ip[f["src"]])]
            specs.append((host, 0, {"ip": fabric.host_ip[host], "send": send, "recv": recv,
                                    "steps": 1, "barrier": barrier, "rank": rank,
                                    "size": len(hosts), **common}))
    else:
        offset = 0
        for r, ranks in enumerate(_rings(job)):
            n = len(ranks)
            chunk = int(job["bytes"] / n)
            for i, host in enumerate(ranks):
                succ, pred = ranks[(i + 1) % n], ranks[(i - 1) % n]
                specs.append((host, r, {
                    "ip": fabric.host_ip[host],
                    "send": qp_list(offset + i, chunk, fabric.host_ip[succ]),
                    "recv": qp_list(offset + (i - 1) % n, chunk, fabric.host_ip[pred]),
                    "steps": 2 * (n - 1), "rank": i, "size": n,
                    "barrier": os.path.join(workdir, f"{tag}-{job['id']}-r{r}.sock"), **common}))
            offset += n
    for host, g, spec in specs:
        name = f"{tag}-{job['id']}-g{g}-{host}"
        spec_path = os.path.join(workdir, name + ".spec.json")
        out = os.path.join(workdir, name + ".json")
        with open(spec_path, "w") as fh:
            json.dump(spec, fh)
        agents.start(net.get(host), [sys.executable, "-m", "emulation.harness.roce", "--spec", spec_path,
                                     "--out", out], name)
        groups.append((job["id"], g, out))


def _flow_counters(meta: dict, send: dict, recv: dict) -> dict:
    """One queue pair's counters from both ends: ``lost`` is what the requester sent and the
    responder never saw (network and receive-buffer drops), ``acks_lost`` the same for the
    acknowledgements."""
    sent, got = send.get("packets_sent", 0), recv.get("packets_received", 0)
    return {**meta, "packets_sent": sent, "retransmitted": send.get("retransmitted", 0),
            "received": got, "out_of_order": recv.get("out_of_order", 0),
            "duplicates": recv.get("duplicates", 0), "lost": sent - got,
            "naks": recv.get("naks_sent", 0), "timeouts": send.get("timeouts", 0),
            "acks_lost": recv.get("acks_sent", 0) + recv.get("naks_sent", 0)
            - send.get("acks_received", 0) - send.get("naks_received", 0),
            "srtt_ms": send.get("srtt_ms"), "bytes": recv.get("bytes", 0)}


def _packet_totals(flows: list[dict]) -> dict:
    keys = ("packets_sent", "retransmitted", "out_of_order", "lost", "timeouts", "naks")
    return {k: sum(f[k] for f in flows) for k in keys} if flows else {}


def _job_rules(fabric, views) -> int:
    """Flow entries the jobs own on all switches (cookie: top byte 2, the job's number)."""
    return sum(len(ovs.dump_flows(sw, job_cookie(v["number"])))
               for v in views.values() for sw in fabric.switches())


def _verify_paths(fabric, jobs, views, iterations) -> tuple[int, int, list]:
    """A flow is verified when the ingress-leaf rule that sends it to its planned spine counted
    at least its payload bytes (each part of a split flow on its own rule)."""
    verified, total, checks = 0, 0, []
    for job in jobs:
        number = views[job["id"]]["number"]
        entries_by_leaf = {}
        routes = views[job["id"]]["routes"]
        for route, flow_bytes in zip(routes, route_payloads(job, iterations)):
            leaf = fabric.hosts[route["src"]]
            if leaf not in entries_by_leaf:
                entries_by_leaf[leaf] = ovs.dump_flows(leaf, job_cookie(number))
            for spine, share, sport in route_parts(route, job.get("sport", 0)):
                if spine is None:
                    continue  # intra-leaf: no spine to prove
                total += 1
                entry = _find_entry(entries_by_leaf[leaf], fabric, route, sport)
                port = fabric.port(leaf, spine)
                ok = (entry is not None and entry["n_bytes"] >= share * flow_bytes
                      and entry["actions"].endswith(f"output:{port}"))
                verified += ok
                checks.append({"src": route["src"], "dst": route["dst"], "spine": spine,
                               "sport": sport, "rule_bytes": entry["n_bytes"] if entry else None,
                               "payload_bytes": share * flow_bytes, "ok": bool(ok)})
    return verified, total, checks


def _verify_links(fabric, jobs, views, iterations, link_bytes) -> tuple[int, int, list]:
    """Without per-flow rules (``host`` mode) only links can be read: a flow part counts as
    verified when its planned uplink and downlink each carried at least the payload of every
    part planned on them. Weaker than rule counters (a swap of two equal flows between the
    same links would pass), but a flow on another spine leaves its planned link short."""
    planned: dict[str, float] = {}
    parts = []
    for job in jobs:
        for route, flow_bytes in zip(views[job["id"]]["routes"], route_payloads(job, iterations)):
            for spine, share, sport in route_parts(route, job.get("sport", 0)):
                if spine is None:
                    continue
                up = f"{fabric.hosts[route['src']]}->{spine}"
                down = f"{spine}->{fabric.hosts[route['dst']]}"
                for link in (up, down):
                    planned[link] = planned.get(link, 0.0) + share * flow_bytes
                parts.append((route, spine, sport, share * flow_bytes, up, down))
    checks = []
    for route, spine, sport, payload, up, down in parts:
        ok = link_bytes[up] >= planned[up] and link_bytes[down] >= planned[down]
        checks.append({"src": route["src"], "dst": route["dst"], "spine": spine, "sport": sport,
                       "payload_bytes": payload, "uplink_bytes": link_bytes[up],
                       "uplink_planned": planned[up], "downlink_bytes": link_bytes[down],
                       "downlink_planned": planned[down], "ok": bool(ok)})
    return sum(c["ok"] for c in checks), len(checks), checks


def _find_entry(entries, fabric, route, sport):
    src, dst = fabric.host_ip[route["src"]], fabric.host_ip[route["dst"]]
    for e in entries:
        m = e["match"]
        port = m.get("tp_src", m.get("tcp_src", m.get("udp_src", 0)))
        if m.get("nw_src") == src and m.get("nw_dst") == dst and int(port) == sport:
            return e
    return None


def _link_bytes(fabric, before, after) -> dict[str, int]:
    """Bytes sent on every directed leaf-spine link during the round (port tx counters)."""
    out = {}
    for leaf in fabric.leaves:
        for spine in fabric.planes[0].aggs[0]:  # the leaf-spine's spines
            p = fabric.port(leaf, spine)
            out[f"{leaf}->{spine}"] = after[leaf][p]["tx"] - before[leaf][p]["tx"]
            q = fabric.port(spine, leaf)
            out[f"{spine}->{leaf}"] = after[spine][q]["tx"] - before[spine][q]["tx"]
    return out


def emulate(spines, leaves, hosts_per_leaf, bw, jobs_doc, algorithms, mode, iterations,
            outdir, ping=True, transport="auto", roce_opts=None, switch_sndbuf=SWITCH_SNDBUF,
            exact_sndbuf=False, ports=None) -> dict:
    """``ports``: the controller's (``session.Ports``; None: 8080, 6653, 6343)."""
    fabric = clos_fabric(spines, leaves, hosts_per_leaf, bw)
    jobs = prepare_jobs(jobs_doc, fabric, transport, mode)
    os.makedirs(outdir, exist_ok=True)
    workdir = tempfile.mkdtemp(prefix="agents-", dir=outdir)
    if switch_sndbuf and os.geteuid() == 0:
        sndbuf = ensure_switch_send_buffer(switch_sndbuf, exact=exact_sndbuf)
    else:
        sndbuf = {"before": switch_send_buffer(), "after": None}
    with Session(spines, leaves, hosts_per_leaf, bw, outdir, mode, ports=ports) as s:
        loss = fabricnet.pingall(s.net) if ping else None
        rounds = [run_round(s.net, s.ctl, s.fabric, jobs, alg, mode, iterations, workdir,
                            roce_opts)
                  for alg in algorithms]
    summary = {"fabric": {"spines": spines, "leaves": leaves, "hosts_per_leaf": hosts_per_leaf,
                          "bw_mbps": bw, "switch_send_buffer": sndbuf},
               "iterations": iterations, "pingall_loss_pct": loss,
               "rounds": rounds}
    with open(os.path.join(outdir, "summary.json"), "w") as fh:
        json.dump(summary, fh, indent=1)
    from emulation.harness.plots import emulation_plot
    emulation_plot(summary, os.path.join(outdir, "summary.png"))
    return summary


def format_summary(summary: dict) -> str:
    lines = [f"{'routing':<10} {'job':<10} {'transport':<9} {'measured s':>10} {'ideal s':>8} "
             f"{'predicted s':>11} {'meas/ideal':>10} {'meas/pred':>9} {'max load':>8} "
             f"{'paths ok':>9}"]
    for r in summary["rounds"]:
        for jid, j in r["jobs"].items():
            mean = sum(j["allreduce_s"]) / len(j["allreduce_s"])
            lines.append(f"{r['algorithm']:<10} {jid:<10} {j.get('transport', 'tcp'):<9} "
                         f"{mean:>10.3f} {j['ideal_s']:>8.3f} "
                         f"{j['predicted_s']:>11.3f} {j['measured_over_ideal']:>10.2f} "
                         f"{j['measured_over_predicted']:>9.2f} {r['max_link_load']:>8g} "
                         f"{r['paths_verified']:>4}/{r['paths_total']:<4}")
    for r in summary["rounds"]:
        if r.get("packets"):
            p = r["packets"]
            lines.append(f"{r['algorithm']}: RoCE packets sent {p['packets_sent']}, retransmitted "
                         f"{p['retransmitted']}, out of order {p['out_of_order']}, lost "
                         f"{p['lost']}, timeouts {p['timeouts']}; job rules on the switches "
                         f"{r['job_rules']}")
    return "\n".join(lines)
