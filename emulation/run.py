"""Emulation runner: real ryu-manager with mlroute, a Mininet leaf-spine of Open vSwitch
switches, real TCP ring All-Reduce traffic, paths proved from switch counters.

    python -m emulation.run --spines 4 --leaves 8 --hosts-per-leaf 2 --bw 10 \\
        --algorithm greedy --mode sr --jobs FILE [--compare ecmp] [--iterations 3] [--out DIR]

Starts Open vSwitch if needed, the controller (a subprocess stopped by its PID) and the fabric,
pushes the jobs over REST (planner jobs format, hosts named h<leaf>_<k>), runs every job's
rings at once with one agent per rank, reads the ingress rules' and ports' counters, deletes the
jobs, and repeats for each algorithm. Always cleans up. Writes ``summary.json`` and
``summary.png`` to the output folder and prints the summary table.

Every link is shaped (HTB) to ``--bw`` Mbit/s, so the ideal is the shaped line rate; keep the
total offered load (flows x bw) well below what the userspace switch forwards (section 6 of
environment.md): the summary's ``goodput_over_bw`` for a collision-free routing shows whether
the switch CPU kept up (near 0.95 when it does: TCP/IP headers take the rest).
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time

from controller.jsonio import read_json
from controller.errors import InputError
from controller.fabric import Fabric
from controller.jobs import parse_jobs
from controller.openflow import job_cookie
from emulation import ovs
from emulation.controller_proc import REPO
from emulation.session import Session
from topologies.clos import clos_fabric

PORT_BASE_DST, PORT_BASE_SRC = 5000, 6000


def prepare_jobs(doc: dict, fabric: Fabric) -> list[dict]:
    """Jobs with a fixed TCP 5-tuple per job (dport 5000+k, sport 6000+k unless given); only
    ring All-Reduce jobs are run by the agents."""
    jobs = parse_jobs(doc, fabric)  # validates
    out = []
    for k, (raw, job) in enumerate(zip(doc["jobs"], jobs)):
        if not job.is_collective:
            raise InputError(f"job {job.id}: the emulation runs ring All-Reduce jobs only")
        hosts = [h for r in job.rings for h in r]
        if len(hosts) != len(set(hosts)):
            raise InputError(f"job {job.id}: a host is in two rings of the job")
        raw = dict(raw)
        raw.setdefault("proto", "tcp")
        if raw["proto"] not in ("tcp", 6):
            raise InputError(f"job {job.id}: the agents use TCP")
        raw.setdefault("dport", PORT_BASE_DST + k)
        raw.setdefault("sport", PORT_BASE_SRC + k)
        raw.pop("algorithm", None)
        raw.pop("mode", None)
        out.append(raw)
    return out


def _rings(job: dict) -> list[list[str]]:
    return job["rings"] if "rings" in job else [job["ranks"]]


def run_round(net, ctl, fabric: Fabric, jobs: list[dict], algorithm: str,
              mode: str, iterations: int, workdir: str) -> dict:
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
        before = {sw: ovs.port_bytes(sw) for sw in fabric.leaves + fabric.spines}
        results = _run_traffic(net, fabric, jobs, views, iterations, workdir, algorithm)
        ovs.settle_counters(fabric.leaves)
        after = {sw: ovs.port_bytes(sw) for sw in fabric.leaves + fabric.spines}
        verified, total, checks = _verify_paths(fabric, jobs, views, iterations)
        link_bytes = _link_bytes(fabric, before, after)
        out_jobs = {}
        for job in jobs:
            measured = results[job["id"]]
            v = views[job["id"]]
            mean = sum(measured) / len(measured)
            out_jobs[job["id"]] = {"allreduce_s": measured, "ideal_s": v["ideal_s"],
                                   "predicted_s": v["predicted_allreduce_s"],
                                   "measured_over_ideal": mean / v["ideal_s"],
                                   "measured_over_predicted": mean / v["predicted_allreduce_s"]}
        ups = [b for name, b in link_bytes.items() if name.startswith("l")]
        return {"algorithm": algorithm, "mode": mode, "jobs": out_jobs,
                "max_link_load": links["summary"]["max_link_load"],
                "paths_verified": verified, "paths_total": total, "path_checks": checks,
                "install_s": round(install_s, 3), "link_bytes": link_bytes,
                "uplink_bytes_max_over_mean": max(ups) / (sum(ups) / len(ups)) if sum(ups) else 0}
    finally:
        for jid in posted:
            ctl.rest("DELETE", f"/v1/jobs/{jid}")


def _run_traffic(net, fabric, jobs, views, iterations, workdir, tag) -> dict[str, list[float]]:
    procs = []
    start_at = time.time() + 3.0
    longest = 0.0
    for job in jobs:
        routes = views[job["id"]]["routes"]
        longest = max(longest, views[job["id"]]["predicted_allreduce_s"])
        offset = 0
        for r, ranks in enumerate(_rings(job)):
            n = len(ranks)
            chunk = int(job["bytes"] / n)
            ring_routes = routes[offset:offset + n]
            offset += n
            for i, host in enumerate(ranks):
                out_route, in_route = ring_routes[i], ring_routes[(i - 1) % n]
                parts = ([(p["sport"], p["share"]) for p in out_route["split"]]
                         if "split" in out_route else [(job["sport"], 1.0)])
                recv = ([p["share"] for p in in_route["split"]] if "split" in in_route else [1.0])
                out = os.path.join(workdir, f"{tag}-{job['id']}-r{r}-{i}.json")
                cmd = [sys.executable, "-m", "emulation.agents", "ring",
                       "--listen-port", str(job["dport"]),
                       "--next-ip", fabric.host_ip[ranks[(i + 1) % n]],
                       "--dport", str(job["dport"]),
                       "--parts", ",".join(f"{s}:{sh!r}" for s, sh in parts),
                       "--recv-parts", ",".join(repr(x) for x in recv),
                       "--chunk", str(chunk), "--steps", str(2 * (n - 1)),
                       "--iterations", str(iterations),
                       "--compute-s", str(job.get("compute_s", 0)),
                       "--start-at", repr(start_at), "--out", out,
                       "--barrier", os.path.join(workdir, f"{tag}-{job['id']}-r{r}.sock"),
                       "--rank", str(i), "--size", str(n)]
                procs.append((job["id"], r, out, net.get(host).popen(cmd, cwd=REPO)))
    timeout = 3.0 + 60.0 + 4 * iterations * longest
    deadline = time.monotonic() + timeout
    for *_, p in procs:
        try:
            p.wait(timeout=max(0.1, deadline - time.monotonic()))
        except Exception:  # noqa: BLE001 - subprocess.TimeoutExpired; kill everything below
            pass
    stuck = [p for *_, p in procs if p.poll() is None]
    for p in stuck:
        p.kill()
        p.wait(timeout=10)
    if stuck:
        raise TimeoutError(f"{len(stuck)} agents did not finish within {timeout:.0f} s")
    per_ring: dict[tuple, list] = {}
    for jid, r, out, p in procs:
        with open(out) as fh:
            res = json.load(fh)
        if "error" in res:
            raise RuntimeError(f"agent of job {jid} failed: {res['error']}")
        per_ring.setdefault((jid, r), []).append(res["iterations"])
    times: dict[str, list[float]] = {}
    for (jid, r), ranks in per_ring.items():
        ring_times = [max(rk[it]["end"] for rk in ranks) - min(rk[it]["start"] for rk in ranks)
                      for it in range(iterations)]
        old = times.get(jid)
        times[jid] = ring_times if old is None else [max(a, b) for a, b in zip(old, ring_times)]
    return times


def _verify_paths(fabric, jobs, views, iterations) -> tuple[int, int, list]:
    """A flow is verified when the ingress-leaf rule that sends it to its planned spine counted
    at least its payload bytes (each part of a split flow on its own rule)."""
    verified, total, checks = 0, 0, []
    for job in jobs:
        number = views[job["id"]]["number"]
        entries_by_leaf = {}
        for route in views[job["id"]]["routes"]:
            leaf = fabric.hosts[route["src"]]
            if leaf not in entries_by_leaf:
                entries_by_leaf[leaf] = ovs.dump_flows(leaf, job_cookie(number))
            n = len(next(r for r in _rings(job) if route["src"] in r))
            flow_bytes = job["bytes"] / n * 2 * (n - 1) * iterations
            parts = (route["split"] if "split" in route
                     else [{"spine": route["spine"], "share": 1.0, "sport": job["sport"]}])
            for part in parts:
                total += 1
                entry = _find_entry(entries_by_leaf[leaf], fabric, route, part["sport"])
                port = fabric.port(leaf, part["spine"])
                ok = (entry is not None and entry["n_bytes"] >= part["share"] * flow_bytes
                      and entry["actions"].endswith(f"output:{port}"))
                verified += ok
                checks.append({"src": route["src"], "dst": route["dst"], "spine": part["spine"],
                               "rule_bytes": entry["n_bytes"] if entry else None,
                               "payload_bytes": part["share"] * flow_bytes, "ok": bool(ok)})
    return verified, total, checks


def _find_entry(entries, fabric, route, sport):
    src, dst = fabric.host_ip[route["src"]], fabric.host_ip[route["dst"]]
    for e in entries:
        m = e["match"]
        if m.get("nw_src") == src and m.get("nw_dst") == dst and \
                int(m.get("tp_src", m.get("tcp_src", 0))) == sport:
            return e
    return None


def _link_bytes(fabric, before, after) -> dict[str, int]:
    """Bytes sent on every directed leaf-spine link during the round (port tx counters)."""
    out = {}
    for leaf in fabric.leaves:
        for spine in fabric.spines:
            p = fabric.port(leaf, spine)
            out[f"{leaf}->{spine}"] = after[leaf][p]["tx"] - before[leaf][p]["tx"]
            q = fabric.port(spine, leaf)
            out[f"{spine}->{leaf}"] = after[spine][q]["tx"] - before[spine][q]["tx"]
    return out


def emulate(spines, leaves, hosts_per_leaf, bw, jobs_doc, algorithms, mode, iterations,
            outdir, ping=True) -> dict:
    fabric = clos_fabric(spines, leaves, hosts_per_leaf, bw)
    jobs = prepare_jobs(jobs_doc, fabric)
    os.makedirs(outdir, exist_ok=True)
    workdir = tempfile.mkdtemp(prefix="agents-", dir=outdir)
    with Session(spines, leaves, hosts_per_leaf, bw, outdir, mode) as s:
        loss = s.net.pingAll(timeout=1) if ping else None
        rounds = [run_round(s.net, s.ctl, s.fabric, jobs, alg, mode, iterations, workdir)
                  for alg in algorithms]
    summary = {"fabric": {"spines": spines, "leaves": leaves, "hosts_per_leaf": hosts_per_leaf,
                          "bw_mbps": bw}, "iterations": iterations, "pingall_loss_pct": loss,
               "rounds": rounds}
    with open(os.path.join(outdir, "summary.json"), "w") as fh:
        json.dump(summary, fh, indent=1)
    from emulation.plots import emulation_plot
    emulation_plot(summary, os.path.join(outdir, "summary.png"))
    return summary


def format_summary(summary: dict) -> str:
    lines = [f"{'routing':<10} {'job':<10} {'measured s':>10} {'ideal s':>8} {'predicted s':>11} "
             f"{'meas/ideal':>10} {'meas/pred':>9} {'max load':>8} {'paths ok':>9}"]
    for r in summary["rounds"]:
        for jid, j in r["jobs"].items():
            mean = sum(j["allreduce_s"]) / len(j["allreduce_s"])
            lines.append(f"{r['algorithm']:<10} {jid:<10} {mean:>10.3f} {j['ideal_s']:>8.3f} "
                         f"{j['predicted_s']:>11.3f} {j['measured_over_ideal']:>10.2f} "
                         f"{j['measured_over_predicted']:>9.2f} {r['max_link_load']:>8g} "
                         f"{r['paths_verified']:>4}/{r['paths_total']:<4}")
    return "\n".join(lines)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m emulation.run", description=__doc__.split("\n")[0])
    ap.add_argument("--spines", type=int, default=4)
    ap.add_argument("--leaves", type=int, default=8)
    ap.add_argument("--hosts-per-leaf", type=int, default=2)
    ap.add_argument("--bw", type=float, default=10.0, help="Mbit/s on every link")
    ap.add_argument("--algorithm", default="greedy")
    ap.add_argument("--compare", default="", help="more algorithms to run first, e.g. ecmp")
    ap.add_argument("--mode", default="flow", choices=["flow", "sr"])
    ap.add_argument("--jobs", required=True)
    ap.add_argument("--iterations", type=int, default=3)
    ap.add_argument("--out", default=os.path.join("results", "emulation"))
    ap.add_argument("--no-ping", action="store_true")
    args = ap.parse_args(argv)
    algorithms = [a for a in args.compare.split(",") if a] + [args.algorithm]
    try:
        summary = emulate(args.spines, args.leaves, args.hosts_per_leaf, args.bw,
                          read_json(args.jobs, "jobs"), algorithms, args.mode, args.iterations,
                          args.out, ping=not args.no_ping)
    except InputError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    print(format_summary(summary))
    return 0


if __name__ == "__main__":
    sys.exit(main())
