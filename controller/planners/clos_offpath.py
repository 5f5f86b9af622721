"""auto's later stages on a Clos fabric, run off the request path from the routes in force.

Why: a POST waits for the request path only, and there layer 1 (the max link load,
``clos_churn.clos_replan(layer1_only=True)``) costs about the greedy's time while layer 2 and
the jobs search cost several times more (on a k = 32 fat-tree an all-to-all of 64 hosts took
14 ms for layer 1 and 83 ms for layer 2; the jobs planner 250-470 ms:
bench/request_path.json). So, as on two tiers (``planners.offpath``), the controller
installs layer 1 at once and then (``service.anytime``) asks this module for a better
routing of the group, from its routes in force:

1. where the request path left the max above the lower bound (a failure on a tightly loaded
   fabric, where every other option of a flow crosses two full links and no chain of moves
   helps), a routing at the bound from the routes in force (``to_the_bound``): the two
   small MILPs of ``clos_regroup`` (slots, then cores, within ``REGROUP_S``) and layer 2's
   ejection chains (``clos_auto.layer2`` without its MILP, within ``OFF_PATH_S``), the
   chains first on instances of more than ``CHAINS_FIRST_SLOTS`` slot options (there the
   MILPs take seconds, the chains one at most), and only where neither finds one the
   fewest-moves MILP over every option
   (``clos_ilp_moves``, within ``MOVES_S``), each taken when it moves at most
   ``MOVES_PER_EXCESS`` flows per flow above the bound on the links (HiGHS's first
   incumbents of the big MILP move nearly every
   flow). On the replan benchmark's k = 8 fat-tree a failed core switch (71 routes over
   it, 73 moved, max 10 for a bound of 9) reached 9 with 69 more moves in 1.3-1.9 s; the
   big MILP alone with 61 in 30 s. On its loaded k = 16 (16,768 flows, too many options for
   the big MILP) the chains reach 17 for 18 with 67 moves in 1.2 s, the MILPs took 19.4 s
   for 51 (bench/replan.json);
2. by flow counts, layer 2 (``clos_auto.layer2``): ejection chains at the max and at the
   loads below it, not the layer-2 MILP, whose routing may move any flow (on the scale
   benchmark's k = 8 fat-tree it moved 1,024 of 1,120 running flows after a switch failure);
   not after the MILP: after a failure flows move only as far as the max needs (issue 74;
   there it added 28 moves for 40 links fewer at the max);
3. with objective ``jobs``, the jobs search (``clos_jobs``) from the routes in force, not
   from layer 2's routing: layer 2 ignores the jobs (on the replan benchmark's k = 16 case, an
   all-to-all of 64 posted beside a ring of 512, it moved 381 flows and raised the predicted
   mean slowdown from 1.17 to 2.16, the search starting from there). Its moves, job moves and
   swaps each change a few flows, kept only when the mean drops by
   ``churn.JOB_GAIN_PER_MOVE`` of it per flow moved. No fresh jobs plan: it may move any flow.

The rule (issue 74): a running flow moves only for a gain in the objective that grows with
the flows moved. The result replaces the routes in force only when ``churn.moving_gain``
finds one on ``clos_rank`` with its moved flows (``clos_moving``: the flows counted once,
for the rule and for its sentence ``why``): by flow counts a lower max, or the same max
with a link fewer at it per ``churn.MOVES_PER_LINK`` moved flows; with jobs a mean lower by
``churn.JOB_MIN_GAIN`` plus ``JOB_GAIN_PER_MOVE`` per moved flow, the worst job no worse.
Every flow here has a route in force and stays in its
plane (``clos_instance`` pins it: a connection is bound to its plane's addresses). The
controller runs all this in a child process (``python -m controller.planners.clos_offpath
FILE``, ``main``; ``offpath.clos_in_subprocess``): the search and the MILP would hold the
controller's only thread, and with it OpenFlow and REST.

Cost: above the bound only, ``clos_regroup`` within ``REGROUP_S`` (on instances of at most
``REGROUP_SLOTS`` slot options) and, where it finds none, the MILP within ``MOVES_S`` (at
most ``clos_auto.LAYER2_MILP_OPTIONS`` options); ``clos_auto.layer2``'s chains within
``OFF_PATH_S``, or ``clos_jobs``' search (its budget of predictions, within
``jobs_stop.time_budget``); O(F) to read the routes in force and to name the new routes.
"""
from __future__ import annotations

