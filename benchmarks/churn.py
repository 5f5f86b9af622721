"""Routes moved by a link failure on a loaded fat-tree (``make bench``, bench/churn.json): the
re-plan from the routes in force (``clos_churn.clos_replan``, what the controller runs for an
``auto`` group) against a fresh ``clos_auto`` plan with every flow sent back to its route in
force where that keeps the fresh max (``clos_churn.home``: what the re-plan took before its
ejection chains and its fewest-moves MILP), both in the same run.

Why: a moved flow costs packets reordered or paused (for RDMA, a go-back-N) and OpenFlow
messages; on the scale benchmark's k = 8 fat-tree a failed core link moved 867 of 1,120
routes, and installing them took 4.5 s.

Cases: fat-trees k = 4 and 8 with ``benchmarks.scale``'s jobs (a ring across pods over every
host, up to 128, and an all-to-all of 32 hosts), in force as ``clos_auto`` planned them
(seeded, once); ``--links`` aggregation-core links that carry routes, spread over the pods,
failed one at a time. Per case: the routes over the link, and for both: moved routes, the
max link load, the planner's source (``installed``: the routes in force repaired, ``fewest
moves``: the MILP, ``fresh``) and milliseconds. HiGHS runs within ``clos_churn.MOVES_MILP_S``
of wall time, so a loaded machine can leave a case to the fresh plan.

    python -m benchmarks.churn [--links 13] [--out bench/churn.json]
"""
from __future__ import annotations

import argparse
import platform
import statistics
import sys
import time

from benchmarks.planner import write_result
from benchmarks.scale import all_to_all_job, ring_job
from controller.model.clos import Clos
from controller.model.clospaths import ClosProblem
from controller.model.jobs import parse_job
from controller.planners.clos_auto import clos_auto, score
from controller.planners.clos_churn import MOVES_MILP_S, clos_replan, home, previous_routes
from controller.planners.clos_ilp_moves import moved_flows
from controller.planners.clos_routes import route_paths


def in_force(problem: ClosProblem, routing) -> list:
    """A routing as the controller keeps it: per flow ((switch names, 1.0),)."""
    out: list = [None] * len(problem.flows)
    for pos, path in zip(problem.inter, route_paths(problem, routing)):
        out[pos] = ((path, 1.0),)
    return out


def core_links(routes: list, n: int) -> list[tuple[str, str]]:
    """``n`` aggregation-core links that carry routes, spread over the sorted list."""
    links = sorted({(p[0][0][1], p[0][0][2]) for p in routes if p and len(p[0][0]) == 5})
    return links[::max(1, len(links) // n)][:n]


def crossing(routes: list, link: tuple[str, str]) -> int:
    return sum(1 for p in routes if p and any({a, b} == set(link)
                                              for a, b in zip(p[0][0], p[0][0][1:])))


def case(fabric: Clos, jobs: list, routes: list, link: tuple[str, str]) -> dict:
    problem = ClosProblem.build(fabric.with_down([link]), jobs, skip_unroutable=True)
    before = previous_routes(problem, routes)
    t0 = time.perf_counter()
    r = clos_replan(problem, before)
    replan_ms = (time.perf_counter() - t0) * 1e3
    t0 = time.perf_counter()
    fresh = clos_auto(problem)
    home(problem, fresh, before, score(problem, fresh)[0])
    fresh_ms = (time.perf_counter() - t0) * 1e3
    moved = len(moved_flows(fresh, before))
    return {"link": "-".join(link), "routes_over_it": crossing(routes, link),
            "replan": {"moved": r.info["moved_flows"], "max_link_load": r.info["max_link_load"],
                       "source": r.info["source"], "ms": round(replan_ms, 1)},
            "fresh_sent_home": {"moved": int(moved), "max_link_load": score(problem, fresh)[0],
                                "ms": round(fresh_ms, 1)}}


def fabric_cases(k: int, links: int) -> dict:
    fabric = Clos.fat_tree(k)
    jobs = [parse_job(ring_job(fabric), fabric), parse_job(all_to_all_job(fabric), fabric)]
    problem = ClosProblem.build(fabric, jobs)
    routes = in_force(problem, clos_auto(problem))
    rows = [case(fabric, jobs, routes, link) for link in core_links(routes, links)]
    return {"fabric": f"fat-tree k={k}", "flows": len(problem), "cases": rows,
            "summary": summary(rows)}


def summary(rows: list[dict]) -> dict:
    r = [x["replan"] for x in rows]
    f = [x["fresh_sent_home"] for x in rows]
    return {"moved_replan": sum(x["moved"] for x in r), "moved_fresh": sum(x["moved"] for x in f),
            "moved_over_fresh": round(sum(x["moved"] for x in r) / max(1, sum(x["moved"] for x in f)), 4),
            "sources": {s: sum(x["source"] == s for x in r) for s in sorted({x["source"] for x in r})},
            "max_above_fresh": sum(a["max_link_load"] > b["max_link_load"] + 1e-9
                                   for a, b in zip(r, f)),
            "ms_median_replan": round(statistics.median(x["ms"] for x in r), 1),
            "ms_median_fresh": round(statistics.median(x["ms"] for x in f), 1)}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m benchmarks.churn",
                                 description=__doc__.split("\n")[0])
    ap.add_argument("--links", type=int, default=13, help="core links failed per fabric")
    ap.add_argument("--fat-tree", type=int, action="append", metavar="K",
                    help="a k-ary fat-tree (repeat; default: 4 and 8)")
    ap.add_argument("--out", default="bench/churn.json")
    args = ap.parse_args(argv)
    t0 = time.perf_counter()
    fabrics = [fabric_cases(k, args.links) for k in (args.fat_tree or (4, 8))]
    targets = {
        "replan_max_never_above_fresh": {
            "value": sum(f["summary"]["max_above_fresh"] for f in fabrics),
            "ok": all(f["summary"]["max_above_fresh"] == 0 for f in fabrics)},
        "moved_over_fresh_sent_home": {  # a figure, no target: how much churn is saved
            "value": {f["fabric"]: f["summary"]["moved_over_fresh"] for f in fabrics},
            "ok": None}}
    write_result({"command": "python -m benchmarks.churn " + " ".join(argv or sys.argv[1:]),
                  "machine": {"python": platform.python_version(), "date": time.strftime("%Y-%m-%d")},
                  "settings": {"links": args.links, "moves_milp_s": MOVES_MILP_S},
                  "fabrics": fabrics, "targets": targets,
                  "wall_s": round(time.perf_counter() - t0, 1)}, args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
