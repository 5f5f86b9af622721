"""Offline planner commands: generate a fabric, plan jobs, compare every algorithm.

    python -m controller fabric --spines 4 --leaves 8 --hosts-per-leaf 2 [--failed-spines K]
                                [--planes P] [--bundle N]
    python -m controller fabric --fat-tree K [--hosts-per-leaf H] [--planes P]
    python -m controller fabric --host-table T [--aggs-per-pod A] [--cores-per-group C]
    python -m controller plan --fabric F --jobs J [--algorithm auto] [--objective jobs]
                              [--ilp-time-limit S] [--max-parts N] [--out R]
    python -m controller compare --fabric F --jobs J [--objective jobs] [--max-parts N]

and the commands of a running controller (REST, ``controller.client``):

    python -m controller job add (FILE | --members a,b,c --id J [--bytes B] [--no-learn])
                                 [--algorithm A] [--mode M] --url URL [--token T | --token-file F]
    python -m controller job delete J [J ...] | list | show J [--ports]

Bad input exits with status 2 and one line "error: ..." on stderr; a controller that refuses a
request or cannot be reached exits with status 1 and one line naming the problem.
"""
from __future__ import annotations

import argparse
import json
import os
import sys

from controller.client import Client, ControllerError, members_job, read_token
from controller.errors import InputError
from controller.jsonio import read_json, write_output
from controller.model.clos import Clos, load_fabric
from controller.model.fabric import Fabric
from controller.model.jobs import Job, parse_jobs
from controller.model.rates import max_min_rates
from controller.planners import ALGORITHMS
from controller.planners.plan import make_plan, planner_options


def load_inputs(fabric_path: str, jobs_path: str) -> tuple[Fabric | Clos, list[Job]]:
    """The fabric (``Fabric`` for a two-tier document of today, else ``Clos``) and the jobs."""
    fabric = load_fabric(read_json(fabric_path, "fabric"))
    jobs = parse_jobs(read_json(jobs_path, "jobs"), fabric)
    return fabric, jobs


def make_fabric(args) -> Fabric | Clos:
    """The fabric the ``fabric`` command's options describe."""
    if args.host_table is not None:
        from controller.model.hosttable import Shape, load
        shape = Shape(**{k: v for k, v in (("aggs_per_pod", args.aggs_per_pod),
                                           ("cores_per_group", args.cores_per_group))
                         if v is not None})
        try:
            return load(args.host_table, shape)
        except OSError as e:
            raise InputError(f"host table {args.host_table}: {e.strerror}") from None
    if args.fat_tree is not None:
        if args.spines is not None or args.leaves is not None or args.failed_spines:
            raise InputError("--fat-tree K fixes the switches: drop --spines, --leaves and "
                             "--failed-spines")
        return Clos.fat_tree(args.fat_tree, args.hosts_per_leaf, args.gbps, args.planes)
    spines = 4 if args.spines is None else args.spines
    leaves = 8 if args.leaves is None else args.leaves
    hpl = 2 if args.hosts_per_leaf is None else args.hosts_per_leaf
    if args.planes > 1 or args.bundle > 1:
        if args.failed_spines:
            raise InputError("--failed-spines applies to single-plane fabrics without bundles")
        return Clos.leaf_spine(spines, leaves, hpl, args.gbps, args.planes, args.bundle)
    return Fabric.generate(spines, leaves, hpl, args.gbps, args.failed_spines)


def fabric_line(fabric: Fabric | Clos, failed: int) -> str:
    if isinstance(fabric, Clos):
        return fabric.summary()
    return (f"{len(fabric.spines)} spines, {len(fabric.leaves)} leaves, {len(fabric.hosts)} hosts"
            + (f" ({failed} spines failed)" if failed else ""))


def slowest_rate_gbps(plan) -> float:
    """Smallest max-min rate when the first step of every job starts at once, in Gb/s."""
    import numpy as np

    from controller.model.links import LinkIndex
    links = LinkIndex(plan.problem.fabric)
    paths = []
    for f, parts in zip(plan.problem.flows, plan.parts_by_flow()):
        for s, _ in (parts or ((None, 1.0),)):
            paths.append(links.path(f.src, f.dst, s))
    if not paths:
        return 0.0
    rates = max_min_rates(paths, np.full(links.count, plan.problem.fabric.link_bps()))
    return float(rates.min()) * 8 / 1e9


