"""The links and imbalance views on a Clos fabric (``model.clos``): every tier, in the shape of
the two-tier views (``views.links_view``, ``Telemetry.imbalance``) so that clients read both.

Planned load per directed switch link (flows and bytes per step, from the plan in force; a
split flow's part counts its share) next to the measured one (port counters); imbalance per
switch that has links up: (max - mean) / mean of the bytes its alive uplinks carried
(``uplinks``) and of the bytes that came down to it from the tier above (``downlinks``),
leaves and aggregation switches alike. On a fabric
with bundles the links view lists every alive member (``a->b``, ``a->b#m`` for member m > 0,
as ``ClosLinks.names``); the imbalance counts a bundle's bytes per alive member (its
capacity), so that a bundle of two carrying twice a single link's bytes is balanced.
"""
from __future__ import annotations

import numpy as np

from controller.model.clos import TIERS, Clos
from controller.model.loads import imbalance, leaf_imbalance
from controller.planners.clos_split_routing import split_link_loads
from controller.planners.plan import max_load

DEFINITION = ("per switch with uplinks (leaves; on three tiers aggregation switches too: "
              "per_switch, the leaves alone: per_leaf), (max - mean) / mean of the bytes on its "
              "alive uplinks (downlinks: from the tier above), a bundle's bytes divided by its "
              "alive members; max over switches and mean weighted by bytes; window = last "
              "polling interval, total = since start")


def clos_links_view(state, plan) -> dict:
    """GET /v1/links on a Clos fabric. O(links + planned flows x hops)."""
    f: Clos = state.fabric
    bundled = f.bundled  # members listed apart (a->b#m), else one entry per link
    flows, nbytes = {}, {}
    summary = {"max_link_load": 0, "links_at_max": 0}
    if plan is not None:
        p, r = plan.problem, plan.routing
        names = p.links.names
        split = getattr(r, "parts", None)
        for i, pos in enumerate(p.inter):
            for _q, _m, path, share in (split[i] if split else ((0, 0, r.path[i], 1.0),)):
                for link in path:  # a split flow's part counts its share
                    name = names[link] if bundled else names[link].partition("#")[0]
                    flows[name] = flows.get(name, 0.0) + share
                    nbytes[name] = nbytes.get(name, 0.0) + p.flows[pos].bytes * share
        alpha, at_max = max_load(split_link_loads(p, r)[p.links.tier > 0])
        summary = {"max_link_load": alpha, "links_at_max": at_max}  # as the plan document
    links = []
    for lower, upper in f.links():
        if (lower, upper) in f.down:
            continue
        tier = TIERS[f.tier_of[upper]]
        members = [m for m in range(f.bundle(lower, upper))
                   if (lower, upper, m) not in f.down] if bundled else [None]
        for m in members:
            for a, b in ((lower, upper), (upper, lower)):
                name = f"{a}->{b}" + (f"#{m}" if m else "")
                links.append({"link": name, "tier": tier, "flows": flows.get(name, 0.0),
                              "bytes": nbytes.get(name, 0.0),
                              "measured": state.telemetry.link(f, a, b, m)})
    return {"links": links, "summary": summary}


def clos_imbalance(telemetry, f: Clos) -> dict:
    """``Telemetry.imbalance`` over every switch with uplinks (leaves, aggregation switches)."""
    lower = [s for s in f.switches() if f.tier_of[s] < f.tiers - 1]
    ups = {s: [u for u in f.neighbours(s) if f.tier_of.get(u, -1) > f.tier_of[s]]
           for s in lower}
    width = max((len(u) for u in ups.values()), default=0)
    alive = np.zeros((len(lower), width), dtype=bool)
    capacity = np.ones((len(lower), width))
    for i, s in enumerate(lower):
        for j, u in enumerate(ups[s]):
            members = len(f.alive_members(s, u))
            alive[i, j], capacity[i, j] = members > 0, max(members, 1)
    out = {"samples": telemetry.samples}
    for window in ("window_bytes", "bytes"):
        up = np.zeros(alive.shape)
        down = np.zeros(alive.shape)
        for i, s in enumerate(lower):
            for j, u in enumerate(ups[s]):
                up[i, j] = telemetry.link(f, s, u).get(window) or 0
                down[i, j] = telemetry.link(f, u, s).get(window) or 0
        up, down = up / capacity, down / capacity
        name = "window" if window == "window_bytes" else "total"
        out[name] = {}
        for d, x in (("uplinks", up), ("downlinks", down)):
            per_switch = dict(zip(lower, leaf_imbalance(x, alive)[0]))
            out[name][d] = {**imbalance(x, alive), "per_switch": per_switch,
                            "per_leaf": {s: v for s, v in per_switch.items()
                                         if f.tier_of[s] == 0}}
    return out
