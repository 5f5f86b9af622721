"""A running job as the controller intends it: the job, how it is planned and enforced, and the
route of each of its flows, keyed by the flow's 5-tuple (never by list position, so routes
survive re-ordering, persistence and re-planning).

``matrix`` says where the flows come from: ``declared`` (the job document), ``learning``
(members only, nothing measured yet: no flow is planned, traffic takes the default paths) or
``learned`` (the flows measured between the members replaced the declared ones).

>>> from controller.model.jobs import Flow, Job
>>> f = Flow("j", "h0", "h1", 8.0)
>>> r = JobRecord(Job("j", explicit=[f]), 1, "auto", "flow", 0.0, {flow_key(f): ((0, 1.0),)})
>>> r.unroutable(), r.matrix
([], 'declared')
"""
from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Optional

from controller.model.jobs import Flow, Job

FlowKey = tuple  # Flow.five_tuple(): (src, dst, proto, sport, dport)
# ((spine, share), ...), on a Clos fabric ((switch names, leaf to leaf), share), ...;
# None: intra-leaf; (): no alive spine (path)
Parts = Optional[tuple]
UNROUTABLE: tuple = ()
MATRICES = ("declared", "learning", "learned")


class MemberPath(tuple):
    """A Clos path of switch names (a tuple, as without bundles) that also names the member
    of the bundle every hop takes: ``members[k]`` for the hop ``path[k] -> path[k + 1]``. Kept
    only on fabrics with bundles; equal to another path only with the same members.

    >>> p = MemberPath(("l0", "s1", "l2"), (1, 0))
    >>> list(p), p.members, p == ("l0", "s1", "l2"), p == MemberPath(list(p), (1, 0))
    (['l0', 's1', 'l2'], (1, 0), False, True)
    """

    def __new__(cls, names, members=()):
        self = super().__new__(cls, names)
        self.members = tuple(int(m) for m in members)
        return self

    def __eq__(self, other):
        return (isinstance(other, tuple) and tuple(self) == tuple(other)
                and self.members == getattr(other, "members", None))

    def __ne__(self, other):
        return not self == other

    def __hash__(self):
        return hash((tuple(self), self.members))

    def __reduce__(self):
        return MemberPath, (tuple(self), self.members)

    def __repr__(self):
        return f"MemberPath({tuple(self)!r}, {self.members!r})"


def members_of(where) -> tuple[int, ...] | None:
    """The members a route part's path names (None: no bundles, or a spine index)."""
    return getattr(where, "members", None)


def flow_key(flow: Flow) -> FlowKey:
    return flow.five_tuple()


@dataclass
class JobRecord:
    job: Job  # the matrix in force (declared, or learned)
    number: int  # names the job in its rules' cookies
    algorithm: str
    mode: str
    created: float
    routes: dict = field(default_factory=dict)  # flow key -> parts
    matrix: str = "declared"  # declared | learning | learned
    learn: bool = True  # measured traffic may replace the declared matrix
    members: tuple = ()  # hosts whose traffic is measured (the job's hosts by default)
    mismatch: Optional[dict] = None  # the last measured disagreement with the plan

    def flows_with_parts(self) -> list[tuple[Flow, Parts]]:
        """(flow, parts) in the job's flow order."""
        return [(f, self.routes.get(flow_key(f))) for f in self.job.flows()]

    def copy(self) -> JobRecord:
        return replace(self, routes=dict(self.routes))

    def unroutable(self) -> list[Flow]:
        return [f for f, p in self.flows_with_parts() if p == UNROUTABLE]

    def hosts(self) -> set[str]:
        """Every host the job names: its members and the ends of its flows."""
        return set(self.members) | self.job.hosts()
