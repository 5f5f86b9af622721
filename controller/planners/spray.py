"""``spray``: per-packet spraying over every alive path (OpenAI's MRC, Ultra Ethernet's packet
spraying) as the fluid LP bound, with a goodput penalty: the baseline a planned fabric must
beat or match (issue 60, item 5). A baseline, not a planner the controller installs: the NICs
spray, the switches only forward; ``compare``, ``make paper`` and the results page show it.

What: every flow splits its bytes over its alive (plane, middle) options. Its shares come from
the linear program that minimises alpha, the largest load (flows per unit of capacity) on any
directed link, the hosts' ports included: a port carries at most its speed, so a flow sprayed
over two planes, or over fabric links slower than its NIC, sends faster than one link lets a
whole flow. A sprayed flow is one transfer at one rate r, putting share x r on the links of each
part (the coupled model of ``model.iteration``, not independent sub-connections as ``split``'s
parts are), so every flow reaching r = leaf rate / alpha is feasible, and no split routing gives
its slowest flow more: alpha* is the first level of max-min fairness over every split routing,
what ideal adaptive spraying reaches. The links below alpha* are then spread lexicographically
(the least max load among them, holding alpha*, and so on, at most ``LEVELS`` LPs): a flow
that the bound leaves room for, such as one elephant beside busy rings, sprays over every path
that has room, not over one a vertex of the first LP happens to pick. Every flow of a commodity
(the same leaves in every plane and, with several planes, the same hosts) sprays in its
commodity's shares; a part takes the link of every hop (with bundles the least loaded member,
``clos_split``'s members). Above the slowest flow the rates are those of these shares in the
coupled model: a bound on the slowest flow, not on every flow.

Penalty: the bytes spraying costs beyond the payload, retransmitted and out-of-order-handled
bytes, as a fraction ``penalty`` of the bytes on the wire: a flow of S bytes sends
S / (1 - penalty) (``sprayed_jobs``), so its goodput is (1 - penalty) of the bound. No source we
read gives a goodput loss for MRC or Ultra Ethernet: Ultra Ethernet's transport places every
packet at its memory address, so reordering needs no reorder buffer (Hoefler et al., "Ultra
Ethernet's Design Principles and Architectural Innovations", arXiv 2508.08906, 2025), and what
remains is retransmission after trimmed or lost packets, which depends on congestion. The default
``DEFAULT_PENALTY`` (1%) is therefore an assumption: the results page shows the sensitivity and
the break-even penalty, where spraying and a plan tie.

Cost: the options O(F x planes x middles) numpy; at most ``LEVELS`` LPs (2-8 in the cases
measured) of (commodities x usable options) variables and (used cells + used ports +
commodities) rows, HiGHS's interior point method without crossover (about 1 s each at a k = 16
fat-tree's 896 flows); the parts O(parts x hops) numpy (with bundles O(parts x hops x members)).

>>> from controller.model.clos import Clos
>>> from controller.model.jobs import Flow, Job
>>> fab = Clos.leaf_spine(2, 2, 3)                 # l0 sends 3 flows over 2 spines
>>> job = Job("j", explicit=[Flow("j", f"h0_{k}", f"h1_{k}", 1e6) for k in range(3)])
>>> r = spray(ClosProblem.build(fab, [job]))
>>> r.info["alpha"], r.info["max_link_load"], [len(p) for p in r.parts]
(1.5, 1.5, [2, 2, 2])
>>> doc = fab.to_dict() | {"link_gbps": {"host": 400, "leaf": 100}}   # one elephant, 400G NIC
>>> elephant = Job("e", explicit=[Flow("e", "h0_0", "h1_0", 1e6)])
>>> p = spray_plan(Clos.from_dict(doc), [elephant], penalty=0.0)
>>> p.routing.info["alpha"], round(slowest_goodput_bps(p) * 8 / 1e9, 6)   # 2 x 100G
(0.5, 200.0)
"""
from __future__ import annotations

import time
import warnings
from dataclasses import replace

import numpy as np

from controller.errors import InputError
from controller.model.clos import as_clos
from controller.model.clospaths import ClosProblem
from controller.model.jobs import Job
from controller.model.rates import weighted_max_min
from controller.planners.clos_loads import hop_rows, paths_of
from controller.planners.clos_split import _members, _Options, cell_capacity
from controller.planners.clos_split_routing import ClosSplitRouting, split_score
from controller.planners.lp import TOL
from controller.planners.plan import Plan

DEFAULT_PENALTY = 0.01  # an assumption, not a measured figure (module docstring)
LEVELS = 8  # LPs of the lexicographic min-max at most: the first is the bound, the rest spread
_LEVEL_TOL = 1e-6  # a row this close (relative) to a level's z is at it
_SHARE_TOL = 1e-7  # a flow's share below this is dropped (the interior point's dust)
_SLACK = 1e-9  # a held row's room above its level
_HOLD_TOL = 1e-7  # ... and where the next LP fails so, this much of it (relative) too