def compare(fabric: Fabric, jobs: list[Job], algorithms: list[str], seed: int, salt: int,
            ilp_time_limit: float, objective: str = "flows",
            max_parts: int | None = None) -> list[dict]:
    """One row per algorithm; ``objective`` applies to auto and split (the others count
    flows), ``max_parts`` to split."""
    from controller.model.fluid import predict_allreduce
    rows = []
    for alg in algorithms:
        opts = planner_options(alg, seed, salt, ilp_time_limit,
                               objective if alg in ("auto", "split") else "flows", max_parts)
        plan = make_plan(fabric, jobs, alg, **opts)
        doc = plan.to_dict()
        rows.append({"algorithm": alg, "max_link_load": doc["max_link_load"],
                     "links_at_max": doc["links_at_max"],
                     "slowest_gbps": slowest_rate_gbps(plan),
                     "allreduce_s": predict_allreduce(plan),
                     "runtime_ms": plan.runtime_ms, "info": doc.get("info", {})})
    return rows


def format_table(rows: list[dict], jobs: list[Job], link_bps: float) -> str:
    heads = ["algorithm", "max load", "at max", "slowest Gb/s"]
    heads += [f"{j.id} AR s" for j in jobs] + ["runtime ms"]
    lines = [heads, ["ideal", "", "", ""] + [f"{j.ideal_allreduce_s(link_bps):.4g}" for j in jobs]
             + [""]]
    for r in rows:
        lines.append([r["algorithm"], f"{r['max_link_load']:.4g}", str(r["links_at_max"]),
                      f"{r['slowest_gbps']:.4g}"]
                     + [f"{r['allreduce_s'][j.id]:.4g}" for j in jobs]
                     + [f"{r['runtime_ms']:.2f}"])
    widths = [max(len(l[i]) for l in lines) for i in range(len(heads))]
    return "\n".join("  ".join(c.rjust(w) if i else c.ljust(w) for i, (c, w) in
                               enumerate(zip(l, widths))) for l in lines)


def clos_command(args, fabric: Clos, jobs: list[Job]) -> str:
    """``plan`` or ``compare`` on a multi-plane, bundled or three-tier fabric."""
    from controller.planners.clos_plan import CLOS_ALGORITHMS, make_clos_plan
    if args.max_parts is not None or (args.objective != "flows" and (
            args.cmd != "plan" or args.algorithm != "auto")):
        raise InputError("on this fabric --objective jobs applies to plan with auto (it runs "
                         "the jobs planner) and --max-parts to single-plane two-tier fabrics")
    if args.cmd == "plan":
        alg = "jobs" if args.objective == "jobs" else args.algorithm
        return json.dumps(make_clos_plan(fabric, jobs, alg, args.salt).to_dict(), indent=1)
    algs = [a.strip() for a in args.algorithms.split(",") if a.strip()]
    if args.algorithms == ",".join(ALGORITHMS):
        algs = list(CLOS_ALGORITHMS)
    from controller.model.iteration import predict_clos_split_times
    rows = []
    for alg in algs:
        plan = make_clos_plan(fabric, jobs, alg, args.salt)
        doc = plan.to_dict()
        rows.append({"algorithm": alg}
                    | {k: doc[k] for k in ("max_link_load", "links_at_max", "lower_bound",
                                           "max_load_by_tier", "runtime_ms")}
                    | {"allreduce_s": predict_clos_split_times(plan.problem, plan.routing)})
    if args.json:
        return json.dumps(rows, indent=1)
    lines = [f"{fabric.summary()}; lower bound {rows[0]['lower_bound']:g} flows per link" if rows
             else fabric.summary()]
    for r in rows:
        tiers = ", ".join(f"{t} {v:g}" for t, v in r["max_load_by_tier"].items())
        times = " ".join(f"{j} {s:.4g} s" for j, s in r["allreduce_s"].items())
        lines.append(f"{r['algorithm']:<15} max load {r['max_link_load']:<5g} ({tiers}) at max "
                     f"{r['links_at_max']:<4} {times}  {r['runtime_ms']:.1f} ms")
    return "\n".join(lines)


