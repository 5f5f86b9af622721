"""The paper's training workloads: GPT-3, BLOOM and LLaMA2-70B jobs doing ring All-Reduce.

A job of model M with ring size n has n data-parallel replicas of TP x PP GPUs (one NIC each).
Ring i joins GPU i of every replica, so the job has TP*PP rings of n members, each reducing the
per-GPU gradient shard S = 4 bytes x params / (TP*PP). Placement (paper.md section 3.3): each
replica takes whole free leaves at random, and any remainder from one more random leaf with
enough free NICs; replicas never share a NIC. Jobs start at uniform [1 s, 10 s] plus one compute
gap. Seeded.

    python -m simulation.workloads --fabric F --models bloom,llama2-70b --ring-size 4 --seed 1234
"""
from __future__ import annotations

import argparse
import json
import random
import sys
from dataclasses import dataclass

from controller.errors import InputError
from controller.model.fabric import Fabric
from controller.model.jobs import Job


@dataclass(frozen=True)
class Model:
    name: str
    params: float
    tp: int
    pp: int
    compute_s: float  # compute gap per iteration on A100 (paper.md section 3.1)

    @property
    def gpus(self) -> int:
        return self.tp * self.pp

    @property
    def shard_bytes(self) -> float:
        return 4 * self.params / self.gpus


MODELS = {
    "gpt3": Model("gpt3", 175e9, 8, 8, 1.010),
    "bloom": Model("bloom", 176e9, 4, 12, 1.239),
    "llama2-70b": Model("llama2-70b", 70e9, 8, 16, 2.692),
}


def paper_models(jobs: int, ring_size: int) -> list[str]:
    """The model mix of one grid cell (paper.md section 8.1)."""
    if not 1 <= jobs <= 5:
        raise InputError("the paper's grid has 1 to 5 jobs")
    if ring_size == 8:
        if jobs > 3:
            raise InputError("the paper runs ring size 8 with at most 3 jobs")
        mix = ["bloom", "gpt3", "llama2-70b"]
    else:
        mix = ["bloom", "llama2-70b", "gpt3", "bloom", "gpt3"]
    return mix[:jobs]


def generate(fabric: Fabric, models: list[str], ring_size: int, seed: int = 1234,
             start_range: tuple[float, float] = (1.0, 10.0)) -> list[Job]:
    if ring_size < 2:
        raise InputError("ring size must be at least 2")
    rng = random.Random(seed)
    free = {leaf: list(hosts) for leaf, hosts in fabric.hosts_of_leaf.items()}
    per_leaf = max((len(h) for h in free.values()), default=0)
    if per_leaf == 0:
        raise InputError("the fabric has no hosts")
    jobs = []
    for k, name in enumerate(models):
        try:
            model = MODELS[name]
        except KeyError:
            raise InputError(f"unknown model {name!r} (choose from {', '.join(MODELS)})") from None
        replicas = [_place_replica(model.gpus, free, per_leaf, rng, name)
                    for _ in range(ring_size)]
        rings = [[replicas[r][i] for r in range(ring_size)] for i in range(model.gpus)]
        start = rng.uniform(*start_range) + model.compute_s
        jobs.append(Job(f"{name}-{k}", rings=rings, ring_bytes=model.shard_bytes,
                        start_s=round(start, 6), compute_s=model.compute_s))
    return jobs


def _place_replica(gpus: int, free: dict[str, list[str]], per_leaf: int, rng: random.Random,
                   name: str) -> list[str]:
    whole, rest = divmod(gpus, per_leaf)
    empty = [leaf for leaf, hosts in free.items() if len(hosts) == per_leaf]
    if len(empty) < whole:
        raise InputError(f"not enough free leaves to place a {name} replica")
    nics = []
    for leaf in rng.sample(empty, whole):
        nics += free[leaf]
        free[leaf] = []
    if rest:
        fits = [leaf for leaf, hosts in free.items() if len(hosts) >= rest]
        if not fits:
            raise InputError(f"not enough free NICs to place a {name} replica")
        leaf = rng.choice(fits)
        nics += free[leaf][:rest]
        free[leaf] = free[leaf][rest:]
    return nics


def main(argv=None) -> int:
    from controller.jsonio import read_json, write_output
    ap = argparse.ArgumentParser(prog="python -m simulation.workloads",
                                 description="generate the paper's training jobs")
    ap.add_argument("--fabric", required=True)
    ap.add_argument("--models", help="comma-separated, e.g. bloom,llama2-70b")
    ap.add_argument("--jobs", type=int, help="the paper's model mix for this many jobs")
    ap.add_argument("--ring-size", type=int, default=4)
    ap.add_argument("--seed", type=int, default=1234)
    ap.add_argument("--out")
    args = ap.parse_args(argv)
    try:
        fabric = Fabric.from_dict(read_json(args.fabric, "fabric"))
        if args.models:
            models = [m.strip() for m in args.models.split(",") if m.strip()]
        else:
            models = paper_models(args.jobs or 1, args.ring_size)
        jobs = generate(fabric, models, args.ring_size, args.seed)
    except InputError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    write_output(json.dumps({"jobs": [j.to_dict() for j in jobs]}), args.out, echo=False)
    return 0


if __name__ == "__main__":
    sys.exit(main())