def spray(problem: ClosProblem, time_limit: float | None = None,
          levels: int = LEVELS) -> ClosSplitRouting:
    """Every flow of ``problem`` sprayed in the shares of the lexicographic LP (module
    docstring), at most ``levels`` LPs; ``info``: ``alpha`` (the max load over every link of
    the routing, ports included: the slowest flow sends at leaf rate / alpha), ``lp_alpha``
    (the LP's optimum of it; smaller only where a bundle's members are uneven),
    ``max_link_load`` (over the fabric links), ``port_bound`` (the ports' load that no split
    changes), ``levels`` (LPs solved), ``lp_stopped`` (None, or why a later level ended the
    levels: ``_LexLP.solve``), ``split_flows``, ``parts``, ``lp_ms``, ``wall_ms``."""
    t0 = time.perf_counter()
    port = _port_loads(problem)
    bound = _max(port)
    if not len(problem):
        return ClosSplitRouting([], [], [], {"method": "spray", "alpha": bound}, [])
    several = len(problem.fabric.planes) > 1
    com, first = _commodities(problem, several)
    opts = _Options(problem, first)
    demand = np.bincount(com, minlength=len(first)).astype(float)
    lp = _LexLP(opts, demand, *_rows(problem, opts, first, port, several))
    t1 = time.perf_counter()
    alpha, x, solved = lp.solve(levels, time_limit)
    lp_ms = (time.perf_counter() - t1) * 1e3
    r = _routing(problem, _shares(com, opts, demand, x))
    fabric_max = split_score(problem, r)[0]
    ports = _max(_sprayed_port_loads(problem, r, port)) if several else bound
    sizes = [len(p) for p in r.parts]
    r.info = {"method": "spray", "alpha": round(max(fabric_max, ports), 6),
              "lp_alpha": round(max(alpha, bound), 6), "max_link_load": round(fabric_max, 6),
              "port_bound": round(bound, 9), "levels": solved, "lp_stopped": lp.stopped,
              "split_flows": sum(s > 1 for s in sizes), "parts": sum(sizes),
              "lp_ms": round(lp_ms, 3), "wall_ms": round((time.perf_counter() - t0) * 1e3, 3)}
    return r


def sprayed_jobs(jobs: list[Job], penalty: float = DEFAULT_PENALTY) -> list[Job]:
    """``jobs`` with the bytes spraying puts on the wire: every flow's bytes / (1 - penalty).

    >>> sprayed_jobs([Job("r", rings=[["a", "b"]], ring_bytes=99.0)], 0.01)[0].ring_bytes
    100.0
    """
    if isinstance(penalty, bool) or not isinstance(penalty, (int, float)) \
            or not 0 <= penalty < 1:
        raise InputError(f"spray: the penalty must be a fraction in [0, 1), got {penalty!r}")
    k = 1.0 / (1.0 - penalty)
    return [replace(j, ring_bytes=j.ring_bytes * k,
                    explicit=[replace(f, bytes=f.bytes * k) for f in j.explicit]) for j in jobs]


def spray_plan(fabric, jobs: list[Job], penalty: float = DEFAULT_PENALTY,
               time_limit: float | None = None) -> Plan:
    """The ``Plan`` of ``jobs`` sprayed on ``fabric`` (any shape, a ``Clos`` or its two-tier
    view): its problem holds the jobs with their wire bytes (``sprayed_jobs``), so every
    prediction on it pays the penalty; a flow without an alive path has no route."""
    wire = sprayed_jobs(jobs, penalty)
    problem = ClosProblem.build(as_clos(fabric), wire, skip_unroutable=True)
    t0 = time.perf_counter()
    routing = spray(problem, time_limit)
    routing.info["penalty"] = penalty
    return Plan("spray", problem, routing, (time.perf_counter() - t0) * 1e3)


def coupled_rates(plan: Plan) -> np.ndarray:
    """Per routed flow its max-min rate (bytes/s on the wire) when each flow is one transfer
    whose part of share x puts x times its rate on the part's links (host links included):
    how a sprayed flow shares the fabric. On an unsplit plan, ``rates.max_min_rates``."""
    from scipy.sparse import coo_matrix
    parts = [p for p in plan.parts_by_flow() if p]
    links = plan.problem.links
    rows, cols, vals = [], [], []
    for k, flow in enumerate(parts):
        w: dict[int, float] = {}
        for path, share in flow:
            for y in path:
                w[y] = w.get(y, 0.0) + share
        rows += [k] * len(w)
        cols += list(w)
        vals += list(w.values())
    a = coo_matrix((vals, (rows, cols)), shape=(len(parts), links.count)).tocsr()
    return weighted_max_min(a, a.T.tocsr(), links.capacity_bps(), np.ones(len(parts), bool))