def add_job_commands(sub) -> None:
    """``job add|delete|list|show``: the client side of the controller's /v1/jobs."""
    job = sub.add_parser("job", help="add, delete, list or show jobs of a running controller")
    jsub = job.add_subparsers(dest="job_cmd", required=True)
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--url", default=os.environ.get("MLROUTE_URL", "http://127.0.0.1:8080"),
                        help="controller REST URL, or several comma-separated (redundant "
                             "controllers); default $MLROUTE_URL or http://127.0.0.1:8080")
    common.add_argument("--token", help="write token (default $MLROUTE_TOKEN)")
    common.add_argument("--token-file", help="file whose first line is the write token "
                                             "(default $MLROUTE_TOKEN_FILE)")
    common.add_argument("--timeout", type=float, default=60.0, help="seconds per request")
    common.add_argument("--json", action="store_true", help="print the controller's JSON answer")
    add = jsub.add_parser("add", parents=[common], help="declare a job (POST /v1/jobs)")
    add.add_argument("file", nargs="?", help="a job document (JSON), or {\"jobs\": [...]}")
    add.add_argument("--members", help="comma-separated host names or IPv4 addresses: the job "
                                       "is declared by its members, the controller learns its "
                                       "traffic matrix")
    add.add_argument("--id", help="job id (with --members)")
    add.add_argument("--bytes", type=float, help="bytes per rank and step, a hint")
    add.add_argument("--no-learn", action="store_true",
                     help="keep the declared matrix (\"learn\": false)")
    add.add_argument("--algorithm", help="planner for this job (default: the controller's)")
    add.add_argument("--mode", help="flow, sr or host (default: the controller's)")
    delete = jsub.add_parser("delete", parents=[common], help="remove jobs (DELETE)")
    delete.add_argument("ids", nargs="+", metavar="ID")
    jsub.add_parser("list", parents=[common], help="running jobs, one line each")
    show = jsub.add_parser("show", parents=[common], help="one job: routes, matrix, bytes")
    show.add_argument("id", metavar="ID")
    show.add_argument("--ports", action="store_true",
                      help="print the job's connections file (host mode's source ports)")


def job_documents(args) -> list[dict]:
    """The job documents ``job add`` posts, from a file or from --members."""
    if args.file and args.members:
        raise InputError("give a job file or --members, not both")
    if args.members is not None:
        members = [m.strip() for m in args.members.split(",")]
        if not args.id:
            raise InputError("--members needs --id (the job's id)")
        if any(not m for m in members):
            raise InputError(f"--members {args.members!r}: an empty member name")
        if args.bytes is not None and not args.bytes > 0:
            raise InputError(f"--bytes must be positive, not {args.bytes:g}")
        docs = [members_job(args.id, members, args.bytes, False if args.no_learn else None)]
    elif args.file:
        doc = read_json(args.file, "job")
        docs = doc["jobs"] if isinstance(doc, dict) and isinstance(doc.get("jobs"), list) else [doc]
        if not all(isinstance(d, dict) for d in docs):
            raise InputError(f"job: {args.file} must hold a job object or {{\"jobs\": [...]}}")
        for opt in ("id", "bytes"):
            if getattr(args, opt) is not None:
                if len(docs) != 1:
                    raise InputError(f"--{opt} applies to a file with one job")
                docs[0][opt] = getattr(args, opt)
        if args.no_learn:
            docs = [dict(d, learn=False) for d in docs]
    else:
        raise InputError("job add needs a job file or --members a,b,... --id ID")
    for opt in ("algorithm", "mode"):
        if getattr(args, opt):
            docs = [dict(d, **{opt: getattr(args, opt)}) for d in docs]
    return docs


