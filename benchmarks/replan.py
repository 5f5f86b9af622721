"""Routes moved by a failure on a loaded fat-tree, planner only (no switches: ``make bench``,
bench/replan.json): what the controller's request path re-plans (``group_routes``, auto's
layer 1 from the routes in force) when a link or a switch fails and when it comes back,
today's code against the code before issue 74 (``--old REV``: ``clos_churn`` of that
commit, read with git) in the same run.

Why: a moved route is a reordering burst or a reconnect for a running collective, so a
failure should move the routes that crossed the failed element and only as many more as
keeping the max link load at its lower bound needs (issue 74: on ``benchmarks.scale``'s
k = 8 fat-tree a core link with 5 routes over it moved 867). ``benchmarks.scale`` measures
the same with Open vSwitch; this one runs in seconds.

State: as the controller builds it, one POST after the other: a ring All-Reduce (``--ring``
hosts, ``benchmarks.scale``'s order across pods), then an all-to-all (``--all-to-all``
hosts) beside it; for that second POST, the running flows it moved (old and new). Cases: the
aggregation-core link and the leaf-aggregation link with the most routes, the aggregation
switch and the core switch with the most, and a switch named in ``--fat-tree``; each failed,
then restored (the routes in force after the failure re-planned on the whole fabric). Per
case: ``crossed`` (routes over the element), per code: ``moved`` routes, ``max_link_load``,
``ms``; the ``lower_bound``; where the request path left the max above the bound,
``off_path``: what the later stage (``clos_offpath``, by flow counts: ``clos_regroup``'s two
MILPs to the bound, the MILP over every option where they find none) reaches, the routes it
moves, ``moved_total`` (the request path's and its), its time and ``above_bound_s`` (the
request path's and its: how long the max stays above the bound); ``off_path_old``: the same
of ``clos_offpath`` at ``--old-bound`` (the MILP over every option alone) from the same
routes; and ``fewest_from_before`` (on instances of at most ``LAYER2_MILP_OPTIONS``
options): the exact fewest-moves MILP at the bound from the routes before the failure
(``clos_ilp_moves``, within ``EXACT_S``: "optimal" proves the fewest routes any plan at the
bound moves; "infeasible" that no plan meets the bound).

The all-to-all's POST is followed by the off-path stage (``post_all_to_all.off_path``, per
objective, today's code and ``clos_offpath`` of ``--old-offpath``): the running flows it
would move (``found_moved``), those applied (``moved``: zero unless
``churn.moving_gain`` finds the gain worth them), the ranks before and after, ``why``.

    python -m benchmarks.replan [--fat-tree 8 --fat-tree 16:512:128:c1_1] [--old REV]
                                [--old-offpath REV]
                                [--old-bound REV] [--out bench/replan.json]
"""
from __future__ import annotations

import argparse
import importlib.util
import os
import platform
import subprocess
import sys
import tempfile
import time
from collections import Counter

from benchmarks.planner import write_result
from benchmarks.scale import all_to_all_job, ring_job
from controller.model.clos import Clos
from controller.model.clospaths import ClosProblem, lower_bound
from controller.model.jobs import parse_job
from controller.planners import clos_routes
from controller.planners.clos_auto import LAYER2_MILP_OPTIONS, option_count
from controller.planners.clos_churn import clos_replan, previous_routes
from controller.planners.clos_ilp_moves import fewest_moves, moved_flows
from controller.planners.clos_loads import score
from controller.planners.clos_offpath import (
    clos_instance,
    clos_off_path,
    moved_why,
    moving_gain,
)
from controller.planners.group_routes import group_routes

SIZES = {8: (128, 32), 16: (512, 64)}  # k -> ring hosts, all-to-all hosts
# the fabrics of a default run: k, or k:ring:all-to-all[:switch] (k = 16 loaded as k = 8 is,
# and a core switch whose failure leaves the request path above the bound beside the busiest
# elements: 16,768 flows, 1,022,976 options)
FABRICS = ("8", "16", "16:512:128:c1_1")
OLD = "87bba06"  # main before issue 74's minimal re-plans
OLD_OFFPATH = "dd0a2ab"  # main before the off-path stage's moves had to buy their gain
EXACT_S = 60.0  # the exact fewest-moves MILP from the routes before a failure
OLD_BOUND = "284d3b2"  # main before clos_regroup: the off-path MILP alone to the bound
OFFPATH_MODULES = ("churn", "clos_jobs", "clos_offpath")  # read at --old-offpath, in order
ABOVE_BOUND_S = 5.0  # issue 74: bound + 1 "for at most a few seconds" (planning time)


