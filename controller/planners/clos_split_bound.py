"""``split``'s shortcut (``planners.clos_split``): an unsplit routing whose max load already
meets a bound that no split beats is the plan, and no LP is built.

Why: the path LP over commodities x (plane, middle) options is most of the planner's cost
and, when ``auto`` already routes every flow at one flow per link, it cannot gain anything:
the LP's alpha is never below ``split.FLOOR``. A shift permutation of 4,096 flows on MRC's 8
planes of 256 spines x 512 leaves took 38 s (37 s of CPU, a 4.0 GB peak) with its LPs, 1.8 s
(0.8 s of CPU, 1.1 GB) without (``python -m benchmarks.pathsets``, bench/pathsets.json).

The bounds: on flow counts max(``split.FLOOR``, ``cuts.split_bound``), the LP's floor and the
cut bound of a splittable routing (``clospaths.lower_bound`` without its rounding up: met by
``auto`` on full-bisection fabrics where the flows divide the links evenly); above the floor
only where every link ``auto`` has at the max is in a cut at the bound (``cuts.tight_links``),
as the LP's second layer would leave it. By bytes (the ``jobs`` objective, no floor)
``cuts.split_bound`` with each flow its bytes at the leaf links' rate: a candidate there
(``flows``, ``jobs-unsplit``) is an optimum of the byte LP, which is then skipped, the
prediction choosing among the other candidates as ever. It holds less often than on flow
counts: without a floor the byte LP spreads a permutation over every path, so a routing at
one flow per link is at the byte bound only where the flows fill every uplink of their
leaves (not MRC's shift: 8 flows a leaf over 2,048 uplinks).

Cost: O(F + cuts) numpy for a bound (``cuts.split_bound``), O(parts x hops) for a routing's
busiest link.

>>> from controller.model.clos import Clos
>>> from controller.model.clospaths import ClosProblem
>>> from controller.model.jobs import Flow, Job
>>> from controller.planners.clos_auto import clos_auto, score
>>> fab = Clos.leaf_spine(2, 4, 2, planes=2)            # a shift: one flow per link
>>> p = ClosProblem.build(fab, [Job("j", explicit=[
...     Flow("j", f"h{i}_{m}", f"h{(i + 1) % 4}_{m}", 1e6) for i in range(4) for m in range(2)])])
>>> start = clos_auto(p)
>>> r = unsplit_at_bound(p, start, score(p, start), 4)
>>> r.info["split"], r.info["max_link_load"], r.info["split_flows"]
('unsplit routing at the floor: no LP', 1.0, 0)
"""
from __future__ import annotations

import time

import numpy as np

from controller.model.clospaths import ClosProblem, ClosRouting, link_loads
from controller.model.cuts import split_bound, tight_links
from controller.planners.clos_split_routing import ClosSplitRouting, parts_of
from controller.planners.split import FLOOR

_TOL = 1e-9  # a max load this close above the bound meets it (relative)


def unsplit_at_bound(problem: ClosProblem, start: ClosRouting, key: tuple,
                     max_parts: int | None, t0: float | None = None) -> ClosSplitRouting | None:
    """``start`` (``auto``'s routing, its ``score`` ``key``) as the plan, unsplit, when its
    max load meets max(``FLOOR``, ``split_bound``): the fractional optimum then, so the LP
    cannot beat it; above the floor only where its links at the max are all in cuts at the
    bound (``tight_links``: at the max in every optimum, so no fewer with the LP's second
    layer); None otherwise. ``info`` as the LP's plan's, ``info["split"]`` why,
    ``wall_ms`` since ``t0`` (``time.perf_counter``; the bound's alone without)."""
    t0 = time.perf_counter() if t0 is None else t0
    cut = split_bound(problem)
    bound = max(FLOOR, cut)
    if not len(problem) or key[0] > bound * (1 + _TOL):
        return None
    held = None  # at the floor a link at the max carries a flow at its NIC's rate (step 2)
    if cut > FLOOR:  # above: where every link at the max is so in every optimum (step 2)
        at = np.flatnonzero(link_loads(problem, start) >= cut * (1 - _TOL))
        if not np.isin(at, tight_links(problem, cut)).all():
            return None
        held = len(np.unique(problem.links.cells().cell_of[at]))
    why = "the floor" if held is None else "the cut bound"
    info = {"method": "lp", "split": f"unsplit routing at {why}: no LP",
            "fractional_optimum": round(bound, 9), "max_link_load": key[0],
            "auto_max_link_load": key[0], "lp_ms": 0.0, "parts_bound": max_parts,
            "unbounded_max_link_load": key[0], "cells_held_at_max": held,
            "split_flows": 0, "subflows": 0, "max_parts": 1, "optimal": True,
            "wall_ms": round((time.perf_counter() - t0) * 1e3, 3)}
    return ClosSplitRouting(start.plane, start.middle, start.path, info, parts_of(start))


def busiest(problem: ClosProblem, routing: ClosSplitRouting, weight) -> float:
    """The max over fabric links of what ``routing``'s parts put there, each flow ``weight``
    per unit share, per unit of the link's capacity. O(parts x hops)."""
    L = problem.links
    ids, vals = [], []
    for w, parts in zip(weight, routing.parts):
        for _, _, path, share in parts:
            ids.extend(path)
            vals.extend([float(w) * share] * len(path))
    load = np.bincount(np.asarray(ids, dtype=np.int64), vals, minlength=L.count)[:L.count]
    return float((load / L.units).max(initial=0.0))


def byte_bound_met(problem: ClosProblem, weight, candidates: dict) -> tuple[str | None, float]:
    """The first of ``candidates`` (name -> ``ClosSplitRouting``) whose busiest link meets the
    byte cut bound (``split_bound`` with ``weight``), so an optimum of the byte LP (None: none
    does), and that bound."""
    bound = split_bound(problem, weight)
    for name, r in candidates.items():
        if busiest(problem, r, weight) <= bound * (1 + _TOL):
            return name, bound
    return None, bound
