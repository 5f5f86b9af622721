"""Offline planner commands: generate a fabric, plan jobs, compare every algorithm.

    python -m controller fabric --spines 4 --leaves 8 --hosts-per-leaf 2 [--failed-spines K]
                                [--planes P] [--bundle N]
    python -m controller fabric --fat-tree K [--hosts-per-leaf H] [--planes P]
    python -m controller fabric --host-table T [--aggs-per-pod A] [--cores-per-group C]
    python -m controller fabric --cabling CABLES --hosts HOSTS (a real fabric, as cabled)
    python -m controller plan --fabric F --jobs J [--algorithm auto] [--objective flows|jobs]
                              [--ilp-time-limit S] [--max-parts N] [--out R]
    python -m controller compare --fabric F --jobs J [--algorithms a,b] [--objective flows|jobs]
                                 [--max-parts N] [--spray-penalty P] [--json] [--out R]
    python -m controller advise --fabric F --jobs J [--algorithm auto] [--json] [--out R]

and the commands of a running controller (REST, ``controller.client``):

    python -m controller job add (FILE | --members a,b,c --id J [--bytes B] [--no-learn])
                                 [--algorithm A] [--mode M] --url URL [--token T | --token-file F]
    python -m controller job delete J [J ...] | list | show J [--ports]

Defaults are the controller's (``service.settings.Settings``): ``plan`` runs its algorithm, and
without ``--objective`` each planner gets the objective the controller gives a job that names
none (``default_objective``), so offline and live agree; every plan and comparison says which
objective it used. With ``--out`` a command writes the file and prints one line saying so.
Bad input exits with status 2 and one line "error: ..." on stderr; a controller that refuses a
request or cannot be reached exits with status 1 and one line naming the problem.
"""
from __future__ import annotations

import argparse
import json
import os
import sys

from controller import __version__, advisecli, credentialcli, fabriccli, srv6cli
from controller.client import Client, ControllerError, members_job, read_token
from controller.errors import InputError
from controller.jobtext import job_text
from controller.jsonio import HelpFormatter, read_json, write_output
from controller.model.clos import Clos, load_fabric
from controller.model.jobs import Job, parse_jobs
from controller.model.rates import max_min_rates
from controller.planners import PLANNERS
from controller.planners.plan import make_plan, run_options, run_shape
from controller.planners.registry import CLOS, OBJECTIVES, TWO_TIER, listing, names, planner, runs_as
from controller.planners.spray import DEFAULT_PENALTY, slowest_goodput_bps, spray_plan, sprayed_jobs
from controller.service.settings import ILP_TIME_LIMIT_S, Settings

# what each objective ranks plans by (the names are registry.OBJECTIVES)
OBJECTIVE_HELP = {"flows": "max-min fair link flow counts, the paper's",
                  "jobs": "the jobs' predicted iteration slowdowns, worst then mean, then flow "
                          "counts"}
SPRAY = "spray"  # compare's baseline row (planners.spray): not a planner, the NICs spray
SPRAY_OBJECTIVE = "LP bound"


def default_objective(algorithm: str) -> str:
    """The objective the controller plans a job of ``algorithm`` with when the job names none,
    on every fabric: the one the name fixes (``jobs``); its default (``Settings.objective``)
    for auto (layer 1 on the request path, the jobs search off it); flows for the other
    planners (they count flows; the controller's split too).

    >>> default_objective("auto") == Settings.objective
    True
    >>> default_objective("greedy"), default_objective("jobs")
    ('flows', 'jobs')
    """
    fixed = PLANNERS[algorithm].objective if algorithm in PLANNERS else None
    return fixed or (Settings.objective if algorithm == "auto" else "flows")


