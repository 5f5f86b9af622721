"""What a plan does to the fabric: per directed leaf-spine link the flow count (in flow units,
a split part counts its share) and the bytes, the sorted load vector, and path imbalance.
``link_flows`` is the count of an unsplit routing (a spine per flow) that the planners' max
load, links at it and load vectors are read from.

Path imbalance (ours, in the spirit of FlowTracer; paper.md section 7): for leaf l with alive
uplinks carrying B_u each, I_l = (max B_u - mean B_u) / mean B_u, 0 when no bytes. Reported as
the maximum over leaves and the mean weighted by each leaf's bytes, over uplinks and downlinks,
for bytes and for flow counts.

The plan document (``planners.plan.Plan``, any Clos) takes its load fields from the helpers
here, over the directed switch links: ``links_at_max`` (within ``AT_MAX_TOL``, relative),
``bound_doc`` (the lower bound, an integer when whole), ``load_fields`` (gap, max load per link
tier, load histogram) and ``imbalance_doc`` (the imbalance above); ``load_summary`` and
``plan_imbalance`` give the same on the two-tier model (``Problem``, ``Assignment``). On a
Clos a switch with uplinks is a leaf or, on three tiers, an aggregation switch, and a bundle's
load is divided by its alive members (``clos_plan_imbalance``), as ``GET /v1/imbalance``
measures it; on a leaf-spine that is the leaves' imbalance above.
"""
from __future__ import annotations

from collections import Counter
from collections.abc import Sequence

import numpy as np

from controller.model.clos import TIERS
from controller.model.problem import Assignment, Problem

TOL = 1e-9
AT_MAX_TOL = 1e-6  # relative: LP-based split plans leave loads a few 1e-8 below their max


def link_flows(problem: Problem, spines: Sequence[int]) -> list[int]:
    """Flows per directed leaf-spine link of an unsplit routing (a spine per inter-leaf flow,
    ``Problem.inter`` order): uplinks at ``leaf * S + spine``, then downlinks at ``L * S + leaf
    * S + spine`` (``planners.repair.Routing``'s numbering). O(F + L S).

    >>> from controller.model.clos import Clos
    >>> from controller.model.jobs import Job
    >>> p = Problem.build(Clos.generate(2, 2, 2).as_leaf_spine(), [Job("r", rings=[["h0_0", "h1_0", "h0_1",
    ...                                                                "h1_1"]], ring_bytes=1)])
    >>> link_flows(p, [0, 0, 0, 1]), max_link_flows(p, [0, 0, 0, 1])
    ([2, 0, 1, 1, 1, 1, 2, 0], 2)
    """
    S = len(problem.fabric.spines)
    LS = len(problem.fabric.leaves) * S
    out = [0] * (2 * LS)
    for a, b, s in zip(problem.src_leaf, problem.dst_leaf, spines):
        out[a * S + s] += 1
        out[LS + b * S + s] += 1
    return out


def max_link_flows(problem: Problem, spines: Sequence[int]) -> int:
    """Flows on the busiest directed leaf-spine link of an unsplit routing (0: none)."""
    return max(link_flows(problem, spines), default=0)


def link_loads(problem: Problem, assignment: Assignment, weight: str = "flows"):
    """(up, down) arrays of shape (leaves, spines): flow units or bytes per directed link."""
    shape = (len(problem.fabric.leaves), len(problem.fabric.spines))
    up, down = np.zeros(shape), np.zeros(shape)
    for k, parts in enumerate(assignment.parts):
        a, b = problem.src_leaf[k], problem.dst_leaf[k]
        size = problem.flows[problem.inter[k]].bytes if weight == "bytes" else 1.0
        for s, share in parts:
            up[a, s] += share * size
            down[b, s] += share * size
    return up, down


def alive_links(fabric) -> np.ndarray:
    """Boolean (leaves, spines): the leaf-spine link is up."""
    return np.array([[bool(m >> s & 1) for s in range(len(fabric.spines))]
                     for m in fabric.up_mask])


def links_at_max(loads: np.ndarray, tol: float = AT_MAX_TOL) -> int:
    """Directed links whose load is within ``tol`` x max(alpha, 1) of the max alpha: floating-point
    shares (split plans) count as at the max when they are there up to rounding.

    >>> links_at_max(np.array([1.25, 1.2499999999, 1.0, 0.0]))
    2
    >>> links_at_max(np.array([1.25, 1.2499999999, 1.0]), tol=1e-12)
    1
    """
    alpha = float(loads.max()) if loads.size else 0.0
    if alpha <= 0:
        return 0
    return int(np.count_nonzero(loads >= alpha - tol * max(alpha, 1.0)))


def load_histogram(loads: np.ndarray) -> dict[str, int]:
    """Links per load (rounded to 1e-6, as a string key), highest first; unloaded links left out.

    >>> load_histogram(np.array([2.0, 1.0, 0.0, 2.0, 1 / 3]))
    {'2.0': 2, '1.0': 1, '0.333333': 1}
    """
    rounded = Counter(round(float(v), 6) for v in loads[loads > TOL])
    return {str(k): v for k, v in sorted(rounded.items(), reverse=True)}