import json
import sys
import time

import numpy as np

from controller.model.clos import Clos
from controller.model.clospaths import ClosProblem, ClosRouting, lower_bound
from controller.model.jobs import Job, parse_job
from controller.planners.churn import Moving, moved_why, moving_gain
from controller.planners.clos_auto import LAYER2_MILP_OPTIONS, layer2, option_count
from controller.planners.clos_churn import previous_routes
from controller.planners.clos_homing import send_home
from controller.planners.clos_ilp_moves import fewest_moves, moved_flows
from controller.planners.clos_jobs import clos_jobs, clos_slowdowns
from controller.planners.clos_loads import ClosLoads, score
from controller.planners.clos_regroup import regroup, slot_count
from controller.planners.clos_routes import route_paths

OFF_PATH_S = 1.0  # layer 2's chains and MILP, off the request path
# the fewest-moves MILP to the bound: at k = 8 HiGHS's incumbent moved 1,035 flows at 5-7 s,
# 61 to 91 at 10-20 s and 61 at 30 s (a 2-core machine shared with other work)
MOVES_S = 30.0
# clos_regroup's two MILPs, first (k = 8: 1.1-2.7 s; a loaded k = 16: 13-19 s)
REGROUP_S = 20.0
REGROUP_SLOTS = 200_000  # clos_regroup on instances of at most this many slot options
# above this many slot options layer 2's chains come before clos_regroup (k = 8's 4,480: the
# MILPs first, 1.9 s, 69 moves; a loaded k = 16's 134,144: chains 1.2-1.3 s and 70 moves
# where the MILPs took 19 s for 51; at k = 4 the chains moved 11 where the MILPs moved 9)
CHAINS_FIRST_SLOTS = 20_000
MOVES_PER_EXCESS = 2  # a lower max is worth this many moved flows per flow above the bound


def clos_instance(fabric: Clos, jobs: list[Job], routes: list) -> tuple | None:
    """(problem, its load summary now, the routes in force as a ``ClosRouting``) of one auto
    group of ``jobs`` on ``fabric``; ``routes``: per flow of ``jobs`` its parts in force (Clos
    paths). Each flow is pinned to the plane of its route. None when a flow that leaves its
    leaf has no route in force, or a split one: nothing to start from."""
    pins = [fabric.part_plane(parts[0][0]) if parts and len(parts) == 1 else -1
            for parts in routes]
    problem = ClosProblem.build(fabric, jobs, skip_unroutable=True, pins=pins)
    previous = previous_routes(problem, routes)
    if min(previous.plane, default=0) < 0:
        return None
    alpha, count = score(problem, previous)
    return problem, {"max_link_load": alpha, "links_at_max": count}, previous


def clos_off_path(problem: ClosProblem, previous: ClosRouting, objective: str = "flows",
                  time_limit: float = OFF_PATH_S, moves_s: float = MOVES_S) -> ClosRouting:
    """The later stages (module docstring) from the routes in force ``previous``; its
    ``info``: ``off_path`` ("planning"), ``optimal`` (the max at the lower bound),
    ``to_the_bound`` (the MILP's, when it ran), layer 2's or (jobs) the search's.
    ``moves_s``: the MILP's time limit."""
    t0 = time.perf_counter()
    r = ClosRouting(list(previous.plane), list(previous.middle), list(previous.path), {})
    first = to_the_bound(problem, r, moves_s)
    if first is not None:
        r, first.info = first, {"to_the_bound": first.info}
    end = time.perf_counter() + time_limit
    start = score(problem, r)
    ms: dict = {}
    if objective == "jobs":  # from the routes in force (module docstring)
        info = r.info
        r = clos_jobs(problem, start=r)
        r.info = {**info, **r.info}
    elif first is None:  # after the MILP's moves, none for fewer links at the max
        r, ms = layer2(problem, r, start, end, end, milp=False)  # (r had no info to keep)
        r.info.pop("_layer2_proved")
        value = score(problem, r)[0]
        if value < start[0] - 1e-9:  # the max dropped: flows back home where it stays dropped
            r.info["homed"] = send_home(problem, r, previous, value, set())
    r.info.update(off_path="planning",
                  optimal=score(problem, r)[0] <= lower_bound(problem) + 1e-9,
                  ms={**ms, "off_path": round((time.perf_counter() - t0) * 1e3, 3)})
    return r