def objective_for(algorithm: str, given: str | None) -> str:
    """The objective ``algorithm`` plans with in ``compare``, on every shape: ``--objective``
    for auto and split, else the controller's default (``default_objective``).

    >>> objective_for("auto", "flows"), objective_for("greedy", "jobs")
    ('flows', 'flows')
    >>> objective_for("jobs", "flows")
    'jobs'
    """
    if given is not None and algorithm in ("auto", "split"):
        return given
    return default_objective(algorithm)


def load_inputs(fabric_path: str, jobs_path: str) -> tuple[Clos, list[Job]]:
    """The fabric (a ``Clos``, whatever its shape: ``load_fabric``) and the jobs."""
    fabric = load_fabric(read_json(fabric_path, "fabric"))
    jobs = parse_jobs(read_json(jobs_path, "jobs"), fabric)
    return fabric, jobs


def slowest_rate_gbps(plan) -> float:
    """Smallest max-min rate when the first step of every job starts at once, in Gb/s: every
    part of every flow on its links (``Plan.parts_by_flow``, host links included)."""
    paths = [list(links) for parts in plan.parts_by_flow() for links, _ in parts or ()]
    if not paths:
        return 0.0
    rates = max_min_rates(paths, plan.problem.links.capacity_bps())
    return float(rates.min()) * 8 / 1e9


def compare(fabric: Clos, jobs: list[Job], algorithms: list[str] | None, seed: int, salt: int,
            ilp_time_limit: float, objective: str | None = None, max_parts: int | None = None,
            shape: str | None = None, spray_penalty: float = DEFAULT_PENALTY) -> list[dict]:
    """One row per algorithm (``compare_row``, named as asked) with the objective it planned
    with (``objective_for``); ``max_parts`` applies to split. Each planner configuration
    runs once (auto with objective jobs is the jobs planner: both rows share its plan);
    ``algorithms`` None: every name, then spray. An unknown name is refused first.
    ``spray``: the baseline row of ``planners.spray`` with its goodput penalty (All-Reduce by
    the shared prediction, slowest rate the coupled model's goodput)."""
    shape = shape or run_shape(fabric)
    sprayed_jobs([], spray_penalty)  # a bad penalty is refused before any planner runs
    for alg in algorithms or ():
        if alg != SPRAY:
            planner(alg)  # the registry's refusal of an unknown name
    rows, plans = [], {}
    for alg in algorithms or names() + [SPRAY]:
        if alg == SPRAY:
            plan = spray_plan(fabric, jobs, spray_penalty)
            rows.append(compare_row(plan, SPRAY_OBJECTIVE, CLOS, slowest_goodput_bps(plan) * 8e-9))
            continue
        run = run_options(fabric, alg, seed, salt, ilp_time_limit,
                          objective_for(alg, objective), max_parts)
        key = (runs_as(alg)[0], repr(sorted(run.options.items())))
        if key not in plans:  # deterministic: one run of a planner with one configuration
            plans[key] = make_plan(fabric, jobs, run.algorithm, **run.options)
        rows.append(compare_row(plans[key], run.objective, shape, name=alg))
    return rows


def compare_row(plan, objective: str, shape: str, slowest: float | None = None,
                name: str | None = None) -> dict:
    """A row of ``compare`` named ``name`` (default: the plan's algorithm), the same fields on
    every shape: the loads (max, links at the max, the lower bound, the max per tier), the
    slowest flow's max-min rate (``slowest`` if given, Gb/s) and each job's predicted
    All-Reduce time: on a single two-tier plane by the fluid model
    (``model.fluid.predict_allreduce``), elsewhere by the shared prediction on the plan's
    routes (``Plan.predicted_times``)."""
    doc = plan.to_dict()
    if shape == TWO_TIER:
        from controller.model.fluid import predict_allreduce
        times = predict_allreduce(plan)
    else:
        times = plan.predicted_times()
    return ({"algorithm": name or plan.algorithm, "objective": objective}
            | {k: doc[k] for k in ("max_link_load", "links_at_max", "lower_bound",
                                   "max_load_by_tier")}
            | {"slowest_gbps": slowest_rate_gbps(plan) if slowest is None else slowest,
               "allreduce_s": times,
               "runtime_ms": plan.runtime_ms, "info": doc.get("info", {})})


