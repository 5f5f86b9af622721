"""A routing instance: the inter-leaf flows of the given jobs, with their usable spines.

Planners see only this: per flow its source leaf, destination leaf and usable-spine bitmask,
in input order (jobs in submission order, each job's flows as ``Job.flows()`` lists them).
Intra-leaf flows never reach a spine and are left out.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from controller.errors import ConflictError
from controller.model.fabric import Fabric
from controller.model.jobs import Flow, Job


@dataclass
class Problem:
    fabric: Fabric
    jobs: list[Job]
    flows: list[Flow]  # every flow, input order
    inter: list[int]  # positions in ``flows`` of the inter-leaf flows
    src_leaf: list[int]  # per inter-leaf flow
    dst_leaf: list[int]
    usable: list[int]  # per inter-leaf flow: bitmask of usable spines
    unroutable: list[int] = field(default_factory=list)  # positions in ``flows``: no alive spine

    @classmethod
    def build(cls, fabric: Fabric, jobs: list[Job], skip_unroutable: bool = False) -> Problem:
        """The instance of ``jobs`` on ``fabric``. A flow between leaves with no alive spine in
        common is an error naming the pair, or, with ``skip_unroutable``, left out of
        ``inter`` and listed in ``unroutable`` (the controller keeps serving the rest)."""
        flows = [f for job in jobs for f in job.flows()]
        inter, src, dst, usable, unroutable = [], [], [], [], []
        li = fabric.leaf_index
        for k, f in enumerate(flows):
            a, b = li[fabric.leaf_of(f.src)], li[fabric.leaf_of(f.dst)]
            if a == b:
                continue
            mask = fabric.usable_mask(a, b)
            if not mask and skip_unroutable:
                unroutable.append(k)
                continue
            if not mask:
                raise ConflictError(
                    f"no alive spine between leaves {fabric.leaves[a]} and {fabric.leaves[b]} "
                    f"(flow {f.src} -> {f.dst} of job {f.job})")
            inter.append(k)
            src.append(a)
            dst.append(b)
            usable.append(mask)
        return cls(fabric, list(jobs), flows, inter, src, dst, usable, unroutable)

    def __len__(self) -> int:
        return len(self.inter)

    def degrees(self) -> tuple[list[int], list[int]]:
        """Inter-leaf flows leaving and entering each leaf."""
        out = [0] * len(self.fabric.leaves)
        inn = [0] * len(self.fabric.leaves)
        for a in self.src_leaf:
            out[a] += 1
        for b in self.dst_leaf:
            inn[b] += 1
        return out, inn

    def lower_bound(self) -> int:
        """ceil(d / u) over leaves, d its out- (in-) degree and u its up links: alpha >= this.

        On a fabric where every leaf sees the same S' alive spines this is ceil(Delta / S').
        """
        out, inn = self.degrees()
        best = 0
        for i, mask in enumerate(self.fabric.up_mask):
            u = bin(mask).count("1")
            d = max(out[i], inn[i])
            if d:
                best = max(best, -(-d // u))
        return best


@dataclass
class Assignment:
    """Per inter-leaf flow (aligned with ``Problem.inter``), the spines it uses and its share.

    Unsplit routings have exactly one ``(spine, 1.0)`` part per flow.
    """
    parts: list[tuple[tuple[int, float], ...]]
    info: dict = field(default_factory=dict)

    @classmethod
    def unsplit(cls, spines: list[int], info: dict | None = None) -> Assignment:
        return cls([((s, 1.0),) for s in spines], info or {})

    def spines(self) -> list[int]:
        """Spine per flow for an unsplit assignment (the largest part otherwise)."""
        return [max(p, key=lambda x: x[1])[0] for p in self.parts]

    def is_split(self) -> bool:
        return any(len(p) > 1 for p in self.parts)
