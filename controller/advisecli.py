"""Where routing stops helping, on the command line: ``mlroute advise`` (ring orders and the
cut-bound cuts of jobs on a fabric, offline) and what ``plan`` and ``compare`` add about the
cuts (``model.cuts``): where a job's demand across a leaf's uplinks (a pod's links to the
cores) exceeds them, no routing meets its ideal, and a placement would.

``plan`` puts the findings in the routes document (``"cuts"``, each with the plan's distance
to the bound) and prints their messages on stderr (``note: ...``); ``compare`` gives every row
them with its own times (``--json``) and, under the table, a row ``cut bound`` (per job the
least any routing reaches) and their messages."""
from __future__ import annotations

import json
import sys

from controller.jsonio import HelpFormatter, read_json
from controller.model import cuts
from controller.model.clos import load_fabric
from controller.model.jobs import parse_jobs
from controller.planners.plan import run_options
from controller.planners.registry import listing
from controller.planners.ringorder import advise_order
from controller.service.settings import Settings

LINE = "advise ring orders and say where routing stops helping (cut-bound jobs), offline"
DESCRIPTION = ("For the jobs on a fabric: per ring the rank order that crosses fewest leaves, "
               "with the saving in inter-leaf flows and predicted All-Reduce time (every job "
               "planned together by --algorithm, as the controller's POST /v1/advise does for "
               "one job), and every cut where a job's demand exceeds the capacity (a leaf's "
               "uplinks, a pod's links to the cores), in the given and the advised order: no "
               "routing meets the job's ideal there, and the placement that would (the leaves "
               "or pods it would need). --json prints the whole advice.")
NOTES = 5  # messages printed by plan (stderr) before "... N more"


def add_command(sub, line: str, description: str) -> None:
    p = sub.add_parser("advise", help=line, description=description,
                       formatter_class=HelpFormatter)
    p.add_argument("--fabric", required=True, metavar="FILE", help="fabric document")
    p.add_argument("--jobs", required=True, metavar="FILE",
                   help="jobs document ({\"jobs\": [...]})")
    p.add_argument("--algorithm", default=Settings.algorithm,
                   help=f"planner of the predictions: {listing()} (default: "
                        f"{Settings.algorithm}, the controller's; auto without its ILP, as "
                        "the controller advises)")
    p.add_argument("--json", action="store_true", help="print the advice as JSON")
    p.add_argument("--out", metavar="FILE",
                   help="write the advice to FILE and print one line saying so")
    p.set_defaults(objective=None)


def run(args) -> tuple[str, str]:
    """The advice of ``args`` (the text or JSON, and the one-line summary)."""
    fabric = load_fabric(read_json(args.fabric, "fabric"))
    jobs = parse_jobs(read_json(args.jobs, "jobs"), fabric)
    plan = run_options(fabric, args.algorithm, ilp_time_limit=0)
    doc = advise_order(fabric, jobs, plan.algorithm, predict=True, **plan.options)
    given, advised = (len(doc["cuts"][k]) for k in ("given", "advised"))
    flows = doc["inter_leaf_flows"]
    summary = (f"advice for {len(jobs)} jobs: inter-leaf flows {flows['given']} -> "
               f"{flows['advised']}; cut-bound cuts {given} given, {advised} advised")
    return (json.dumps(doc, indent=1) if args.json else text(doc, fabric)), summary


def text(doc: dict, fabric) -> str:
    """The advice for people: per job its rings' orders and savings, then the cut-bound cuts
    in the given order and with the advised one."""
    out = [f"fabric: {fabric.summary()}"]
    for jid, job in doc["jobs"].items():
        f, t = job["inter_leaf_flows"], job.get("predicted_allreduce_s")
        time = (f", predicted All-Reduce {t['given'] * 1e3:.4g} -> {t['advised'] * 1e3:.4g} ms"
                if t else "")
        out.append(f"job {jid}: inter-leaf flows {f['given']} -> {f['advised']}{time}")
        for k, ring in enumerate(job["rings"]):
            how = ring["method"] + (f" {ring['stride']}" if ring["method"] == "stride" else "")
            out.append(f"  ring {k}: {how}: {' '.join(ring['order'])}")
    if not doc["jobs"]:
        out.append("no ring All-Reduce: no order to advise")
    for name, head in (("given", "in the given order"), ("advised", "with the advised order")):
        found = doc["cuts"][name]
        out.append(f"where routing stops helping, {head}:"
                   + ("" if found else " nowhere (every demand fits its cuts)"))
        out += [f"  {n}" for n in cuts.notes(found)]
    return "\n".join(out)


# ---- plan and compare ------------------------------------------------------------------------
def plan_doc(plan) -> dict:
    """The plan's document with its cut-bound cuts (``"cuts"``), their messages on stderr."""
    p = plan.problem
    found = cuts.findings(p.fabric, p.jobs)
    if found:
        found = cuts.findings(p.fabric, p.jobs, times=predicted_times(plan))
        print("\n".join(f"note: {n}" for n in cuts.notes(found, NOTES)), file=sys.stderr)
    return plan.to_dict() | {"cuts": found}


def predicted_times(plan) -> dict[str, float]:
    """Per job the shared prediction's seconds on the plan's routes: the jobs search's own
    (its ``predicted_slowdown`` of the routing it returned, in seconds again) where it made
    one, else a new prediction (on an 8,404-flow all-to-all, seconds: not twice)."""
    p = plan.problem
    slow = (plan.routing.info or {}).get("predicted_slowdown")
    if not isinstance(slow, dict) or not all(isinstance(slow.get(j.id), float) for j in p.jobs):
        return plan.predicted_times()
    bps = p.fabric.link_bps("host")  # the jobs search's (``clos_jobs.clos_slowdowns``)
    return {j.id: slow[j.id] * (j.compute_s + j.ideal_allreduce_s(bps)) - j.compute_s
            for j in p.jobs}


def with_cuts(rows: list[dict], fabric, jobs) -> list[dict]:
    """``compare``'s rows with the jobs' cut bounds and cut-bound cuts, each with its row's
    predicted times."""
    if not rows:
        return rows
    bound = cuts.bounds(fabric, jobs)
    bare = cuts.findings(fabric, jobs)
    return [r | {"cut_bound_s": bound, "cuts": cuts.findings(fabric, jobs, times=r["allreduce_s"])
                 if bare else []} for r in rows]


def bound_row(rows: list[dict], jobs, blanks: int) -> list[list[str]]:
    """The table's row ``cut bound`` (per job the least any routing reaches), when a job is
    cut-bound by its own demand; ``blanks``: the empty cells between its name and the jobs."""
    if not rows or all(d["shared"] for d in rows[0].get("cuts", ())):
        return []
    return [["cut bound"] + [""] * blanks
            + [f"{rows[0]['cut_bound_s'][j.id]:.4g}" for j in jobs] + [""]]


def table_notes(rows: list[dict]) -> list[str]:
    """The lines under the table: what the row cut bound is, and the findings with the
    controller's algorithm's times (else the first row's)."""
    if not rows or not rows[0].get("cuts"):
        return []
    row = next((r for r in rows if r["algorithm"] == Settings.algorithm), rows[0])
    return ([f"cut bound: no routing goes below it where a job's demand exceeds a cut's "
             f"capacity ({row['algorithm']}'s plan: planned):"] + cuts.notes(row["cuts"]))
