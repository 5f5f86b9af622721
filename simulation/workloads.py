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

from controller import __version__
from controller.errors import InputError
from controller.model.clos import Clos, load_fabric
from controller.model.jobs import Flow, Job


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


PAPER_FABRIC_HINT = ("The paper's fabric (2048 hosts) fits up to 5 jobs: python -m controller "
                     "fabric --spines 32 --leaves 64 --hosts-per-leaf 32")


def nics_needed(models: list[str], ring_size: int) -> int:
    """NICs (hosts) the jobs take: ring_size replicas of TP x PP GPUs per job.

    >>> nics_needed(paper_models(3, 4), 4)
    960
    """
    return sum(ring_size * MODELS[name].gpus for name in models)


def _need_text(models: list[str], ring_size: int) -> str:
    parts = ", ".join(f"{name} {ring_size} x {MODELS[name].gpus}" for name in models)
    return f"the jobs need {nics_needed(models, ring_size)} hosts ({parts})"


def generate(fabric: Clos, models: list[str], ring_size: int, seed: int = 1234,
             start_range: tuple[float, float] = (1.0, 10.0)) -> list[Job]:
    if ring_size < 2:
        raise InputError("ring size must be at least 2")
    for name in models:
        if name not in MODELS:
            raise InputError(f"unknown model {name!r} (choose from {', '.join(MODELS)})")
    need = nics_needed(models, ring_size)
    rng = random.Random(seed)
    free = hosts_by_leaf(fabric)
    per_leaf = max((len(h) for h in free.values()), default=0)
    if per_leaf == 0:
        raise InputError("the fabric has no hosts")
    if need > len(fabric.hosts):
        raise InputError(f"{_need_text(models, ring_size)}; the fabric has {len(fabric.hosts)} "
                         f"hosts. {PAPER_FABRIC_HINT}")
    jobs = []
    for k, name in enumerate(models):
        model = MODELS[name]
        replicas = [_place_replica(model.gpus, free, per_leaf, rng, name,
                                   _need_text(models, ring_size))
                    for _ in range(ring_size)]
        rings = [[replicas[r][i] for r in range(ring_size)] for i in range(model.gpus)]
        start = rng.uniform(*start_range) + model.compute_s
        jobs.append(Job(f"{name}-{k}", rings=rings, ring_bytes=model.shard_bytes,
                        start_s=round(start, 6), compute_s=model.compute_s))
    return jobs


def _place_replica(gpus: int, free: dict[str, list[str]], per_leaf: int, rng: random.Random,
                   name: str, need: str = "") -> list[str]:
    whole, rest = divmod(gpus, per_leaf)
    empty = [leaf for leaf, hosts in free.items() if len(hosts) == per_leaf]
    if len(empty) < whole:
        raise InputError(f"not enough free leaves to place a {name} replica ({gpus} NICs: "
                         f"{whole} whole leaves of {per_leaf} hosts"
                         + (f" and {rest} more" if rest else "") + ")"
                         + (f"; {need}. {PAPER_FABRIC_HINT}" if need else ""))
    nics = []
    for leaf in rng.sample(empty, whole):
        nics += free[leaf]
        free[leaf] = []
    if rest:
        fits = [leaf for leaf, hosts in free.items() if len(hosts) >= rest]
        if not fits:
            raise InputError(f"not enough free NICs to place a {name} replica ({rest} NICs "
                             "on one leaf)" + (f"; {need}. {PAPER_FABRIC_HINT}" if need else ""))
        leaf = rng.choice(fits)
        nics += free[leaf][:rest]
        free[leaf] = free[leaf][rest:]
    return nics


