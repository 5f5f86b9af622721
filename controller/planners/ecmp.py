"""ECMP as the baseline on a single two-tier plane: a fixed, seeded hash of each flow's 5-tuple
picks one usable spine at the source leaf, the only tier that hashes there.

h = the first 8 bytes (big-endian) of SHA-256 over "src|dst|proto|sport|dport|seed" (UTF-8),
where src and dst are the hosts' addresses (their IP when the fabric declares one, else their
name). The spine is the (h mod k)-th of the flow's k usable spines in ascending id order. Python's
``hash()`` is never used: it is randomised per process. Different salts draw different ECMP
outcomes; the same salt always gives the same one, so collisions persist across steps.

The seed is the leaf tier's of ``clos_ecmp`` (issue 37: a name means one thing on both
shapes): ``salt/leaf`` for ``ecmp`` (every tier its own seed), the salt alone for
``ecmp-polarised`` (one hash value at every tier), so both make the Clos planners' choices on
the plane, at the cost of the two-tier loop (no Clos problem to build: 3-4x faster).
"""
from __future__ import annotations

import hashlib

from controller.model.fabric import spine_list
from controller.model.problem import Assignment, Problem


def flow_hash(src: str, dst: str, proto: int, sport: int, dport: int, salt: int = 0) -> int:
    key = f"{src}|{dst}|{proto}|{sport}|{dport}|{salt}".encode()
    return int.from_bytes(hashlib.sha256(key).digest()[:8], "big")


def ecmp(problem: Problem, salt: int = 0, polarised: bool = False) -> Assignment:
    seed = salt if polarised else f"{salt}/leaf"
    address = problem.fabric.address
    lists: dict[int, list[int]] = {}
    spines = []
    for k, pos in enumerate(problem.inter):
        f = problem.flows[pos]
        mask = problem.usable[k]
        usable = lists.get(mask)
        if usable is None:
            usable = lists[mask] = spine_list(mask)
        h = flow_hash(address(f.src), address(f.dst), f.proto, f.sport, f.dport, seed)
        spines.append(usable[h % len(usable)])
    return Assignment.unsplit(spines, {"salt": salt, "hash": "polarised" if polarised
                                       else "independent per tier"})
