"""The jobs search's "free a job" move on any Clos fabric (``clos_jobs``): the two-tier
``planners.jobmean`` chains, in options (plane, middle) over hop cells.

Why: a job is as slow as its slowest flow, so one flow sharing a link slows its whole job,
and moving one flow at a time predicts no gain while another flow of the job still shares.
Where the max link load leaves a flow no option of its own, it gets one only when a flow
there makes room; and a flow of a job that loses nothing by sharing (an all-to-all bound by
its hosts' links) can make room where a ring would wait.

Guide: ``objective.JobModel`` on the Clos problem (the two-tier kernel's): a flow's value
on a link is its job's slowdown if that link set its time (bytes shared fairly; host links
and capacities in units ignored: a guide, the prediction decides). A job's level is the
largest value of its flows, at least 1.

Move (``Freeing.free``): for each flow g of the job above value 1, highest first, either (1)
g leaves by an ejection chain (``Freeing.chain``): g takes an option where it is alone, or
one where a single link is wrong and a flow there leaves it by the same rule, and so on (the
Kempe move of edge colouring: ``jobmean.by_chain``); or (2) each flow of another job sharing
a link with g leaves g's links by such a chain (``partners``: ``jobmean.move_partner``, by
chains); where neither frees g, both again to a lower value of g (lighter partners). A flow
may land on a link when no link goes above the search's max and no job there goes above its
level (g's job above g's target): a flow of a job that loses nothing shares freely
(concentration), no job gets slower on the guide, the max stays. Kept only when the job's
level drops (else undone, and stopped at the first flow at the level that stays: the job
stays as slow), for the caller to predict once and keep when the prediction ranks it better
(``undo`` else).

Cost: per flow of the job and target (alone, lighter), a chain search of at most
``CHAIN_NODES`` nodes and one per partner; a node O(chain length) moves applied and undone
and O(P x middles x hops) link checks, each O(flows on the link, squared) once per set of
flows (``JobModel.link_table`` keeps them); the gate O(the job's flows x hops) and the
levels O(links) once per job.

>>> from controller.model.clos import Clos
>>> from controller.model.clospaths import ClosProblem
>>> from controller.model.jobs import parse_job
>>> from controller.planners.clos_jobs import clos_slowdowns
>>> from controller.planners.clos_loads import empty_routing, score
>>> fab = Clos.leaf_spine(2, 3, 2)  # 2 spines; h0_0 sends an all-to-all's 2 flows
>>> a = {"id": "a", "flows": [{"src": "h0_0", "dst": f"h2_{k}", "bytes": 1e8} for k in (0, 1)]}
>>> ring = {"id": "r", "collective": "ring_allreduce", "ranks": ["h0_1", "h1_0"], "bytes": 1e9}
>>> p = ClosProblem.build(fab, [parse_job(d, fab) for d in (a, ring)])
>>> r, loads = empty_routing(len(p)), ClosLoads(p)
>>> for i, m in enumerate([0, 1, 0, 0]):  # the ring's first flow shares l0's uplink to s0
...     r.plane[i], r.middle[i], r.path[i] = 0, m, loads.pick(i, 0, m)
...     loads.add(i, 0, r.path[i])
>>> round(clos_slowdowns(p, r)["r"], 3), score(p, r)
(1.1, (2.0, 1))
>>> moves = Freeing(p, r, loads, 2.0).free([2])  # the ring to s1, the all-to-all's to s0
>>> r.middle, {j: round(v, 3) for j, v in clos_slowdowns(p, r).items()}, score(p, r)
([0, 0, 1, 0], {'a': 1.0, 'r': 1.0}, (2.0, 2))
"""
from __future__ import annotations

from collections.abc import Callable

from controller.model.clospaths import ClosProblem, ClosRouting
from controller.planners.clos_layer2 import chain_moves
from controller.planners.clos_loads import ClosLoads
from controller.planners.objective import JobModel

LIM = 1.0 + 1e-9  # a value of 1: the flow's job waits for nobody on that link
CHAIN_NODES = 64  # flows one chain search may try to place (its first, then the ejected)
BRANCH = 8  # options of a flow a chain search extends to at most, per plane: least loaded