def hosts_by_leaf(fabric: Clos) -> dict[str, list[str]]:
    """leaf -> its hosts, every leaf in declaration order (a host counted once: on its leaf of
    the first plane), as placements draw from them.

    >>> hosts_by_leaf(Clos.generate(2, 2, 1))
    {'l0': ['h0_0'], 'l1': ['h1_0']}
    """
    out: dict[str, list[str]] = {leaf: [] for leaf in fabric.leaves}
    for host, leaf in fabric.hosts.items():
        out[leaf].append(host)
    return out


# ---- other parallelism patterns (issue 23): explicit flows, seeded ------------------------
def _free_hosts(fabric: Clos, count: int, rng: random.Random, used: set) -> list[str]:
    hosts = [h for h in sorted(fabric.hosts) if h not in used]
    if len(hosts) < count:
        raise InputError(f"not enough free hosts: {count} wanted, {len(hosts)} free")
    picked = rng.sample(hosts, count)
    used.update(picked)
    return picked


def all_to_all(fabric: Clos, sizes: list[int], flow_bytes: float = 64e6, seed: int = 1,
               compute_s: float = 0.0, used: set | None = None) -> list[Job]:
    """Mixture-of-experts all-to-all: one job per group of ``sizes[k]`` members (16-64 in
    practice) on random free hosts; every member sends ``flow_bytes`` to every other member
    (one step: the token dispatch)."""
    rng, used = random.Random(seed), set() if used is None else used
    jobs = []
    for k, n in enumerate(sizes):
        if n < 2:
            raise InputError("an all-to-all group needs at least 2 members")
        members = _free_hosts(fabric, n, rng, used)
        jobs.append(Job(f"moe-{k}", explicit=[Flow(f"moe-{k}", a, b, flow_bytes)
                                              for a in members for b in members if a != b],
                        compute_s=compute_s))
    return jobs


def pipeline(fabric: Clos, stages: list[int], activation_bytes: float = 256e6,
             gradient_ratio: float = 0.5, seed: int = 1, compute_s: float = 0.0,
             used: set | None = None) -> list[Job]:
    """Pipeline-parallel jobs, one per entry of ``stages`` (its stage count), stages on random
    free hosts: activations forward stage i -> i + 1 (``activation_bytes``), gradients back
    i + 1 -> i (``gradient_ratio`` times as many bytes: the two directions differ)."""
    rng, used = random.Random(seed), set() if used is None else used
    jobs = []
    for k, n in enumerate(stages):
        if n < 2:
            raise InputError("a pipeline needs at least 2 stages")
        hosts = _free_hosts(fabric, n, rng, used)
        jid = f"pipe-{k}"
        flows = [Flow(jid, hosts[i], hosts[i + 1], activation_bytes) for i in range(n - 1)]
        flows += [Flow(jid, hosts[i + 1], hosts[i], activation_bytes * gradient_ratio)
                  for i in range(n - 1)]
        jobs.append(Job(jid, explicit=flows, compute_s=compute_s))
    return jobs


