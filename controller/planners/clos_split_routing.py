"""A Clos routing whose flows may be split, and its link loads (``split``, spraying, plans).

``ClosSplitRouting`` keeps each flow's parts (plane, middle, member links, share); the
functions count a part by its share. Apart from the split LP (``clos_split``) because plans,
views and the spraying baseline read split routings without planning them.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from controller.model.clospaths import ClosProblem, ClosRouting, link_loads

Part = tuple[int, int, tuple[int, ...], float]  # (plane, middle, member link ids, share)


@dataclass
class ClosSplitRouting(ClosRouting):
    """A ``ClosRouting`` whose flows may be split: ``parts[i]`` lists flow i's (plane, middle,
    members, share), shares summing to 1. ``plane``/``middle``/``path`` hold each flow's
    largest part, so code that reads them sees a valid unsplit routing (not the loads)."""
    parts: list[list[Part]] = field(default_factory=list)


def parts_of(routing: ClosRouting) -> list[list[Part]]:
    """Per flow its parts, one whole part for an unsplit routing."""
    if isinstance(routing, ClosSplitRouting):
        return routing.parts
    return [[(q, m, tuple(p), 1.0)] if p else []
            for q, m, p in zip(routing.plane, routing.middle, routing.path)]


def split_link_loads(problem: ClosProblem, routing: ClosRouting,
                     hosts: bool = False) -> np.ndarray:
    """``clospaths.link_loads`` with shares: flows per unit on every link, a part counting
    its share. O(parts x hops)."""
    if not isinstance(routing, ClosSplitRouting):
        return link_loads(problem, routing, hosts)
    return split_link_totals(problem, routing, hosts=hosts) / problem.links.units


def split_link_totals(problem: ClosProblem, routing: ClosRouting, weight: str = "flows",
                      hosts: bool = False) -> np.ndarray:
    """Flows (``weight`` "bytes": bytes) on every link id (``hosts``: host links too), a part
    counting its share, not per unit: what a plan's imbalance compares
    (``loads.clos_plan_imbalance``), as ``loads.link_loads`` on two tiers. O(parts x hops)."""
    ids, vals = [], []
    for i, (pos, parts) in enumerate(zip(problem.inter, parts_of(routing))):
        size = problem.flows[pos].bytes if weight == "bytes" else 1.0
        for q, _, path, share in parts:
            ids += path
            vals += [share * size] * len(path)
            if hosts:
                ids += problem.host_links(i, q)
                vals += [share * size] * 2
    return np.bincount(np.asarray(ids, dtype=np.int64), np.asarray(vals, dtype=float),
                       minlength=problem.links.count)


def split_score(problem: ClosProblem, routing: ClosRouting) -> tuple[float, int]:
    """``clos_auto.score`` with shares: (max fabric load, links within 1e-9 of it)."""
    fab = split_link_loads(problem, routing)[problem.links.tier > 0]
    alpha = float(fab.max()) if fab.size else 0.0
    return round(alpha, 9), int(np.count_nonzero(fab >= alpha - 1e-9)) if alpha > 0 else 0
