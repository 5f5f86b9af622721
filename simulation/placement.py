"""Realistic workloads: jobs on 8-NIC servers wherever a scheduler finds them free.

The paper's generator (``simulation.workloads``) gives each replica whole leaves, so every leaf
carries one job and every cell is easy for the planners. A cluster scheduler hands out *servers*
instead. This model:

* **Cluster.** ``leaves`` leaves of ``nics_per_leaf`` NICs (hosts ``h<leaf>_<k>``, 32 by
  default); a server is ``server_nics`` consecutive NICs of one leaf (8: one NIC per GPU), so a
  leaf holds ``nics_per_leaf / server_nics`` servers. Every link at ``gbps`` (100).
* **Jobs.** The paper's models (GPT-3, BLOOM, LLaMA2-70B, table in ``simulation.workloads``) with
  data-parallel ring sizes drawn from ``ring_sizes`` (2, 4, 8). A job of model M and ring size n
  needs n replicas of TP x PP GPUs, i.e. n * TP * PP / 8 servers. Jobs are drawn (model and ring
  size uniformly at random) until the busy servers reach ``utilisation`` of the cluster (0.8-0.95
  is typical); a draw that does not fit the remaining budget is replaced by a random one that
  does, and drawing stops when none fits, so the result is at most the target.
* **Placement.** Each job takes servers chosen uniformly at random among the free ones
  (fragmentation is the point: leaves are shared by several jobs and a replica spans several
  leaves). Ranks follow the server list sorted by name (``rank_order="sorted"``, what a
  hostlist gives a launcher) or the random draw (``"random"``); replica r is the r-th block of
  TP x PP GPUs and ring i joins GPU i of every replica, each reducing 4 bytes x params / (TP PP)
  bytes, as in the paper's model. Jobs start at uniform [1 s, 10 s] plus one compute gap and
  carry their compute gap as ``compute_s``.
* **Failures.** ``failed_spines`` spines chosen at random (all their links down) and
  ``failed_links`` single leaf-spine links chosen at random among the remaining ones; a draw
  that leaves some leaf pair without a common spine is redrawn.
* **Seeded.** Everything comes from one ``numpy.random.Generator(PCG64(seed))``: the same seed
  gives the same cluster and jobs.

Output: the fabric and jobs JSON formats of docs/reference/formats.md.

    python -m simulation.placement --spines 32 --leaves 64 --utilisation 0.9 --seed 1 \\
        --failed-links 3 [--failed-spines 1] [--nics-per-leaf 32] [--models gpt3,bloom] \\
        [--ring-sizes 2,4,8] [--rank-order sorted] [--wiring] --out DIR

writes ``DIR/fabric.json`` and ``DIR/jobs.json`` and prints a one-line JSON summary
(utilisation reached, jobs, flows, inter-leaf flows, leaves shared by several jobs).
"""
from __future__ import annotations

import argparse
import json
import os
import sys

import numpy as np

from controller.errors import InputError
from controller.model.clos import Clos
from controller.model.jobs import Job
from simulation.workloads import MODELS

RING_SIZES = (2, 4, 8)
RANK_ORDERS = ("sorted", "random")


def cluster(spines: int, leaves: int, nics_per_leaf: int = 32, rng: np.random.Generator | None = None,
            failed_links: int = 0, failed_spines: int = 0, gbps: float = 100.0,
            wiring: bool = False) -> Clos:
    """A leaf-spine with ``failed_spines`` random spines and ``failed_links`` random single links
    down.

    O(leaves * spines) per draw. Example: ``cluster(8, 16, 32, np.random.default_rng(1), 2)``
    has 2 of its 128 leaf-spine links down.
    """
    if not 0 <= failed_spines < spines:
        raise InputError(f"placement: cannot fail {failed_spines} of {spines} spines "
                         "(at least one must stay up)")
    if failed_links < 0:
        raise InputError("placement: failed_links must not be negative")
    rng = rng if rng is not None else np.random.default_rng(0)
    base = Clos.generate(spines, leaves, nics_per_leaf, gbps, 0, wiring=wiring)
    spine_names, leaf_names = base.planes[0].aggs[0], base.leaves
    alive_links = leaves * (spines - failed_spines)
    if failed_links > alive_links:
        raise InputError(f"placement: cannot fail {failed_links} links, only {alive_links} are up")
    for _ in range(100):
        dead = sorted(int(j) for j in rng.choice(spines, failed_spines, replace=False))
        down = {(leaf, spine_names[j]) for j in dead for leaf in leaf_names}
        alive = [(i, j) for i in range(leaves) for j in range(spines) if j not in dead]
        for k in rng.choice(len(alive), failed_links, replace=False):
            i, j = alive[int(k)]
            down.add((leaf_names[i], spine_names[j]))
        fabric = base.with_down(down)
        if _connected(fabric):
            return fabric
    raise InputError("placement: too many failures, some leaf pair has no common spine")