def hybrid(fabric: Clos, dp: int, pp: int, tp: int, grad_bytes: float = 2e9,
           activation_bytes: float = 256e6, tensor_bytes: float = 64e6, seed: int = 1,
           compute_s: float = 1.0, name: str = "3d", used: set | None = None) -> list[Job]:
    """A 3D-parallel model as two jobs: ``<name>-dp``, one data-parallel ring per (stage,
    tensor rank) across the ``dp`` replicas (different leaves when the fabric allows), and
    ``<name>-mp``: pipeline flows between consecutive stages of a replica (activations forward,
    half as many gradient bytes back) plus tensor-parallel all-to-all among the ``tp`` GPUs of
    a stage, which sit on one leaf. Each (replica, stage) takes ``tp`` free hosts of a random
    leaf."""
    rng, used = random.Random(seed), set() if used is None else used
    free = {leaf: [h for h in hosts if h not in used]
            for leaf, hosts in sorted(hosts_by_leaf(fabric).items())}
    gpu = {}  # (replica, stage) -> tp hosts on one leaf
    for r in range(dp):
        for s in range(pp):
            fits = [leaf for leaf, hosts in free.items() if len(hosts) >= tp]
            if not fits:
                raise InputError("not enough free hosts for the 3D-parallel job")
            leaf = rng.choice(fits)
            gpu[(r, s)], free[leaf] = free[leaf][:tp], free[leaf][tp:]
            used.update(gpu[(r, s)])
    rings = [[gpu[(r, s)][t] for r in range(dp)] for s in range(pp) for t in range(tp)]
    jobs = []
    if dp >= 2:
        jobs.append(Job(f"{name}-dp", rings=rings, ring_bytes=grad_bytes / (pp * tp),
                        compute_s=compute_s))
    mid = f"{name}-mp"
    flows = []
    for r in range(dp):
        for s in range(pp):
            here = gpu[(r, s)]
            flows += [Flow(mid, a, b, tensor_bytes) for a in here for b in here if a != b]
            if s + 1 < pp:
                nxt = gpu[(r, s + 1)]
                flows += [Flow(mid, a, b, activation_bytes) for a, b in zip(here, nxt)]
                flows += [Flow(mid, b, a, activation_bytes / 2) for a, b in zip(here, nxt)]
    if flows:
        jobs.append(Job(mid, explicit=flows, compute_s=compute_s))
    return jobs


def byte_mix(fabric: Clos, jobs: int, flows_per_job: int, small: float = 10e6,
             ratio: float = 100.0, seed: int = 1, compute_s: float = 0.0) -> list[Job]:
    """Jobs of explicit flows between random host pairs whose sizes differ ``ratio`` times:
    every flow is ``small`` or ``small * ratio`` bytes at random (a byte mix flow counts
    cannot see). Hosts may carry flows of several jobs."""
    rng = random.Random(seed)
    hosts = sorted(fabric.hosts)
    out = []
    for k in range(jobs):
        jid = f"mix-{k}"
        flows = []
        for _ in range(flows_per_job):
            a, b = rng.sample(hosts, 2)
            flows.append(Flow(jid, a, b, small * (ratio if rng.random() < 0.5 else 1.0)))
        out.append(Job(jid, explicit=flows, compute_s=compute_s))
    return out


def main(argv=None) -> int:
    from controller.jsonio import HelpFormatter, read_json, write_output
    ap = argparse.ArgumentParser(prog="python -m simulation.workloads",
                                 formatter_class=HelpFormatter,
                                 description="Generate the paper's training jobs (GPT-3, BLOOM, "
                                             "LLaMA2-70B ring All-Reduce) placed on a fabric.")
    ap.add_argument("--version", action="version", version=f"mlroute-workloads {__version__}")
    ap.add_argument("--fabric", required=True, metavar="FILE", help="fabric document")
    ap.add_argument("--models", help=f"comma-separated, e.g. bloom,llama2-70b (of "
                                     f"{', '.join(MODELS)})")
    ap.add_argument("--jobs", type=int, help="the paper's model mix for this many jobs "
                                             "(default: 1, without --models)")
    ap.add_argument("--ring-size", type=int, default=4, help="replicas per job")
    ap.add_argument("--seed", type=int, default=1234, help="placement seed")
    ap.add_argument("--out", metavar="FILE",
                    help="write the jobs to FILE and print one line saying so (default: print "
                         "them)")
    args = ap.parse_args(argv)
    try:
        fabric = load_fabric(read_json(args.fabric, "fabric"))
        if args.models:
            models = [m.strip() for m in args.models.split(",") if m.strip()]
        else:
            models = paper_models(args.jobs or 1, args.ring_size)
        jobs = generate(fabric, models, args.ring_size, args.seed)
        write_output(json.dumps({"jobs": [j.to_dict() for j in jobs]}), args.out,
                     f"{len(jobs)} jobs ({', '.join(j.id for j in jobs)}), "
                     f"{sum(len(j.flows()) for j in jobs)} flows")
    except InputError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