class Freeing:
    """The search's routing ``r``, its ``loads``, the max ``cap``, the flows on every fabric
    link (``track``) and the guide (``JobModel``). ``put`` (flow, plane, middle, path, sign;
    default ``place``) moves a flow: a search that keeps more state passes its own, which
    must call ``track``. ``expired`` (the search's ``jobs_stop.Clock.expired``): once it
    says the time is up no chain goes on, and a job not yet freed is left as it was (its
    chains of 64 nodes, partner by partner, took 5 s on ten all-to-alls of 8,404 flows, past
    the search's budget)."""

    def __init__(self, problem: ClosProblem, r: ClosRouting, loads: ClosLoads, cap: float,
                 put: Callable | None = None, expired: Callable[[], bool] | None = None):
        self.problem, self.r, self.loads, self.cap = problem, r, loads, cap
        self.put = put or self.place
        self.expired = expired or (lambda: False)
        self.model = JobModel(problem)
        self.on: dict[int, set[int]] = {}
        for i, path in enumerate(r.path):
            self.track(i, path, 1.0)

    def place(self, i: int, q: int, m: int, path, sign: float) -> None:
        """Flow i on (sign > 0: at option (q, m)) or off ``path``, in ``r``, the loads and
        the flows per link."""
        if sign > 0:
            self.r.plane[i], self.r.middle[i] = q, m
        self.r.path[i] = path
        self.loads.add(i, q, path, sign)
        self.track(i, path, sign)

    def track(self, i: int, path, sign: float) -> None:
        """Flow i on (sign > 0) or off the fabric links ``path``."""
        for x in path:
            s = self.on.setdefault(x, set())
            if sign > 0:
                s.add(i)
            else:
                s.discard(i)

    def table(self, flows) -> dict:
        """Job -> the largest value of its flows on a link holding ``flows``."""
        return self.model.link_table(tuple(sorted(flows)))[0]

    def value(self, i: int) -> float:
        """Flow i's largest value on its fabric links: its job's slowdown if i set it."""
        model = self.model
        return max((model.value_on(i, tuple(sorted(self.on[x]))) for x in self.r.path[i]
                    if len(self.on[x]) > 1), default=1.0)

    def levels(self) -> list[float]:
        """Every job's level on the guide now (its largest value on a link, at least 1)."""
        out = [1.0] * len(self.model.jobs)
        for flows in self.on.values():
            if len(flows) > 1:
                for j, v in self.table(flows).items():
                    out[j] = max(out[j], v)
        return out

    def move(self, i: int, q: int, m: int) -> tuple:
        """Flow i to option (q, m), its least loaded members; (i, plane, middle, path) before."""
        r = self.r
        old = (i, r.plane[i], r.middle[i], r.path[i])
        self.put(*old, -1.0)
        self.put(i, q, m, self.loads.pick(i, q, m), 1.0)
        return old

    def undo(self, log: list) -> None:
        """Back to before the moves ``log`` (``move``'s answers, in order)."""
        r = self.r
        for i, q0, m0, p0 in reversed(log):
            self.put(i, r.plane[i], r.middle[i], r.path[i], -1.0)
            self.put(i, q0, m0, p0, 1.0)

    def free(self, flows: list[int]) -> list:
        """Lower the level of the job of ``flows`` (its flows on shared links): each of them
        above value 1, the highest first, by a chain, else by its partners' chains, else the
        same to a lower value (lighter partners); the moves made (``move``'s answers, for
        ``undo``), none (all undone) unless the job's level dropped: the guide's gate before
        a prediction (a job is as slow as its slowest flow; the two-tier ``jobmean.free``
        keeps what lowers the sum of levels, and no other job rises here)."""
        values = {g: self.value(g) for g in flows}
        flows = sorted((g for g in flows if values[g] > LIM), key=lambda g: -values[g])
        if not flows:
            return []
        level = values[flows[0]]
        limit = self.levels()
        job = self.model.job[flows[0]]
        log: list = []
        for g in flows:
            if self.expired():
                break
            v = self.value(g)
            for below in (1.0, v * (1 - 1e-6)) if v > LIM else ():
                limit[job] = below  # the job's flows: none above it again
                got = self.chain(g, g, limit, below) or self.partners(g, limit, below)
                if got:
                    log += got
                    break
            else:
                if v >= level * (1 - 1e-9):
                    break  # a flow at the job's level stays there: so does the job
        if max(self.value(g) for g in flows) < level * (1 - 1e-9):
            return log
        self.undo(log)
        return []

    def partners(self, g: int, limit: list[float], below: float) -> list | None:
        """Each flow of another job sharing a link with g (link by link along g's path, the
        heaviest first on each), off g's links by a chain (directly where it can) until g's
        value is ``below``; the moves, or None (undone) when it is not."""
        job, weight = self.model.job[g], self.model.weight
        log = []
        for x in self.r.path[g]:
            for h in sorted(self.on[x] - {g}, key=lambda h: (-weight[h], h)):
                if self.value(g) <= below * LIM:
                    return log
                if self.expired():
                    break
                if self.model.job[h] != job and h in self.on[x]:
                    log += self.chain(h, g, limit, below) or []
        if self.value(g) <= below * LIM:
            return log
        self.undo(log)
        return None

    def chain(self, f0: int, g: int, limit: list[float], below: float) -> list | None:
        """The shortest ejection chain (module docstring) that moves f0 off its option, g
        (f0 itself, or a flow sharing a link with it) at value ``below`` at most when f0 is
        g, applied (``move``'s answers); None, nothing moved, when none within
        ``CHAIN_NODES``. A node is a flow to place (f0, then one a move ejects), its parent
        node and the move that ejected it; every job within ``limit``."""
        tree: list[tuple] = [(f0, -1, None)]
        seen = {f0, g}
        head, found = 0, None
        while head < len(tree) and head < CHAIN_NODES and found is None and not self.expired():
            moves = chain_moves(tree, head)
            log = [self.move(*mv) for mv in moves]
            found = self._expand(head, tree, limit, {mv[0] for mv in moves} | {f0, g}, seen)
            self.undo(log)
            if found is not None:
                found = moves + [found]
            head += 1
        if found is None:
            return None
        log = [self.move(*mv) for mv in found]
        if self.loads.fabric_max() > self.cap + 1e-9 or (f0 == g and self.value(g) > below * LIM):
            self.undo(log)  # members of a bundle picked otherwise than when searched
            return None
        return log

    def fits(self, x: int, f: int, limit: list[float], out: int = -1) -> bool:
        """Flow f may land on link x (flow ``out`` leaving it): within the max, every job
        there within ``limit``."""
        loads = self.loads
        step = loads.step_l[x]
        if loads.load_l[x] + step - (step if out >= 0 else 0.0) > self.cap + 1e-9:
            return False
        flows = (self.on.get(x, set()) - {out}) | {f}
        return len(flows) == 1 or all(v <= limit[j] * LIM for j, v in self.table(flows).items())

    def _expand(self, k: int, tree: list, limit: list[float], moved: set, seen: set):
        """Node k's flow f (out of the loads meanwhile) to another option: the least loaded
        one where it fits on every link ends the chain (f, plane, middle); else each option
        where it fits on all links but one, whose flow h leaving makes it fit there, adds a
        node per such h, at most ``BRANCH`` options per plane."""
        f = tree[k][0]
        r, loads = self.r, self.loads
        q0, m0, p0 = r.plane[f], r.middle[f], r.path[f]
        self.put(f, q0, m0, p0, -1.0)
        best = None
        grow = []
        for q in range(len(self.problem.fabric.planes)):
            cost = loads.plane_costs(f, q, hosts=False).ravel()
            grown = 0
            for m in cost.argsort(kind="stable").tolist():
                if cost[m] == float("inf") or (best is not None and best[0] <= cost[m]):
                    break
                if (q, m) == (q0, m0):
                    continue
                bad = [x for x in loads.pick(f, q, m) if not self.fits(x, f, limit)]
                if not bad:
                    best = (float(cost[m]), q, m)
                    break
                if len(bad) == 1 and grown < BRANCH:
                    outs = [h for h in sorted(self.on.get(bad[0], set()) - moved)
                            if h not in seen and self.fits(bad[0], f, limit, h)]
                    grown += bool(outs)
                    grow += [(h, q, m) for h in outs]
        if best is None:
            for h, q, m in grow:
                if h not in seen:
                    seen.add(h)
                    tree.append((h, k, (f, q, m)))
        self.put(f, q0, m0, p0, 1.0)
        return None if best is None else (f, best[1], best[2])