def old_replan(rev: str):
    """``clos_replan`` of ``controller/planners/clos_churn.py`` at commit ``rev`` (git), or
    None where git or the commit is not there."""
    try:
        text = subprocess.run(["git", "show", f"{rev}:controller/planners/clos_churn.py"],
                              capture_output=True, text=True, check=True, timeout=30).stdout
    except (OSError, subprocess.SubprocessError):
        return None
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "clos_churn_old.py")
        with open(path, "w") as fh:
            fh.write(text)
        spec = importlib.util.spec_from_file_location("clos_churn_old", path)
        mod = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(mod)
    return mod.clos_replan


def old_off_path(rev: str):
    """``clos_offpath`` with ``churn`` and ``clos_jobs`` of commit ``rev`` (git), or None
    where git or the commit is not there: each module is executed under its own name with
    the old ones before it in ``sys.modules`` (so it binds them), then today's put back."""
    texts = {}
    for name in OFFPATH_MODULES:
        try:
            texts[name] = subprocess.run(
                ["git", "show", f"{rev}:controller/planners/{name}.py"], capture_output=True,
                text=True, check=True, timeout=30).stdout
        except (OSError, subprocess.SubprocessError):
            return None
    full = {name: f"controller.planners.{name}" for name in OFFPATH_MODULES}
    saved = {k: sys.modules.get(k) for k in full.values()}
    try:
        for name, text in texts.items():
            mod = importlib.util.module_from_spec(
                importlib.util.spec_from_loader(full[name], loader=None))
            sys.modules[full[name]] = mod
            exec(compile(text, f"{rev}:{name}.py", "exec"), mod.__dict__)
        return sys.modules[full["clos_offpath"]]
    finally:
        for k, mod in saved.items():
            if mod is None:
                sys.modules.pop(k, None)
            else:
                sys.modules[k] = mod


def post_off_path(fabric: Clos, jobs: list, routes: list, module, objective: str) -> dict:
    """The off-path stage after the all-to-all's POST (``module``: a ``clos_offpath``) from
    the routes in force: running flows its routing moves, those applied (``moving_gain``),
    the ranks before and after, its time and, when applied, why. Each routing is ranked
    once (``clos_moving``; a module from before it ranks as it did)."""
    p, _, previous = clos_instance(fabric, jobs, routes)
    t0 = time.perf_counter()
    better = module.clos_off_path(p, previous, objective)
    ms = (time.perf_counter() - t0) * 1e3
    if hasattr(module, "clos_moving"):
        judged = module.clos_moving(p, better, previous, objective)
        before, after, found, why = judged.before, judged.after, judged.moved, judged.why
    else:
        found = len(moved_flows(better, previous))
        before = module.clos_rank(p, previous, objective)
        after = module.clos_rank(p, better, objective, better.info.get("predicted_slowdown"))
        applied = module.clos_better_paths(p, better, previous, objective) is not None
        why = moved_why(found, moving_gain(before, after, objective, found)) if applied \
            else None
    row = {"found_moved": found, "moved": found if why else 0,
           "rank_before": [round(float(x), 6) for x in before],
           "rank_after": [round(float(x), 6) for x in after], "ms": round(ms, 1)}
    if why:
        row["why"] = why
    return row


def post(fabric: Clos, jobs: list, before: list, replan) -> tuple[list, int, float]:
    """(routes, running flows moved, ms) of the request path's re-plan by ``replan``."""
    real = clos_routes.clos_replan
    clos_routes.clos_replan = replan
    try:
        t0 = time.perf_counter()
        got = group_routes(fabric, jobs, "auto", "flows", before)
        return list(got.parts), got.moved_flows, (time.perf_counter() - t0) * 1e3
    finally:
        clos_routes.clos_replan = real


def replan_case(fabric: Clos, jobs: list, routes: list, replan) -> dict:
    """One re-plan of ``routes`` on ``fabric``: moved routes, max link load, ms, and the
    routes after it (to restore from)."""
    p = ClosProblem.build(fabric, jobs, skip_unroutable=True)
    prev = previous_routes(p, routes)
    t0 = time.perf_counter()
    r = replan(p, prev, layer1_only=True)
    ms = (time.perf_counter() - t0) * 1e3
    after = [None] * len(p.flows)
    for pos, path in zip(p.inter, clos_routes.route_paths(p, r)):
        after[pos] = ((path, 1.0),)
    return {"moved": r.info["moved_flows"], "max_link_load": r.info["max_link_load"],
            "source": r.info["source"], "ms": round(ms, 1), "_after": after, "_r": r,
            "_p": p}