def to_the_bound(problem: ClosProblem, r: ClosRouting, time_limit: float = MOVES_S,
                 regroup_s: float = REGROUP_S) -> ClosRouting | None:
    """A routing of ``problem`` at its lower bound with few moves from ``r`` (the routes in
    force) when ``r``'s max is above the bound: ``clos_regroup``'s within ``regroup_s`` (on
    instances of at most ``REGROUP_SLOTS`` slot options) or layer 2's chains'
    (``chains_to``), the chains first above ``CHAINS_FIRST_SLOTS`` slot options; else the
    fewest-moves MILP's within
    ``time_limit`` (at most ``LAYER2_MILP_OPTIONS`` options), the first that moves at most
    ``MOVES_PER_EXCESS`` flows per flow above the bound (``excess``) once its moved flows
    went home where the bound holds (``clos_homing.send_home``, unless the MILP proved them
    fewest); else None. Its ``info``: the MILP's (``status``, ``wall_ms``...), ``method``
    ("chains", "regroup" or "milp"), ``moved_flows``, ``excess`` and ``homed``."""
    bound = lower_bound(problem)
    if score(problem, r)[0] <= bound + 1e-9:
        return None
    over = excess(problem, r, bound)
    slots = slot_count(problem)
    first = (("regroup", slots <= REGROUP_SLOTS), ("chains", True))
    for method, small in (*(first if slots <= CHAINS_FIRST_SLOTS else first[::-1]),
                          ("milp", option_count(problem) <= LAYER2_MILP_OPTIONS)):
        if not small:
            continue
        if method == "chains":
            few = chains_to(problem, r, bound)
        elif method == "regroup":
            few = regroup(problem, r, bound, regroup_s)
        else:
            few = fewest_moves(problem, r, bound, time_limit)
        if few is None:
            continue
        proven = method == "milp" and few.info["status"] == "optimal"
        homed = 0 if proven else send_home(problem, few, r, bound, set())
        moved = len(moved_flows(few, r))
        if moved <= MOVES_PER_EXCESS * over:
            few.info.update(method=method, moved_flows=moved, excess=over, homed=homed)
            return few
    return None


def chains_to(problem: ClosProblem, r: ClosRouting, bound: float,
              time_limit: float = OFF_PATH_S) -> ClosRouting | None:
    """Layer 2's ejection chains from ``r`` (``clos_auto.layer2`` without its MILP, within
    ``time_limit``; ``r`` unchanged): their routing when its max is at ``bound``, else None.
    Cheap, and enough where a failure left a few links over (a loaded k = 16: 1.3 s), not
    where every other option of a flow crosses two full links (k = 8: stays at 10)."""
    c = ClosRouting(list(r.plane), list(r.middle), list(r.path), {})
    end = time.perf_counter() + time_limit
    c, _ = layer2(problem, c, score(problem, c), end, end, milp=False)
    c.info.pop("_layer2_proved", None)
    if score(problem, c)[0] > bound + 1e-9:
        return None
    c.info["status"] = "chains"
    return c


def excess(problem: ClosProblem, r: ClosRouting, bound: float) -> int:
    """Flows above ``bound`` on the alive fabric links of ``r``, summed over the links (in
    flows: load above the bound times the link's capacity units).

    >>> from controller.model.clos import Clos
    >>> from controller.model.jobs import Job
    >>> from controller.planners.clos_auto import clos_auto
    >>> f = Clos.fat_tree(4)
    >>> p = ClosProblem.build(f, [Job("r", rings=[["h0_0", "h2_0", "h4_0"]], ring_bytes=1)])
    >>> r = clos_auto(p)  # 3 flows between pods, 4 fabric links each, 1 flow per link
    >>> excess(p, r, 0.0), excess(p, r, 1.0)
    (12, 0)
    """
    L = problem.links
    load = ClosLoads(problem, r).load[:L.count]
    fab = (L.tier > 0) & L.alive[:L.count]
    above = np.clip(load[fab] - bound, 0.0, None) * L.units[:L.count][fab]
    return int(np.ceil(above.sum() - 1e-9))