# compare's heads of a tier's max load: the links above the leaves, above the aggregation
TIER_HEADS = {"leaf": "leaf-agg", "core": "agg-core"}


def format_table(rows: list[dict], jobs: list[Job], fabric: Clos) -> str:
    """``compare``'s table, one form on every shape: a line naming the fabric, the head, the
    row ``ideal`` (the lower bound of the max link load, each job's time alone at line rate),
    one row per algorithm (its max link load, the max of each tier on fabrics of several
    tiers, links at the max, the slowest flow's rate, each job's predicted All-Reduce time and
    the planner's runtime), then what the objectives rank by."""
    tiers = list(rows[0]["max_load_by_tier"]) if rows else []
    tiers = tiers if len(tiers) > 1 else []
    heads = (["algorithm", "objective", "max load"] + [TIER_HEADS.get(t, t) for t in tiers]
             + ["at max", "slowest Gb/s"] + [f"{j.id} AR s" for j in jobs] + ["runtime ms"])
    bound = f"{rows[0]['lower_bound']:g}" if rows else ""
    link_bps = fabric.link_bps()
    lines = [heads, ["ideal", "", bound] + [""] * (len(tiers) + 2)
             + [f"{j.ideal_allreduce_s(link_bps):.4g}" for j in jobs] + [""]]
    lines += advisecli.bound_row(rows, jobs, len(tiers) + 4)
    for r in rows:
        lines.append([r["algorithm"], r["objective"], f"{r['max_link_load']:.4g}"]
                     + [f"{r['max_load_by_tier'].get(t, 0):.4g}" for t in tiers]
                     + [str(r["links_at_max"]), f"{r['slowest_gbps']:.4g}"]
                     + [f"{r['allreduce_s'][j.id]:.4g}" for j in jobs]
                     + [f"{r['runtime_ms']:.2f}"])
    widths = [max(len(l[i]) for l in lines) for i in range(len(heads))]
    table = ["  ".join(c.rjust(w) if i > 1 else c.ljust(w)
                       for i, (c, w) in enumerate(zip(l, widths))).rstrip() for l in lines]
    used = sorted({r["objective"] for r in rows} & set(OBJECTIVE_HELP), key=list(OBJECTIVE_HELP).index)
    notes = [f"objective {o}: {OBJECTIVE_HELP[o]}" for o in used]
    notes += [f"spray: per-packet spraying over every alive path, the fluid LP bound (the best "
              f"split for the slowest flow), at {1 - r['info']['penalty']:.4g} of its goodput "
              f"(--spray-penalty {r['info']['penalty']:g}); not a plan mlroute installs"
              for r in rows if r["algorithm"] == SPRAY]
    notes.append("ideal: the max link load's lower bound; each job alone at line rate"
                 + ("; leaf-agg, agg-core: the max load of each tier" if tiers else ""))
    notes += advisecli.table_notes(rows)
    return "\n".join([f"fabric: {fabric.summary()}"] + table + [""] + notes)


def plan_document(doc: dict, objective: str) -> tuple[str, str]:
    """A plan's document, saying which objective it used, and its one-line summary."""
    doc = {"algorithm": doc["algorithm"], "objective": objective, **doc}
    summary = (f"{doc['algorithm']} plan, objective {objective}: {len(doc['routes'])} routes, "
               f"max link load {doc['max_link_load']:g} (lower bound {doc['lower_bound']:g})"
               + (f"; {len(doc['cuts'])} cut-bound cuts" if doc.get("cuts") else ""))
    return json.dumps(doc, indent=1), summary