def slowest_goodput_bps(plan: Plan) -> float:
    """The slowest flow's goodput of a spray plan (``coupled_rates`` less its penalty), 0.0
    without flows."""
    rates = coupled_rates(plan)
    return float(rates.min()) * (1.0 - plan.routing.info.get("penalty", 0.0)) if len(rates) else 0.0


# ---- the LP ---------------------------------------------------------------------------------
def _commodities(problem: ClosProblem, by_host: bool) -> tuple[np.ndarray, np.ndarray]:
    """(commodity per flow, one representative per commodity): the same leaves in every plane
    and the same pin; with ``by_host`` the same hosts too (their ports are in the LP)."""
    cols = [e for q in range(len(problem.fabric.planes)) for e in problem.end_arrays(q)[:2]]
    if by_host:
        cols += [np.asarray(problem.src), np.asarray(problem.dst)]
    if problem.pin is not None:
        cols.append(problem.pin)
    _, first, inverse = np.unique(np.stack(cols, axis=1), axis=0, return_index=True,
                                  return_inverse=True)
    return inverse.ravel(), first


def _port_loads(problem: ClosProblem) -> np.ndarray:
    """Flows per unit on every host link that does not depend on the split: the flows within
    a leaf, and on one plane every flow."""
    L = problem.links
    load = np.zeros(L.count)
    for pos, q in problem.intra.items():
        f = problem.flows[pos]
        load[L.host_up[q, L.host_id[f.src]]] += 1
        load[L.host_down[q, L.host_id[f.dst]]] += 1
    if len(problem.fabric.planes) == 1 and len(problem):
        np.add.at(load, L.host_up[0, problem.src], 1)
        np.add.at(load, L.host_down[0, problem.dst], 1)
    return load / L.units


def _sprayed_port_loads(problem: ClosProblem, r: ClosSplitRouting, port: np.ndarray):
    load = port * problem.links.units
    for i, parts in enumerate(r.parts):
        for q, _, _, share in parts:
            up, down = problem.host_links(i, q)
            load[up] += share
            load[down] += share
    return load / problem.links.units


def _max(loads: np.ndarray) -> float:
    return float(loads.max(initial=0.0))


def _rows(problem, opts, first, port, several):
    """Per option its rows (V, 4 or 6): its hop cells, then with several planes its two ports
    as rows past the cells (-1: none); per row its capacity (units) and fixed load (flows)."""
    L = problem.links
    cell_cap = cell_capacity(problem)
    rows, cap, base = opts.rows, cell_cap, np.zeros(len(cell_cap))
    if several:
        c = len(cell_cap)
        src, dst = np.asarray(problem.src)[first], np.asarray(problem.dst)[first]
        up = L.host_up[opts.plane, src[opts.owner]]
        down = L.host_down[opts.plane, dst[opts.owner]]
        rows = np.column_stack([rows, c + up, c + down])
        cap = np.concatenate([cell_cap, L.units * L.alive[:L.count]])
        base = np.concatenate([base, port * L.units])
    return rows, cap, base


