"""Simulated annealing as in the paper's simulator (paper.md section 6.3), seeded.

State: a spine index per flow (per destination NIC for rings, where a NIC receives one flow),
initially the destination host's position under its leaf (a rail-like mapping). A flow's spine is
its index mod the number of its usable spines, taken in id order. Moves swap the indices of two
random flows, or of two flows into the same leaf. Energy = alpha x (links at alpha). T0 = 1000,
x0.99 per step, stop below 0.1 (917 steps). The best state visited is returned.
"""
from __future__ import annotations

import math
import random

import numpy as np

from controller.model.fabric import spine_list
from controller.model.problem import Assignment, Problem


def annealing(problem: Problem, seed: int = 1234, t0: float = 1000.0, cooling: float = 0.99,
              t_min: float = 0.1) -> Assignment:
    n = len(problem)
    if n == 0:
        return Assignment.unsplit([])
    fabric = problem.fabric
    n_leaves, n_spines = len(fabric.leaves), len(fabric.spines)
    usable = [spine_list(m) for m in problem.usable]
    position = {}
    for leaf, hosts in fabric.hosts_of_leaf.items():
        for p, h in enumerate(hosts):
            position[h] = p
    index = [position[problem.flows[pos].dst] for pos in problem.inter]
    src, dst = problem.src_leaf, problem.dst_leaf
    by_dst_leaf: dict[int, list[int]] = {}
    for k, b in enumerate(dst):
        by_dst_leaf.setdefault(b, []).append(k)

    # loads: up links at [a * S + s], down links at [L * S + b * S + s]
    loads = np.zeros(2 * n_leaves * n_spines, dtype=np.int64)
    down0 = n_leaves * n_spines

    def spine(k: int) -> int:
        u = usable[k]
        return u[index[k] % len(u)]

    def move(k: int, s: int, delta: int) -> None:
        loads[src[k] * n_spines + s] += delta
        loads[down0 + dst[k] * n_spines + s] += delta

    for k in range(n):
        move(k, spine(k), 1)

    def energy() -> int:
        alpha = int(loads.max())
        return alpha * int(np.count_nonzero(loads == alpha))

    rng = random.Random(seed)
    current = energy()
    best, best_index = current, list(index)
    temperature, steps = t0, 0
    while temperature >= t_min:
        i = rng.randrange(n)
        if rng.random() < 0.5:
            j = rng.randrange(n)
        else:
            group = by_dst_leaf[dst[i]]
            j = group[rng.randrange(len(group))]
        if i != j and index[i] != index[j]:
            si, sj = spine(i), spine(j)
            move(i, si, -1)
            move(j, sj, -1)
            index[i], index[j] = index[j], index[i]
            ni, nj = spine(i), spine(j)
            move(i, ni, 1)
            move(j, nj, 1)
            new = energy()
            if new <= current or rng.random() < math.exp((current - new) / temperature):
                current = new
                if new < best:
                    best, best_index = new, list(index)
            else:  # undo
                move(i, ni, -1)
                move(j, nj, -1)
                index[i], index[j] = index[j], index[i]
                move(i, si, 1)
                move(j, sj, 1)
        temperature *= cooling
        steps += 1
    index = best_index
    return Assignment.unsplit([spine(k) for k in range(n)],
                              {"seed": seed, "steps": steps, "energy": best})