def off_path(case: dict, module=None) -> dict:
    """The later stage (``module``'s ``clos_off_path``, today's by default) from the
    re-plan's routes, by flow counts: max, moved, the request path's and its moves together,
    ms, ``above_bound_s`` (the request path's time and its: how long the max stays above the
    bound, planning only), and how it reached the bound (``method``, the MILP's status)."""
    p, r = case["_p"], case["_r"]
    t0 = time.perf_counter()
    better = (module.clos_off_path if module else clos_off_path)(p, r, "flows")
    ms = (time.perf_counter() - t0) * 1e3
    moved = len(moved_flows(better, r))
    out = {"max_link_load": score(p, better)[0], "moved": moved,
           "moved_total": case["moved"] + moved, "ms": round(ms, 1),
           "above_bound_s": round((case["ms"] + ms) / 1e3, 2)}
    if "to_the_bound" in better.info:
        out["milp"] = {k: better.info["to_the_bound"].get(k)
                       for k in ("method", "status", "wall_ms", "excess")}
    return out


def fewest_from_before(case: dict, routes: list) -> dict:
    """The exact fewest-moves MILP at the lower bound from the routes before the failure
    (``routes``), every flow free, within ``EXACT_S``: its status, the routes it moves, its
    max and time (no answer: status "none in time" or "infeasible")."""
    p = case["_p"]
    prev = previous_routes(p, routes)
    t0 = time.perf_counter()
    few = fewest_moves(p, prev, lower_bound(p), EXACT_S)
    s = round(time.perf_counter() - t0, 1)
    if few is None:
        return {"status": "infeasible" if s < EXACT_S * 0.9 else "none in time", "s": s}
    return {"status": few.info["status"], "moved": len(moved_flows(few, prev)),
            "max_link_load": score(p, few)[0], "s": s}


def busiest(routes: list) -> dict:
    """The aggregation-core link, leaf-aggregation link, aggregation and core switch that
    the most routes cross."""
    links, switches = Counter(), Counter()
    for parts in routes:
        if parts:
            path = parts[0][0]
            links.update(tuple(sorted(h)) for h in zip(path, path[1:]))
            switches.update(path[1:-1])
    pick = lambda c, test: next(x for x, _ in c.most_common() if test(x))  # noqa: E731
    return {"core link": pick(links, lambda x: x[1].startswith("c")),
            "leaf link": pick(links, lambda x: x[1].startswith("l")),
            "aggregation switch": pick(switches, lambda x: x.startswith("a")),
            "core switch": pick(switches, lambda x: x.startswith("c"))}


def crossed(routes: list, element) -> int:
    def over(path):
        if isinstance(element, str):
            return element in path
        return any({a, b} == set(element) for a, b in zip(path, path[1:]))
    return sum(1 for parts in routes if parts and over(parts[0][0]))


def fabric_cases(k: int, ring: int, a2a: int, old, old_offpath=None, old_bound=None,
                 switch: str | None = None) -> dict:
    fabric = Clos.fat_tree(k)
    jobs = [parse_job(ring_job(fabric, ring), fabric), parse_job(all_to_all_job(fabric, a2a),
                                                                 fabric)]
    codes = {"new": clos_replan, **({"old": old} if old else {})}
    first, _, _ = post(fabric, jobs[:1], [None] * len(jobs[0].flows()), clos_replan)
    before = first + [None] * len(jobs[1].flows())
    second = {name: post(fabric, jobs, before, fn) for name, fn in codes.items()}
    routes = second["new"][0]  # the failures start from today's state, for both codes
    rows = []
    for what, element in {**busiest(routes), **({"named switch": switch} if switch else {})
                          }.items():
        down = [x for x in fabric.links() if (element in x if isinstance(element, str)
                                              else set(x) == set(element))]
        row = {"element": what, "name": element if isinstance(element, str) else
               "-".join(element), "crossed": crossed(routes, element)}
        for name, fn in codes.items():
            failed = replan_case(fabric.with_down(down), jobs, routes, fn)
            back = replan_case(fabric, jobs, failed["_after"], fn)
            row[name] = {key: failed[key] for key in ("moved", "max_link_load", "source", "ms")}
            if name == "new" and failed["max_link_load"] > lower_bound(failed["_p"]) + 1e-9:
                row[name]["off_path"] = off_path(failed)
                if old_bound is not None:  # the stage before, from the same routes
                    row[name]["off_path_old"] = off_path(failed, old_bound)
                if option_count(failed["_p"]) <= LAYER2_MILP_OPTIONS:
                    row["fewest_from_before"] = fewest_from_before(failed, routes)
            row[name]["restored"] = {key: back[key] for key in ("moved", "max_link_load", "ms")}
        row["lower_bound"] = lower_bound(ClosProblem.build(fabric.with_down(down), jobs,
                                                           skip_unroutable=True))
        row["lower_bound_restored"] = lower_bound(ClosProblem.build(fabric, jobs,
                                                                    skip_unroutable=True))
        rows.append(row)
    posted = {name: {"running_moved": moved, "ms": round(ms, 1)}
              for name, (_, moved, ms) in second.items()}
    usual = default_sizes(k) == (ring, a2a)  # else a loaded fabric: its failures only
    offs = {"new": sys.modules[clos_off_path.__module__],
            **({"old": old_offpath} if old_offpath and usual else {})}
    posted["off_path"] = {objective: {name: post_off_path(fabric, jobs, routes, mod, objective)
                                      for name, mod in offs.items()}
                          for objective in (("flows", "jobs") if usual else ("flows",))}
    name = f"fat-tree k={k}" + ("" if default_sizes(k) == (ring, a2a) else
                                f", ring {ring} + all-to-all {a2a}")
    return {"fabric": name, "ring_hosts": ring, "all_to_all_hosts": a2a,
            "flows": sum(len(j.flows()) for j in jobs), "post_all_to_all": posted,
            "cases": rows}