def compare_summary(rows: list[dict]) -> str:
    """One line for ``compare --out``: the algorithms, and which reached the lowest max load."""
    if not rows:
        return "no algorithm compared"
    best = min(r["max_link_load"] for r in rows)
    return (f"{len(rows)} algorithms compared ({', '.join(r['algorithm'] for r in rows)}); "
            f"lowest max link load {best:g}: "
            + ", ".join(r["algorithm"] for r in rows if r["max_link_load"] == best))


def plan_or_compare(args, fabric: Clos, jobs: list[Job]) -> tuple[str, str]:
    """``plan`` or ``compare`` on any fabric, each name by its one planner (``make_plan``):
    (output, summary line). Each plans with the controller's objective by default
    (``default_objective``, alike on every fabric); the fabric's shape, asked once
    (``run_shape``), gives the predictions of ``compare``'s rows."""
    shape = run_shape(fabric)
    if args.cmd == "plan":
        # asked for: run_options refuses it where it does not apply, naming where it does
        used = args.objective or default_objective(args.algorithm)
        run = run_options(shape, args.algorithm, args.seed, args.salt, args.ilp_time_limit, used,
                          args.max_parts)
        plan = make_plan(fabric, jobs, run.algorithm, **run.options)
        return plan_document(advisecli.plan_doc(plan), run.objective)
    algs = [a.strip() for a in args.algorithms.split(",") if a.strip()] if args.algorithms \
        else None
    rows = compare(fabric, jobs, algs, args.seed, args.salt, args.ilp_time_limit,
                   args.objective, args.max_parts, shape, args.spray_penalty)
    rows = advisecli.with_cuts(rows, fabric, jobs)
    out = json.dumps(rows, indent=1) if args.json else format_table(rows, jobs, fabric)
    return out, compare_summary(rows)