def bound_doc(bound: float) -> int | float:
    """A lower bound as plan documents give it, alike on every model: an integer when it is a
    whole number of flows per link (always on a cut of links of the leaf tier's speed), else
    rounded to 1e-9 like the loads. Nothing is lost: a whole bound is exact as an integer.

    >>> bound_doc(3.0), bound_doc(4 / 3), bound_doc(0.0)
    (3, 1.333333333, 0)
    """
    return int(bound) if bound == int(bound) else round(bound, 9)


def load_fields(alpha: float, bound: float, loads: np.ndarray, tiers: np.ndarray) -> dict:
    """A plan document's fields past its max link load ``alpha``, links at it and lower bound
    ``bound``, alike on every model: ``gap`` (alpha minus the bound, 0 at or below it: a split
    plan may go below a bound on unsplit routings), ``max_load_by_tier`` (the max load on the
    links of each switch tier present, named as ``clos.TIERS``: ``leaf`` the links between
    leaves and the tier above, spines or aggregation switches; ``core`` those between
    aggregation switches and cores) and ``load_histogram``. ``loads`` per directed switch link
    (flows per unit of leaf-link capacity), ``tiers`` their ``clos.TIERS`` index (host links,
    0, left out).

    >>> doc = load_fields(2.0, 1, np.array([2.0, 1.0, 0.5, 0.0]), np.array([1, 1, 2, 2]))
    >>> doc["gap"], doc["max_load_by_tier"], doc["load_histogram"]
    (1.0, {'leaf': 2.0, 'core': 0.5}, {'2.0': 1, '1.0': 1, '0.5': 1})
    """
    fabric = tiers > 0
    return {"gap": round(max(alpha - bound, 0.0), 9),
            "max_load_by_tier": {TIERS[t]: round(float(loads[tiers == t].max()), 9)
                                 for t in (1, 2) if np.any(tiers == t)},
            "load_histogram": load_histogram(loads[fabric])}


def load_summary(problem: Problem, assignment: Assignment, tol: float = AT_MAX_TOL) -> dict:
    """The load fields of a two-tier plan document: every directed leaf-spine link is of the
    ``leaf`` tier."""
    up, down = link_loads(problem, assignment)
    loads = np.concatenate([up.ravel(), down.ravel()])
    alpha = round(float(loads.max()) if loads.size else 0.0, 9)
    bound = problem.lower_bound()
    return {
        "max_link_load": alpha,
        "links_at_max": links_at_max(loads, tol),
        "lower_bound": bound,
        **load_fields(alpha, bound, loads, np.ones(loads.size, dtype=np.int8)),
    }


def sorted_load_vector(problem: Problem, assignment: Assignment) -> list[float]:
    up, down = link_loads(problem, assignment)
    return sorted(np.concatenate([up.ravel(), down.ravel()]).tolist(), reverse=True)


def leaf_imbalance(per_link: np.ndarray, alive: np.ndarray) -> tuple[list[float], list[float]]:
    """Per leaf (row): (max - mean) / mean over its alive links, and its total as a weight."""
    values, weights = [], []
    for row, ok in zip(per_link, alive):
        b = row[ok]
        total = float(b.sum())
        if b.size == 0 or total <= 0:
            values.append(0.0)
            weights.append(0.0)
            continue
        mean = total / b.size
        values.append(float((b.max() - mean) / mean))
        weights.append(total)
    return values, weights


def imbalance(per_link: np.ndarray, alive: np.ndarray) -> dict:
    """Per-leaf imbalance of a (leaves, spines) array over the alive links: max and weighted mean."""
    values, weights = leaf_imbalance(per_link, alive)
    w = np.asarray(weights)
    v = np.asarray(values)
    return {"max": float(v.max()) if v.size else 0.0,
            "mean": float((v * w).sum() / w.sum()) if w.sum() > 0 else 0.0}


def imbalance_doc(per_weight: dict[str, tuple[np.ndarray, np.ndarray]],
                  alive: np.ndarray) -> dict:
    """A plan document's ``imbalance``: per weight (``bytes``, ``flows``) ``imbalance`` of its
    (up, down) arrays, (switches with uplinks, uplinks) each, over the ``alive`` links."""
    return {weight: {"uplinks": imbalance(up, alive), "downlinks": imbalance(down, alive)}
            for weight, (up, down) in per_weight.items()}


def plan_imbalance(problem: Problem, assignment: Assignment) -> dict:
    """Predicted imbalance of a plan (the controller measures the same from port counters)."""
    return imbalance_doc({w: link_loads(problem, assignment, w) for w in ("bytes", "flows")},
                         alive_links(problem.fabric))


def clos_plan_imbalance(links, per_link: dict[str, np.ndarray]) -> dict:
    """``imbalance_doc`` of a Clos plan, ``per_link`` giving per weight the flows (bytes) on
    every link id: per switch with uplinks (``ClosLinks.uplink_members``) each uplink's (and
    downlink's) total over its members divided by its alive members, over the uplinks with a
    member alive."""
    up, down = links.uplink_members()
    alive_member = (up >= 0) & links.alive[links.sentinel(up)]
    members = alive_member.sum(axis=-1)
    alive = members > 0
    per_weight = {}
    for weight, values in per_link.items():
        v = np.append(np.asarray(values, dtype=float), 0.0)  # the sentinel id carries nothing
        per_weight[weight] = tuple(v[links.sentinel(ids)].sum(axis=-1) / np.maximum(members, 1)
                                   for ids in (up, down))
    return imbalance_doc(per_weight, alive)