def targets(fabrics: list[dict]) -> dict:
    rows = [(f, c) for f in fabrics for c in f["cases"]]
    ratio = max((c["new"].get("off_path", c["new"]).get("moved_total", c["new"]["moved"])
                 / max(1, c["crossed"]) for _, c in rows), default=0.0)
    above = [f"{f['fabric']} {c['element']}" for f, c in rows
             if c["new"]["max_link_load"] > c["lower_bound"] + 1e-9 and (
                 "off_path" not in c["new"]
                 or c["new"]["off_path"]["max_link_load"] > c["lower_bound"] + 1e-9)]
    slow = max((c["new"]["ms"] for f, c in rows if "16" in f["fabric"]), default=0.0)
    secs = {f"{f['fabric']} {c['element']}": c["new"]["off_path"]["above_bound_s"]
            for f, c in rows if "off_path" in c["new"]}
    posts = {f["fabric"]: {o: v["new"]["moved"] for o, v in
                           f["post_all_to_all"]["off_path"].items()} for f in fabrics}
    return {"moved_over_crossed_max": {"value": round(ratio, 3), "target": 2.0,
                                       "ok": ratio <= 2.0},
            "off_path_moved_after_post": {"value": posts},
            "max_at_bound_after_off_path": {"value": above, "ok": not above},
            "replan_ms_k16_max": {"value": slow, "target": 1000, "ok": slow <= 1000},
            "above_bound_s": {"value": secs, "target": ABOVE_BOUND_S,
                              "ok": all(v <= ABOVE_BOUND_S for v in secs.values())}}


def sizes(spec: str) -> tuple[int, int, int, str | None]:
    """(k, ring hosts, all-to-all hosts, a switch to fail too or None) of ``--fat-tree``'s K
    or K:RING:A2A[:SWITCH]."""
    k, *rest = str(spec).split(":")
    if not rest:
        return (int(k), *default_sizes(int(k)), None)
    return int(k), int(rest[0]), int(rest[1]), (rest[2] if len(rest) > 2 else None)


def default_sizes(k: int) -> tuple[int, int]:
    """The ring's and the all-to-all's hosts on a k-ary fat-tree when not given."""
    return SIZES.get(k, (k ** 3 // 4, 2 * k))


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m benchmarks.replan",
                                 description=__doc__.split("\n")[0])
    ap.add_argument("--fat-tree", action="append", metavar="K[:RING:A2A[:SWITCH]]",
                    help="a k-ary fat-tree, with the ring's and the all-to-all's hosts "
                         f"(repeat; default: {' '.join(FABRICS)})")
    ap.add_argument("--old", default=OLD, help="the commit of the code before ('' : none)")
    ap.add_argument("--old-offpath", default=OLD_OFFPATH,
                    help="the commit of the off-path stage before ('' : none)")
    ap.add_argument("--old-bound", default=OLD_BOUND,
                    help="the commit of the off-path stage to the bound before ('' : none)")
    ap.add_argument("--out", default="bench/replan.json")
    args = ap.parse_args(argv)
    t0 = time.perf_counter()
    old = old_replan(args.old) if args.old else None
    old_offpath = old_off_path(args.old_offpath) if args.old_offpath else None
    old_bound = old_off_path(args.old_bound) if args.old_bound else None
    fabrics = []
    for spec in args.fat_tree or FABRICS:
        k, ring, a2a, switch = sizes(spec)
        fabrics.append(fabric_cases(k, ring, a2a, old, old_offpath, old_bound, switch))
    write_result({"command": "python -m benchmarks.replan " + " ".join(argv or sys.argv[1:]),
                  "machine": {"python": platform.python_version(),
                              "date": time.strftime("%Y-%m-%d")},
                  "old": args.old if old else None,
                  "old_offpath": args.old_offpath if old_offpath else None,
                  "old_bound": args.old_bound if old_bound else None, "fabrics": fabrics,
                  "targets": targets(fabrics), "wall_s": round(time.perf_counter() - t0, 1)},
                 args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