def add_job_commands(sub) -> None:
    """``job add|delete|list|show``: the client side of the controller's /v1/jobs."""
    from controller.enforcement.modes import MODES
    line, text = COMMANDS["job"]
    job = sub.add_parser("job", help=line, description=text, formatter_class=HelpFormatter)
    jsub = job.add_subparsers(dest="job_cmd", required=True, metavar="ACTION", title="actions")
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--url", default=os.environ.get("MLROUTE_URL", "http://127.0.0.1:8080"),
                        help="controller REST URL, or several comma-separated (redundant "
                             "controllers); default $MLROUTE_URL or http://127.0.0.1:8080")
    common.add_argument("--token", help="write token (default: $MLROUTE_TOKEN)")
    common.add_argument("--token-file", help="file whose first line is the write token "
                                             "(default: $MLROUTE_TOKEN_FILE)")
    common.add_argument("--ca-file", default=os.environ.get("MLROUTE_CA_FILE"),
                        help="PEM CA that signed the controller's certificate (https:// URLs; "
                             "default $MLROUTE_CA_FILE, else the system's CAs)")
    common.add_argument("--timeout", type=float, default=60.0, help="seconds per request")
    common.add_argument("--json", action="store_true", help="print the controller's JSON answer")

    def action(name, line):
        return jsub.add_parser(name, parents=[common], help=line, description=line[0].upper()
                               + line[1:] + ".", formatter_class=HelpFormatter)

    add = action("add", "declare a job (POST /v1/jobs), from a job file or by its members")
    add.add_argument("file", nargs="?", help="a job document (JSON), or {\"jobs\": [...]}")
    add.add_argument("--members", help="comma-separated host names or IPv4 addresses: the job "
                                       "is declared by its members, the controller learns its "
                                       "traffic matrix")
    add.add_argument("--id", help="job id (with --members)")
    add.add_argument("--bytes", type=float, help="bytes per rank and step, a hint")
    add.add_argument("--no-learn", action="store_true",
                     help="keep the declared matrix (\"learn\": false)")
    add.add_argument("--algorithm", help=f"planner for this job: {listing()} "
                                         f"(default: the controller's, {Settings.algorithm} "
                                         "unless --mlroute-algorithm says otherwise)")
    add.add_argument("--mode", help=f"enforcement for this job: {', '.join(MODES)} (default: "
                                    f"the controller's, {Settings.mode} unless --mlroute-mode "
                                    "says otherwise)")
    delete = action("delete", "remove jobs (DELETE /v1/jobs/ID)")
    delete.add_argument("ids", nargs="+", metavar="ID")
    action("list", "running jobs, one line each (GET /v1/jobs)")
    show = action("show", "one job in short: matrix, prediction, learning, routes "
                          "(GET /v1/jobs/ID; --json: the whole answer)")
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
                        timeout=args.timeout, ca_file=args.ca_file)
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
            view = None if args.ports else client.job(args.id)
            print(client.job_ports(args.id).rstrip("\n") if args.ports
                  else json.dumps(view, indent=1) if args.json else job_text(view))
    except (InputError, ValueError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    except ControllerError as e:  # "POST URL: HTTP 409: ..." or "GET URL: controller unreachable"
        print(f"error: {' '.join(str(e).split())}", file=sys.stderr)
        return 1
    return 0


COMMANDS = {  # name: (one line for the command list, its description)
    "fabric": (fabriccli.LINE, fabriccli.DESCRIPTION),
    "plan": ("plan routes for jobs on a fabric with one algorithm, offline",
             "Plan one route per flow of the jobs with one algorithm and print the routes "
             "document (or write it with --out), as the controller would plan them by "
             "default."),
    "compare": ("run several algorithms on the same jobs and compare their plans",
                "Plan the jobs with several algorithms and print one table, the same on every "
                "fabric: a row per algorithm with the objective it used, max link load (on "
                "three tiers also per tier), links at the max, the slowest flow's rate, each "
                "job's predicted All-Reduce time and the planner's runtime; a row ideal (the "
                "lower bound, each job alone), a row spray (per-packet spraying over every "
                "alive path: the fluid LP bound less a goodput penalty) and what each "
                "objective ranks by."),
    "job": ("add, delete, list or show jobs of a running controller (REST)",
            "The client side of a running controller's /v1/jobs."),
    "advise": (advisecli.LINE, advisecli.DESCRIPTION),
    "srv6-config": (srv6cli.LINE, srv6cli.DESCRIPTION),
    "agent-credential": (credentialcli.LINE, credentialcli.DESCRIPTION),
}


def add_offline_commands(sub) -> None:
    """``fabric``, ``plan`` and ``compare``: no controller, no switch."""
    def parser(name):
        line, text = COMMANDS[name]
        return sub.add_parser(name, help=line, description=text, formatter_class=HelpFormatter)

    fabriccli.add_command(sub, *COMMANDS["fabric"])
    objectives = " or ".join(f"{o} ({OBJECTIVE_HELP.get(o, o)})" for o in OBJECTIVES)
    aliases = " and ".join(f"{n} is {runs_as(n)[0]} with objective {runs_as(n)[1]}"
                           for n in PLANNERS if runs_as(n)[0] != n)
    for name in ("plan", "compare"):
        p = parser(name)
        p.add_argument("--fabric", required=True, metavar="FILE", help="fabric document")
        p.add_argument("--jobs", required=True, metavar="FILE",
                       help="jobs document ({\"jobs\": [...]})")
        if name == "plan":
            p.add_argument("--algorithm", default=Settings.algorithm,
                           help=f"planner: {listing()}; each name runs one planner on every "
                                "fabric: the planner table of the controller options' "
                                f"reference (default: {Settings.algorithm}, the controller's)")
        else:
            p.add_argument("--algorithms", metavar="A,B,...",
                           help=f"comma-separated planners, of {listing()} (default: every "
                                f"one, where {aliases}; then {SPRAY}, "
                                "the per-packet spraying baseline)")
        p.add_argument("--objective", metavar="|".join(OBJECTIVES),
                       help=f"what plans are ranked by: {objectives}. Applies to auto and split "
                            "(jobs: split by bytes) on every fabric (auto with jobs runs the "
                            "jobs planner); the jobs planner "
                            "ranks by jobs, the other planners count flows. The output names "
                            "the objective each plan used (default: the controller's: "
                            f"{Settings.objective} for auto, jobs for the "
                            "jobs planner, flows for the other planners)")
        p.add_argument("--seed", type=int, default=1234, help="annealing seed")
        p.add_argument("--salt", type=int, default=0, help="ECMP hash salt")
        limit = ILP_TIME_LIMIT_S if name == "plan" else 60.0
        p.add_argument("--ilp-time-limit", type=float, default=limit, metavar="S",
                       help="seconds for the ILP (auto: its last stage's budget, 0 skips it; "
                            + ("the controller's default" if name == "plan" else
                               f"more than the controller's {ILP_TIME_LIMIT_S:g} s: compare "
                               "looks for each planner's best") + ")")
        p.add_argument("--max-parts", type=int, metavar="N",
                       help="split: at most N parts per flow (default: 4; 0: no bound, the "
                            "fractional optimum)")
        if name == "compare":
            p.add_argument("--spray-penalty", type=float, default=DEFAULT_PENALTY, metavar="P",
                           help="the row spray (per-packet spraying, the fluid LP bound): the "
                                "fraction of its bytes on the wire lost to retransmission and "
                                f"reordering, in [0, 1) (default: {DEFAULT_PENALTY:g}, an "
                                "assumption: docs/explanation/algorithms.md)")
            p.add_argument("--json", action="store_true", help="print JSON instead of a table")
        p.add_argument("--out", metavar="FILE",
                       help=f"write the {'routes' if name == 'plan' else 'comparison'} to FILE "
                            "and print one line saying so (default: print it)")


def parser() -> argparse.ArgumentParser:
    """The command line: every command, its options and their defaults."""
    ap = argparse.ArgumentParser(
        prog="mlroute", formatter_class=HelpFormatter,
        description="mlroute's command line (also run as python -m controller): plan "
                    "offline, with no controller and no switch (fabric, plan, compare), "
                    "manage the jobs of a running controller (job), write routers' static "
                    "SRv6 configuration (srv6-config) and issue host agents' credentials "
                    "(agent-credential). The controller itself: "
                    "mlroute-controller; a host's agent in srv6 mode: mlroute-agent.",
        epilog="mlroute COMMAND --help shows a command's options and defaults.")
    ap.add_argument("--version", action="version", version=f"mlroute {__version__}")
    sub = ap.add_subparsers(dest="cmd", required=True, metavar="COMMAND",
                            title="commands")
    add_offline_commands(sub)
    advisecli.add_command(sub, *COMMANDS["advise"])
    add_job_commands(sub)
    srv6cli.add_command(sub, *COMMANDS["srv6-config"])
    credentialcli.add_command(sub, *COMMANDS["agent-credential"])
    return ap


def main(argv=None) -> int:
    args = parser().parse_args(argv)
    if args.cmd == "job":
        return run_job_command(args)
    try:
        if args.cmd == "srv6-config":
            print(srv6cli.run(args))
            return 0
        if args.cmd == "agent-credential":
            print(credentialcli.run(args))
            return 0
        if args.cmd == "fabric":
            fabric = fabriccli.make_fabric(args)
            out, summary = json.dumps(fabric.to_dict(), indent=1), fabriccli.summary(fabric)
        elif args.cmd == "advise":
            out, summary = advisecli.run(args)
        else:
            if args.objective is not None and args.objective not in OBJECTIVES:
                raise InputError(f"unknown objective {args.objective!r} "
                                 f"(choose from {', '.join(OBJECTIVES)})")
            fabric, jobs = load_inputs(args.fabric, args.jobs)
            out, summary = plan_or_compare(args, fabric, jobs)
        write_output(out, args.out, summary)
    except InputError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    return 0