def _connected(fabric: Clos) -> bool:
    masks = set(fabric.as_leaf_spine().up_mask)
    return all(a & b for a in masks for b in masks)


def place(fabric, utilisation: float, rng: np.random.Generator, server_nics: int = 8,
          models: list[str] | None = None, ring_sizes=RING_SIZES, rank_order: str = "sorted",
          start_range: tuple[float, float] = (1.0, 10.0)) -> list[Job]:
    """Jobs of the paper's models on random free servers until ``utilisation`` of the servers
    is busy (at most that). O(servers log servers) per job.

    Example: on ``cluster(32, 64)`` (256 servers) ``place(f, 0.9, np.random.default_rng(1))``
    gives jobs on at most 230 servers, ids ``<model>-<k>``.
    """
    if not 0 < utilisation <= 1:
        raise InputError(f"placement: utilisation must be in (0, 1], got {utilisation!r}")
    if server_nics < 1:
        raise InputError("placement: server_nics must be at least 1")
    if rank_order not in RANK_ORDERS:
        raise InputError(f"placement: rank_order must be one of {', '.join(RANK_ORDERS)}")
    names = list(models) if models else list(MODELS)
    for name in names:
        if name not in MODELS:
            raise InputError(f"placement: unknown model {name!r} (choose from {', '.join(MODELS)})")
        if MODELS[name].gpus % server_nics:
            raise InputError(f"placement: {name} replicas ({MODELS[name].gpus} GPUs) do not fill "
                             f"whole {server_nics}-NIC servers")
    sizes = sorted(set(ring_sizes))
    if not sizes or any(n < 2 for n in sizes):
        raise InputError("placement: ring sizes must be at least 2")
    servers = _servers(fabric, server_nics)
    if not servers:
        raise InputError(f"placement: no leaf has {server_nics} NICs for a server")
    budget = int(np.floor(utilisation * len(servers) + 1e-9))
    combos = [(m, n) for m in names for n in sizes]
    need = {c: MODELS[c[0]].gpus // server_nics * c[1] for c in combos}
    free = np.ones(len(servers), dtype=bool)
    busy, jobs = 0, []
    while True:
        fits = [c for c in combos if busy + need[c] <= budget]
        if not fits:
            break
        choice = combos[int(rng.integers(len(combos)))]
        if choice not in fits:
            choice = fits[int(rng.integers(len(fits)))]
        model, n = MODELS[choice[0]], choice[1]
        picked = rng.choice(np.flatnonzero(free), need[choice], replace=False)
        if rank_order == "sorted":
            picked = np.sort(picked)
        free[picked] = False
        busy += need[choice]
        nics = [h for s in picked for h in servers[int(s)]]
        replicas = [nics[r * model.gpus:(r + 1) * model.gpus] for r in range(n)]
        rings = [[replicas[r][i] for r in range(n)] for i in range(model.gpus)]
        start = float(rng.uniform(*start_range)) + model.compute_s
        jobs.append(Job(f"{model.name}-{len(jobs)}", rings=rings, ring_bytes=model.shard_bytes,
                        start_s=round(start, 6), compute_s=model.compute_s))
    return jobs


def _servers(fabric, server_nics: int) -> list[list[str]]:
    """Servers in name order: consecutive blocks of ``server_nics`` NICs of one leaf (on a
    multi-plane fabric, the leaf of the first plane). Any fabric with ``hosts`` (host -> leaf)."""
    by_leaf: dict[str, list[str]] = {}
    for host, leaf in fabric.hosts.items():
        by_leaf.setdefault(leaf, []).append(host)
    out = []
    for hosts in by_leaf.values():
        for k in range(len(hosts) // server_nics):
            out.append(hosts[k * server_nics:(k + 1) * server_nics])
    return out


def realistic(spines: int, leaves: int, utilisation: float, seed: int, failed_links: int = 0,
              failed_spines: int = 0, nics_per_leaf: int = 32, server_nics: int = 8,
              models: list[str] | None = None, ring_sizes=RING_SIZES, rank_order: str = "sorted",
              gbps: float = 100.0, wiring: bool = False) -> tuple[Clos, list[Job]]:
    """Cluster and jobs from one seed (the failures are drawn first, then the jobs)."""
    rng = np.random.Generator(np.random.PCG64(seed))
    fabric = cluster(spines, leaves, nics_per_leaf, rng, failed_links, failed_spines, gbps, wiring)
    return fabric, place(fabric, utilisation, rng, server_nics, models, ring_sizes, rank_order)


def summary(fabric: Clos, jobs: list[Job], server_nics: int = 8) -> dict:
    """Utilisation reached, flows, and how fragmented the placement is."""
    servers = len(_servers(fabric, server_nics))
    busy = sum(len(j.hosts()) for j in jobs) // server_nics
    jobs_on_leaf: dict[str, set] = {}
    inter = 0
    for j in jobs:
        for f in j.flows():
            a, b = fabric.leaf_of(f.src), fabric.leaf_of(f.dst)
            inter += a != b
            jobs_on_leaf.setdefault(a, set()).add(j.id)
    return {"servers": servers, "busy_servers": busy,
            "utilisation": round(busy / servers, 4) if servers else 0.0,
            "jobs": len(jobs), "flows": sum(len(j.flows()) for j in jobs),
            "inter_leaf_flows": inter,
            "leaves_shared": sum(1 for s in jobs_on_leaf.values() if len(s) > 1),
            "links_down": len(fabric.down)}


def _int_list(text: str, what: str) -> list[int]:
    try:
        return [int(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise InputError(f"{what}: expected comma-separated integers, got {text!r}") from None


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m simulation.placement",
                                 description="a realistic cluster: jobs on random free servers")
    ap.add_argument("--spines", type=int, default=32)
    ap.add_argument("--leaves", type=int, default=64)
    ap.add_argument("--nics-per-leaf", type=int, default=32)
    ap.add_argument("--server-nics", type=int, default=8)
    ap.add_argument("--utilisation", type=float, default=0.9)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--failed-links", type=int, default=0)
    ap.add_argument("--failed-spines", type=int, default=0)
    ap.add_argument("--models", help="comma-separated, e.g. gpt3,bloom (default: all three)")
    ap.add_argument("--ring-sizes", default="2,4,8")
    ap.add_argument("--rank-order", choices=RANK_ORDERS, default="sorted")
    ap.add_argument("--gbps", type=float, default=100.0)
    ap.add_argument("--wiring", action="store_true", help="add the controller's wiring fields")
    ap.add_argument("--out", required=True, help="directory for fabric.json and jobs.json")
    args = ap.parse_args(argv)
    try:
        models = [m.strip() for m in args.models.split(",") if m.strip()] if args.models else None
        fabric, jobs = realistic(args.spines, args.leaves, args.utilisation, args.seed,
                                 args.failed_links, args.failed_spines, args.nics_per_leaf,
                                 args.server_nics, models, _int_list(args.ring_sizes, "--ring-sizes"),
                                 args.rank_order, args.gbps, args.wiring)
    except InputError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    os.makedirs(args.out, exist_ok=True)
    with open(os.path.join(args.out, "fabric.json"), "w") as fh:
        # the two-tier document: links down leaf by leaf, spine by spine
        json.dump(fabric.to_dict(), fh)
    with open(os.path.join(args.out, "jobs.json"), "w") as fh:
        json.dump({"jobs": [j.to_dict() for j in jobs]}, fh)
    print(json.dumps(summary(fabric, jobs, args.server_nics)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
