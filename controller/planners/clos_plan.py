"""Run a path planner on jobs over a Clos fabric and describe the result in the routes format.

A route on a two-tier plane keeps ``"spine"`` as on today's fabrics; a route over three tiers
gives ``"path"``, the switches from the source leaf to the destination leaf (both included);
``"plane"`` names the plane when there are several, ``"members"`` the bundle member of each hop
when a bundle has several links. An intra-leaf flow has ``"spine": null``.
"""
from __future__ import annotations

import time
from dataclasses import dataclass

from controller.model.clos import Clos
from controller.model.clospaths import (
    ClosProblem,
    ClosRouting,
    flow_links,
    lower_bound,
)
from controller.model.iteration import predict_clos_split_times
from controller.model.jobs import Job
from controller.model.loads import clos_plan_imbalance, load_fields
from controller.planners.clos_split import (
    ClosSplitRouting,
    split_link_loads,
    split_link_totals,
    split_score,
)
from controller.planners.registry import CLOS, clos_options, planner_for


@dataclass
class ClosPlan:
    algorithm: str
    problem: ClosProblem
    routing: ClosRouting
    runtime_ms: float

    def parts_by_flow(self) -> list[tuple]:
        """Per flow its ((link ids, host links included), 1.0) part: what the fluid model
        (``model.fluid``) runs a Clos plan on."""
        p, r = self.problem, self.routing
        index = {pos: i for i, pos in enumerate(p.inter)}
        L = p.links
        out: list = []
        for k, f in enumerate(p.flows):
            if k in index and isinstance(r, ClosSplitRouting):
                i = index[k]
                out.append(tuple((tuple(int(x) for x in (p.host_links(i, q)[0], *path,
                                                         p.host_links(i, q)[1])), w)
                                 for q, _, path, w in r.parts[i]))
            elif k in index:
                out.append(((tuple(int(x) for x in flow_links(p, r, index[k])), 1.0),))
            elif k in p.intra:
                q = p.intra[k]
                out.append((((int(L.host_up[q, L.host_id[f.src]]),
                               int(L.host_down[q, L.host_id[f.dst]])), 1.0),))
            else:
                out.append(None)
        return out

    def routes(self) -> list[dict]:
        p, r = self.problem, self.routing
        index = {pos: i for i, pos in enumerate(p.inter)}
        several = len(p.fabric.planes) > 1
        out = []
        for k, f in enumerate(p.flows):
            doc = {"job": f.job, "src": f.src, "dst": f.dst}
            if (f.proto, f.sport, f.dport) != (6, 0, 0):
                doc.update(proto=f.proto, sport=f.sport, dport=f.dport)
            i = index.get(k)
            if i is None:
                doc["spine"] = None
                q = p.intra.get(k)
                if several and q is not None:
                    doc["plane"] = p.fabric.planes[q].name
                out.append(doc)
                continue
            parts = r.parts[i] if isinstance(r, ClosSplitRouting) else ()
            if len(parts) > 1:  # a split flow: its parts instead of "spine" / "path"
                doc["split"] = [_route(p, i, q, m, path, several) | {"share": round(w, 9)}
                                for q, m, path, w in parts]
            else:
                doc.update(_route(p, i, r.plane[i], r.middle[i], r.path[i], several))
            out.append(doc)
        return out

    def predicted_times(self, on_event=None) -> dict[str, float]:
        """The shared prediction per job on split routes
        (``model.iteration.predict_clos_split_times``), as ``Plan.predicted_times``."""
        return predict_clos_split_times(self.problem, self.routing, on_event)

    def to_dict(self) -> dict:
        """The plan document, with the fields of ``Plan.to_dict``: the loads over the fabric
        links (``loads.load_fields``), the imbalance over the uplinks of every leaf and
        aggregation switch (``loads.clos_plan_imbalance``)."""
        p, r = self.problem, self.routing
        alpha, at_max = split_score(p, r)
        bound = lower_bound(p)
        totals = {w: split_link_totals(p, r, w) for w in ("bytes", "flows")}
        doc = {"algorithm": self.algorithm, "routes": self.routes(),
               "max_link_load": alpha, "links_at_max": at_max, "lower_bound": round(bound, 9),
               **load_fields(alpha, bound, split_link_loads(p, r), p.links.tier),
               "runtime_ms": round(self.runtime_ms, 3), "flows": len(p.flows),
               "inter_leaf_flows": len(p), "imbalance": clos_plan_imbalance(p.links, totals),
               "fabric": p.fabric.summary()}
        if r.info:
            doc["info"] = r.info
        return doc


def _route(p: ClosProblem, i: int, q: int, m: int, path, several: bool) -> dict:
    """The route fields of flow i over middle m of plane q with member links ``path``."""
    doc: dict = {}
    switches = p.middle_name(i, q, m)
    if len(switches) == 3 and not p.fabric.planes[q].cores:
        doc["spine"] = switches[1]
    else:
        doc["path"] = switches
    if several:
        doc["plane"] = p.fabric.planes[q].name
    members = [_member(p, x) for x in path]
    if any(members):
        doc["members"] = members
    return doc


def _member(problem: ClosProblem, link: int) -> int:
    _, _, m = problem.links.names[link].partition("#")
    return int(m) if m else 0


def make_clos_plan(fabric: Clos, jobs: list[Job], algorithm: str = "auto",
                   salt: int = 0, **options) -> ClosPlan:
    """The plan of ``jobs`` by the Clos planner of ``algorithm`` (``registry.planner_for``: an
    InputError names what it refuses); ``salt`` and ``options`` (seed, max_parts, time_limit)
    go to the planners that take them."""
    fn = planner_for(algorithm, CLOS)
    problem = ClosProblem.build(fabric, jobs)
    t0 = time.perf_counter()
    routing = fn(problem, **clos_options(algorithm, salt=salt, **options))
    return ClosPlan(algorithm, problem, routing, (time.perf_counter() - t0) * 1e3)