class _LexLP:
    """The lexicographic min-max of the loads (flows per unit) of the rows the options use:
    min z with every free row at most z, solved by HiGHS's interior point method without
    crossover, whose answer lies inside the optimal face: a row at z there is at z in every
    optimum, so it is held at z and the other rows are minimised again, level by level. The
    shares of the last level are spread over every option the optimum leaves room on."""

    def __init__(self, opts, demand, rows, cap, base):
        from scipy.sparse import coo_matrix
        V = len(opts.owner)
        var = np.repeat(np.arange(V), rows.shape[1])
        row = rows.ravel()
        keep = row >= 0
        var, row = var[keep], row[keep]
        used, link = np.unique(row, return_inverse=True)
        self.n, self.V = len(used), V
        self.a = coo_matrix((1.0 / cap[row], (link, var)), shape=(self.n, V)).tocsr()
        self.fixed = base[used] / cap[used]
        self.a_eq = coo_matrix((np.ones(V), (opts.owner, np.arange(V))),
                               shape=(len(demand), V + 1)).tocsr()
        self.demand = demand

    def solve(self, levels: int, time_limit: float | None) -> tuple[float, np.ndarray, int]:
        """(the first level: the bound, the shares of the last level solved, levels solved).
        Held at exactly a level's z, the next LP can be infeasible or unfinished by the
        interior point's own error (3 of the 24 realistic 64 x 32 cells of ``make paper``):
        the held rows then get ``_HOLD_TOL`` of their level (relative) and the LP is solved
        again. A level after the first the solver still does not finish ends the levels: the
        shares of the one before stand (``stopped``)."""
        limit = np.full(self.n, np.nan)  # nan: free (at most z)
        level = np.zeros(self.n)  # a held row's level
        first, x, solved = None, None, 0
        self.stopped, relaxed = None, False
        while solved < max(1, levels):
            try:
                z, x_level = self._lp(limit, time_limit)
            except InputError as e:
                if first is None:
                    raise
                if not relaxed:
                    held = ~np.isnan(limit)
                    limit[held] = level[held] * (1 + _HOLD_TOL) + _SLACK
                    relaxed = True
                    continue
                self.stopped = str(e)
                break
            x = x_level
            solved += 1
            first = z if first is None else first
            free = np.isnan(limit)
            load = self.a @ x + self.fixed
            at = free & (load >= z - _LEVEL_TOL * max(1.0, z))
            if not at.any():  # the solver's tolerance: the busiest free row
                at[np.flatnonzero(free)[np.argmax(load[free])]] = True
            if z <= TOL or at.sum() == free.sum():
                break
            level[at] = z
            limit[at] = z * (1 + _HOLD_TOL) + _SLACK if relaxed else z + _SLACK
        return first, x, solved

    def _lp(self, limit, time_limit):
        # imported here: scipy.optimize takes about 0.3 s to import, a fifth of the controller's
        # start
        from scipy.optimize import OptimizeWarning, linprog
        from scipy.sparse import coo_matrix, hstack
        free = np.flatnonzero(np.isnan(limit))
        z_col = coo_matrix((-np.ones(len(free)), (free, np.zeros(len(free), dtype=np.int64))),
                           shape=(self.n, 1))
        a_ub = hstack([self.a, z_col]).tocsr()
        b_ub = np.where(np.isnan(limit), 0.0, limit) - self.fixed
        c = np.zeros(self.V + 1)
        c[self.V] = 1.0
        options = {"presolve": True, "run_crossover": "off"}  # HiGHS's own option, verbatim
        if time_limit:
            options["time_limit"] = float(time_limit)
        with warnings.catch_warnings():  # linprog warns that it passes run_crossover on
            warnings.simplefilter("ignore", OptimizeWarning)
            res = linprog(c, A_ub=a_ub, b_ub=b_ub, A_eq=self.a_eq, b_eq=self.demand,
                          bounds=[(0, None)] * (self.V + 1), method="highs-ipm", options=options)
        if res.status != 0:
            raise InputError(f"spray: the LP ended with status {res.status} ({res.message})")
        return float(res.x[self.V]), np.clip(res.x[:self.V], 0.0, None)


def _routing(problem: ClosProblem, shares: list[dict]) -> ClosSplitRouting:
    """The parts of ``shares`` (per flow {(plane, middle): share}) on their links: without
    bundles a hop's one link (numpy per plane), with bundles its least loaded member
    (``clos_split``'s members, a loop over parts). Each flow's parts largest first."""
    cells = problem.links.cells()
    if cells.width > 1:
        return _members(problem, shares)
    flat = [(i, q, m, w) for i, s in enumerate(shares) for (q, m), w in s.items()]
    flat.sort(key=lambda t: (t[0], -t[3], t[1], t[2]))
    idx, plane, middle = (np.array([t[k] for t in flat], dtype=np.int64) for k in range(3))
    paths: list = [()] * len(flat)
    for q in np.unique(plane).tolist():
        on = np.flatnonzero(plane == q)
        rows = hop_rows(problem, q, idx[on], middle[on])
        ids = np.where(rows >= 0, cells.members[np.maximum(rows, 0), 0], -1)
        for k, path in zip(on.tolist(), paths_of(ids)):
            paths[k] = path
    parts: list[list] = [[] for _ in shares]
    for (i, q, m, w), path in zip(flat, paths):
        parts[i].append((q, m, path, w))
    main = [p[0] if p else (-1, -1, (), 0.0) for p in parts]
    return ClosSplitRouting([t[0] for t in main], [t[1] for t in main], [t[2] for t in main],
                            {}, parts)


def _shares(com, opts, demand, x) -> list[dict]:
    """Per flow {(plane, middle): share}: its commodity's shares, normalised."""
    per: list[dict] = [{} for _ in demand]
    dust = x < _SHARE_TOL * demand[opts.owner]
    for v in np.flatnonzero(~dust).tolist():
        c = int(opts.owner[v])
        per[c][(int(opts.plane[v]), int(opts.middle[v]))] = float(x[v]) / demand[c]
    for p in per:
        total = sum(p.values())
        for key in p:
            p[key] /= total
    return [per[c] for c in com.tolist()]
