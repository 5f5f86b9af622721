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
withdraws the others), in ascending id order. A flow pinned to a plane (``ClosProblem.pin``, a
running connection on that NIC port) has that plane only (``usable_any``).
"""
from __future__ import annotations

import hashlib

import numpy as np

from controller.model.clospaths import ClosProblem, ClosRouting
from controller.planners.clos_loads import empty_routing, hop_rows, paths_of

TIER_SEEDS = ("plane", "leaf", "aggregation", "member")


def clos_ecmp(problem: ClosProblem, salt: int = 0, polarised: bool = False) -> ClosRouting:
    """Cost: one SHA-256 per flow and tier that has a choice (O(F)), the choices numpy over
    flows: O(F x middles) (a core among its group's only, when groups are of equal size)."""
    n = len(problem)
    r = empty_routing(n, {"salt": salt, "hash": "polarised" if polarised
                          else "independent per tier"})
    if not n:
        return r
    L, fab = problem.links, problem.fabric
    address = fab.address
    keys = [f"{address(f.src)}|{address(f.dst)}|{f.proto}|{f.sport}|{f.dport}|".encode()
            for f in (problem.flows[pos] for pos in problem.inter)]
    memo: dict[str, np.ndarray] = {}

    def hashes(tier: str, idx: np.ndarray) -> np.ndarray:
        """The tier's hash of flows ``idx`` (uint64), computed once per flow and tier."""
        tag = "all" if polarised else tier
        if tag not in memo:
            memo[tag] = np.zeros(n, dtype=np.uint64)
            memo[tag + "?"] = np.zeros(n, dtype=bool)
        have, out = memo[tag + "?"], memo[tag]
        todo = idx[~have[idx]].tolist()
        out[todo] = hash_keys([keys[i] for i in todo], salt if polarised else f"{salt}/{tier}")
        have[todo] = True
        return out[idx]
    everyone = np.arange(n)
    P = len(fab.planes)
    plane = np.zeros(n, dtype=np.int64)
    if P > 1:
        usable = np.stack([problem.usable_any(q) for q in range(P)], axis=1)
        plane = nth_true(usable, hashes("plane", everyone))
    cells = L.cells()
    for q in range(P):
        idx = np.flatnonzero(plane == q)
        a, b, p, s = (e[idx] for e in problem.end_arrays(q))
        u1, d1, u2, d2 = L.ok(q)
        slot_ok = u1[a] & d1[b]
        middle = np.zeros(len(idx), dtype=np.int64)
        intra = p == s
        if intra.any():
            middle[intra] = nth_true(slot_ok[intra], hashes("leaf", idx[intra]))
        inter = ~intra
        if inter.any():
            groups = L.group_of_core[q]
            j = idx[inter]
            ok = slot_ok[inter][:, groups] & u2[p[inter]] & d2[s[inter]]
            starts = np.flatnonzero(np.r_[True, groups[1:] != groups[:-1]])
            slots = np.logical_or.reduceat(ok, starts, axis=1)  # groups in ascending order
            k = nth_true(slots, hashes("leaf", j))  # the group's place in ``starts``
            size = len(groups) // len(starts)
            if (np.diff(np.r_[starts, len(groups)]) == size).all():  # groups of equal size:
                mine = ok.reshape(len(j), len(starts), size)[np.arange(len(j)), k]  # its cores
                middle[inter] = starts[k] + nth_true(mine, hashes("aggregation", j))
            else:
                g = groups[starts][k]
                middle[inter] = nth_true(ok & (groups[None, :] == g[:, None]),
                                         hashes("aggregation", j))
        rows = hop_rows(problem, q, idx, middle)
        ids = np.full(rows.shape, -1, dtype=np.int64)
        if cells.width == 1:
            ids[rows >= 0] = cells.members[rows[rows >= 0], 0]
        else:
            h = hashes("member", idx)
            for col in range(4):
                has = rows[:, col] >= 0
                members = cells.members[rows[has, col]]
                pick = nth_true(L.alive[members], h[has])
                ids[has, col] = members[np.arange(len(members)), pick]
        for i, m, path in zip(idx.tolist(), middle.tolist(), paths_of(ids)):
            r.plane[i], r.middle[i], r.path[i] = q, m, path
    return r


def hash_keys(keys: list[bytes], seed) -> np.ndarray:
    """``ecmp.flow_hash`` of every 5-tuple key (``"src|dst|proto|sport|dport|"`` encoded)
    with ``seed``, as uint64: the same SHA-256 prefix, without formatting the tuple again
    at every tier (tests/test_clos_speed.py holds the two equal)."""
    tail, sha = f"{seed}".encode(), hashlib.sha256
    digests = b"".join([sha(k + tail).digest()[:8] for k in keys])
    return np.frombuffer(digests, dtype=">u8").astype(np.uint64)


def nth_true(mask: np.ndarray, h: np.ndarray) -> np.ndarray:
    """Per row the column of its (h mod count)-th True (counting from 0), as
    ``choices[h % len(choices)]`` on the row's True columns in ascending order."""
    count = mask.sum(axis=1).astype(np.uint64)
    n = (h % np.maximum(count, 1)).astype(np.int64)
    return (np.cumsum(mask, axis=1) > n[:, None]).argmax(axis=1)
