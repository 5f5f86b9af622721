"""ECMP on a Clos fabric, hashed at every tier: the baseline, in two variants.

Every switch on the way up hashes the flow's 5-tuple and picks one of its alive next hops
(``planners.ecmp.flow_hash``, SHA-256, never Python's ``hash``): the host picks its plane
(its NIC port), the source leaf an aggregation slot (a spine on two tiers), the aggregation
switch a core of its group, and every bundle a member. The way down is fixed by the middle.

- ``independent``: each tier hashes with its own seed, as switches configured with different
  hash seeds (or different hash functions) do.
- ``polarised``: every tier uses the same hash value, as Open vSwitch's default select groups
  do (the same fields and function on every bridge): a flow that took slot h mod A at its leaf
  takes core h mod C of that slot's group, so when A = C only A of the A x C cores carry
  traffic (hash polarisation).

A hop's choice is among next hops that still have an alive path to the destination (routing
withdraws the others), in ascending id order.
"""
from __future__ import annotations

import numpy as np

from controller.model.clospaths import ClosProblem, ClosRouting
from controller.planners.clos_loads import empty_routing
from controller.planners.ecmp import flow_hash

TIER_SEEDS = ("plane", "leaf", "aggregation", "member")


def clos_ecmp(problem: ClosProblem, salt: int = 0, polarised: bool = False) -> ClosRouting:
    r = empty_routing(len(problem), {"salt": salt, "hash": "polarised" if polarised
                                     else "independent per tier"})
    address = problem.fabric.address
    L = problem.links
    for i, pos in enumerate(problem.inter):
        f = problem.flows[pos]
        key = (address(f.src), address(f.dst), f.proto, f.sport, f.dport)
        if polarised:
            h = flow_hash(*key, salt)
            hashes = dict.fromkeys(TIER_SEEDS, h)
        else:
            hashes = {t: flow_hash(*key, f"{salt}/{t}") for t in TIER_SEEDS}
        options = [problem.options(i, q) for q in range(len(problem.fabric.planes))]
        planes = [q for q, (_, ok) in enumerate(options) if ok.any()]
        q = planes[hashes["plane"] % len(planes)]
        hops, ok = options[q]
        a, b, p, s = problem.ends(i, q)
        if p == s:
            slots = np.flatnonzero(ok)
            m = int(slots[hashes["leaf"] % len(slots)])
        else:
            groups = L.group_of_core[q]
            slots = np.unique(groups[ok])
            g = slots[hashes["leaf"] % len(slots)]
            cores = np.flatnonzero(ok & (groups == g))
            m = int(cores[hashes["aggregation"] % len(cores)])
        members = []
        for hop in hops:
            alive = [int(x) for x in hop[m] if x >= 0 and L.alive[x]]
            members.append(alive[hashes["member"] % len(alive)])
        r.plane[i], r.middle[i], r.path[i] = q, m, tuple(members)
    return r