def job_table(jobs: list[dict]) -> str:
    heads = ["id", "algorithm", "mode", "flows", "unroutable", "matrix"]
    rows = [heads] + [[str(j.get("id")), str(j.get("algorithm", "")), str(j.get("mode", "")),
                       str(j.get("flows", "")), str(j.get("unroutable_flows", "")),
                       str(j.get("matrix", ""))] for j in jobs]
    widths = [max(len(r[i]) for r in rows) for i in range(len(heads))]
    return "\n".join("  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip() for r in rows)


def pending(answer) -> None:
    """A write answered 202 (redundant controllers, etcd lost during the request): say so."""
    op = answer.get("operation") if isinstance(answer, dict) else None
    if op:
        print(f"warning: {op.get('reason', 'not stored yet')} (operation {op.get('id')}: "
              f"{op.get('see', 'GET /v1/cluster')})", file=sys.stderr)


def run_job_command(args) -> int:
    try:
        if args.token and args.token_file:
            raise InputError("give --token or --token-file, not both")
        client = Client(args.url, token=read_token(args.token, args.token_file),
                        timeout=args.timeout)
        if args.job_cmd == "add":
            for doc in job_documents(args):
                view = client.add_job(doc)
                pending(view)
                print(json.dumps(view, indent=1) if args.json else
                      f"job {view.get('id', doc.get('id'))} added: "
                      f"{view.get('flows', len(view.get('routes', [])))} flows"
                      + (f", matrix {view['matrix']}" if view.get("matrix") else ""))
        elif args.job_cmd == "delete":
            for jid in args.ids:
                answer = client.delete_job(jid)
                pending(answer)
                print(json.dumps(answer, indent=1) if args.json else f"job {jid} deleted")
        elif args.job_cmd == "list":
            jobs = client.jobs().get("jobs", [])
            print(json.dumps(jobs, indent=1) if args.json else job_table(jobs))
        else:
            print(client.job_ports(args.id).rstrip("\n") if args.ports
                  else json.dumps(client.job(args.id), indent=1))
    except (InputError, ValueError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    except ControllerError as e:  # "POST URL: HTTP 409: ..." or "GET URL: controller unreachable"
        print(f"error: {' '.join(str(e).split())}", file=sys.stderr)
        return 1
    return 0


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m controller",
                                 description="mlroute planner and controller client")
    sub = ap.add_subparsers(dest="cmd", required=True)
    add_job_commands(sub)
    fab = sub.add_parser("fabric", help="write a regular leaf-spine fabric or fat-tree as JSON")
    fab.add_argument("--spines", type=int, help="spines per plane (default 4)")
    fab.add_argument("--leaves", type=int, help="leaves per plane (default 8)")
    fab.add_argument("--hosts-per-leaf", type=int,
                     help="hosts per leaf (default 2; k/2 on a fat-tree)")
    fab.add_argument("--gbps", type=float, default=100.0, help="link speed, every tier")
    fab.add_argument("--failed-spines", type=int, default=0, help="fail the K highest spine ids")
    fab.add_argument("--fat-tree", type=int, metavar="K",
                     help="a k-ary fat-tree: k pods of k/2 leaves and k/2 aggregation "
                          "switches, (k/2)^2 cores")
    fab.add_argument("--planes", type=int, default=1,
                     help="independent planes, every host one port into each")
    fab.add_argument("--bundle", type=int, default=1,
                     help="links between every leaf and spine (leaf-spine only)")
    fab.add_argument("--host-table", metavar="CSV",
                     help="a three-tier fabric from a host-location table (columns ip, DSW, "
                          "PSW, ASW: host, core group, pod, ToR), e.g. "
                          "data/traces/lingjun-topo.csv")
    fab.add_argument("--aggs-per-pod", type=int,
                     help="with --host-table: aggregation switches per pod (default 8)")
    fab.add_argument("--cores-per-group", type=int,
                     help="with --host-table: cores per group (default 4)")
    fab.add_argument("--out")
    for name in ("plan", "compare"):
        p = sub.add_parser(name)
        p.add_argument("--fabric", required=True)
        p.add_argument("--jobs", required=True)
        p.add_argument("--seed", type=int, default=1234, help="annealing seed")
        p.add_argument("--salt", type=int, default=0, help="ECMP hash salt")
        p.add_argument("--ilp-time-limit", type=float, default=60.0,
                       help="seconds for the ILP (auto: its last stage's budget, 0 skips it)")
        p.add_argument("--objective", default="flows",
                       help="auto's objective: flows (max-min link flow counts) or jobs "
                            "(worst job's predicted iteration slowdown)")
        p.add_argument("--max-parts", type=int, default=None,
                       help="split: at most N parts per flow (default 4; 0: no bound, the "
                            "fractional optimum)")
        p.add_argument("--out")
        if name == "plan":
            p.add_argument("--algorithm", default="auto", help=", ".join(ALGORITHMS))
        else:
            p.add_argument("--algorithms", default=",".join(ALGORITHMS))
            p.add_argument("--json", action="store_true", help="print JSON instead of a table")
    args = ap.parse_args(argv)
    if args.cmd == "job":
        return run_job_command(args)
    try:
        if args.cmd == "fabric":
            fabric = make_fabric(args)
            out = json.dumps(fabric.to_dict(), indent=1)
            if args.out:  # the file, and one line saying so (not the document again)
                write_output(out, args.out, echo=False)
                print(f"wrote {args.out}: {fabric_line(fabric, args.failed_spines)}")
                return 0
        else:
            from controller.planners.auto import OBJECTIVES
            if args.objective not in OBJECTIVES:
                raise InputError(f"unknown objective {args.objective!r} "
                                 f"(choose from {', '.join(OBJECTIVES)})")
            fabric, jobs = load_inputs(args.fabric, args.jobs)
            if isinstance(fabric, Clos):
                out = clos_command(args, fabric, jobs)
            elif args.cmd == "plan":
                plan = make_plan(fabric, jobs, args.algorithm,
                                 **planner_options(args.algorithm, args.seed, args.salt,
                                                   args.ilp_time_limit, args.objective,
                                                   args.max_parts))
                out = json.dumps(plan.to_dict(), indent=1)
            else:
                algs = [a.strip() for a in args.algorithms.split(",") if a.strip()]
                for a in algs:
                    if a not in ALGORITHMS:
                        raise InputError(f"unknown algorithm {a!r} (choose from {', '.join(ALGORITHMS)})")
                rows = compare(fabric, jobs, algs, args.seed, args.salt, args.ilp_time_limit,
                               args.objective, args.max_parts)
                out = (json.dumps(rows, indent=1) if args.json
                       else format_table(rows, jobs, fabric.link_bps()))
    except InputError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    write_output(out, args.out)
    return 0