def clos_rank(problem: ClosProblem, r: ClosRouting, objective: str = "flows",
              predicted: dict | None = None) -> tuple:
    """A routing's rank on ``objective``, as ``churn.plan_rank`` on two tiers: (max link
    load, links at it); with "jobs" the predicted (mean, worst) job slowdown first
    (``clos_jobs.clos_slowdowns``, or ``predicted``)."""
    top, count = score(problem, r)
    if objective != "jobs":
        return top, count
    values = list((predicted or clos_slowdowns(problem, r)).values()) or [1.0]
    return sum(values) / len(values), max(values), top, count


def clos_moving(problem: ClosProblem, better: ClosRouting, previous: ClosRouting,
                objective: str = "flows") -> Moving:
    """``better`` (an off-path routing of ``problem``) judged against ``previous`` (the
    routes in force, ``clos_instance``) on ``objective``: each ranked once (``clos_rank``),
    its moved flows counted once (``clos_ilp_moves.moved_flows``) and weighed by
    ``churn.moving_gain``; ``paths`` (flow position -> its new parts) and ``why`` only when
    that finds the gain worth them."""
    before = clos_rank(problem, previous, objective)
    after = clos_rank(problem, better, objective, better.info.get("predicted_slowdown"))
    moved = len(moved_flows(better, previous))
    why = moved_why(moved, moving_gain(before, after, objective, moved))
    if why is None:
        return Moving(None, before, after, moved, None)
    paths = route_paths(problem, better)
    return Moving({pos: ((path, 1.0),) for pos, path in zip(problem.inter, paths)}, before,
                  after, moved, why)


def clos_better_paths(problem: ClosProblem, better: ClosRouting, previous: ClosRouting,
                      objective: str = "flows") -> Moving | None:
    """``clos_moving`` when ``better`` is worth its moved flows, else None (``OffPath.paths``
    on Clos fabrics)."""
    found = clos_moving(problem, better, previous, objective)
    return found if found.why is not None else None


def instance_doc(problem: ClosProblem, previous: ClosRouting, objective: str,
                 time_limit: float = OFF_PATH_S) -> dict:
    """What ``main`` needs to plan off the path in another process: the fabric, the jobs, the
    plane pins per flow and the routes in force by link ids (the same problem built again
    numbers its links alike)."""
    pins = [-1] * len(problem.flows)
    for i, pos in enumerate(problem.inter):
        pins[pos] = int(problem.pin[i]) if problem.pin is not None else -1
    return {"fabric": problem.fabric.to_dict(), "jobs": [j.to_dict() for j in problem.jobs],
            "pins": pins, "objective": objective, "time_limit": time_limit,
            "previous": {"plane": list(previous.plane), "middle": list(previous.middle),
                         "path": [list(p) for p in previous.path]}}


def main(argv=None) -> int:
    """``python -m controller.planners.clos_offpath FILE``: ``clos_off_path`` of the instance
    in FILE (``instance_doc``), its routing as JSON on stdout (``plane``, ``middle``,
    ``path``, ``info``)."""
    with open((argv or sys.argv[1:])[0]) as fh:
        doc = json.load(fh)
    fabric = Clos.from_dict(doc["fabric"])
    problem = ClosProblem.build(fabric, [parse_job(d, fabric) for d in doc["jobs"]],
                                skip_unroutable=True, pins=doc["pins"])
    prev = doc["previous"]
    if len(prev["plane"]) != len(problem):
        print(f"the instance has {len(problem)} inter-leaf flows, the routes in force "
              f"{len(prev['plane'])}", file=sys.stderr)
        return 2
    previous = ClosRouting(prev["plane"], prev["middle"], [tuple(p) for p in prev["path"]], {})
    r = clos_off_path(problem, previous, doc["objective"], doc["time_limit"])
    json.dump({"plane": [int(q) for q in r.plane], "middle": [int(m) for m in r.middle],
               "path": [[int(x) for x in p] for p in r.path], "info": r.info}, sys.stdout,
              default=lambda o: o.item() if hasattr(o, "item") else str(o))
    return 0


if __name__ == "__main__":
    sys.exit(main())
